"""Every lint ignore in the repository names its code and says why (``# noqa: CODE -- reason``)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("piagent", "tests", "tests_local", "tests_mcp", "tests_remote", "scripts", "benchmarks", "examples")
NOQA = re.compile(r"#\s*noqa\b(?P<rest>.*)", re.IGNORECASE)
REASON = re.compile(r"^:\s*[A-Z]+[0-9]+(\s*,\s*[A-Z]+[0-9]+)*\s+\S")  # the codes, then why


def unexplained_ignores(source: str) -> list[int]:
    """The lines whose ``noqa`` comment names no code or gives no reason after it."""
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            match = NOQA.search(token.string)
            if match and not REASON.match(match.group("rest")):
                found.append(token.start[0])
    return found


def test_the_check_finds_a_bare_ignore_and_accepts_an_explained_one() -> None:
    source = "import a  # noqa: F401\nimport b  # noqa\nimport c  # noqa: F401 -- registers itself\n"
    assert unexplained_ignores(source) == [1, 2]


def test_every_noqa_comment_names_its_code_and_says_why() -> None:
    bare = [
        f"{path.relative_to(ROOT)}:{line}"
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line in unexplained_ignores(path.read_text(encoding="utf-8"))
    ]
    assert bare == []
