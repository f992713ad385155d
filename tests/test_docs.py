"""The repository's own documents (docs/) are what the code cites: every citation resolves,
no citation points outside the repository, and every loop rule names tests that exist."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PACKAGE = ROOT / "piagent"

CITATION = re.compile(r"docs/([\w.-]+\.md)(?:#([\w-]+))?")
RELATIVE_LINK = re.compile(r"\]\((?!https?:)([\w.-]+\.md)?(?:#([\w-]+))?\)")
OUTSIDE_REFERENCE = re.compile(r"§|design\.md|\bspec [\dP]|\(P\d{1,2}\)|\bpitfall P\d")
RULE_HEADING = re.compile(r'<a id="rule-(\d+)"></a>\n### (\d+)\. ')
TEST_NAME = re.compile(r"`(test_\w+)`")


def slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(document: Path) -> set[str]:
    text = document.read_text(encoding="utf-8")
    found = {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.MULTILINE)}
    found.update(re.findall(r'<a (?:id|name)="([\w-]+)"></a>', text))
    return found


def unresolved(source: Path, citations: list[tuple[str, str]], relative_to: Path) -> list[str]:
    problems = []
    for name, anchor in citations:
        target = relative_to / name if name else source
        if not target.is_file():
            problems.append(f"{source.relative_to(ROOT)}: {name} does not exist")
        elif anchor and anchor not in anchors(target):
            problems.append(f"{source.relative_to(ROOT)}: {target.name} has no #{anchor}")
    return problems


def package_sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def repository_sources() -> list[Path]:
    """The package, the tests (this file excepted: it spells the patterns), benchmarks, examples, scripts."""
    found = [
        path
        for folder in ("piagent", "tests", "benchmarks", "examples", "scripts")
        for path in (ROOT / folder).rglob("*.py")
    ]
    return sorted(path for path in found if path != Path(__file__).resolve())


def test_every_docs_citation_in_the_code_resolves_to_a_file_and_anchor() -> None:
    problems: list[str] = []
    cited = 0
    for source in repository_sources():
        citations = CITATION.findall(source.read_text(encoding="utf-8"))
        cited += len(citations)
        problems += unresolved(source, citations, DOCS)
    assert problems == []
    assert cited >= 20  # the code does cite the documents


def test_every_link_between_the_documents_resolves() -> None:
    problems: list[str] = []
    for document in sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]:
        text = document.read_text(encoding="utf-8")
        problems += unresolved(document, CITATION.findall(text), DOCS)
        problems += unresolved(document, RELATIVE_LINK.findall(text), document.parent)
    assert problems == []


def test_the_code_cites_no_document_outside_the_repository() -> None:
    found = [
        f"{source.relative_to(ROOT)}:{number}: {line.strip()}"
        for source in repository_sources()
        for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE_REFERENCE.search(line)
    ]
    assert found == []


def test_loop_rules_are_numbered_in_order_each_with_its_anchor() -> None:
    text = (DOCS / "loop.md").read_text(encoding="utf-8")
    numbers = [(int(a), int(b)) for a, b in RULE_HEADING.findall(text)]
    assert numbers == [(n, n) for n in range(1, len(numbers) + 1)]
    assert len(numbers) == text.count('<a id="rule-')


def test_every_loop_rule_names_tests_that_exist() -> None:
    text = (DOCS / "loop.md").read_text(encoding="utf-8")
    defined = {
        name
        for path in (ROOT / "tests").rglob("test_*.py")
        for name in re.findall(r"^def (test_\w+)\(", path.read_text(encoding="utf-8"), re.MULTILINE)
    }
    rules = re.split(r'<a id="rule-\d+"></a>', text)[1:]
    missing = {}
    for number, rule in enumerate(rules, 1):
        named = TEST_NAME.findall(rule)
        assert named, f"rule {number} names no test"
        absent = [name for name in named if name not in defined]
        if absent:
            missing[number] = absent
    assert missing == {}


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted((ROOT / "examples").rglob("README.md"))]


def headings_without_a_blank_line_before(text: str) -> list[int]:
    """Line numbers of headings (outside fenced code) glued to the line above; an anchor
    (``<a id=...></a>``) right above a heading belongs to it."""
    found, fenced, previous = [], False, ""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,6} ", line) and previous.strip() and not previous.startswith("<a "):
            found.append(number)
        previous = line
    return found


def test_every_heading_has_a_blank_line_before_it() -> None:
    glued = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in markdown_files()
        for number in headings_without_a_blank_line_before(path.read_text(encoding="utf-8"))
    ]
    assert glued == []


def test_the_commands_the_readme_lists_are_each_listed_once() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = [line.split("#")[0].strip() for line in text.splitlines() if line.startswith("    piagent ")]
    assert sorted(c for c in set(commands) if commands.count(c) > 1) == []


PACKAGE_INSTALL = re.compile(r"pip install (-e )?'?piagent\[")


def test_install_commands_name_the_checkout_piagent_is_installed_from() -> None:
    """piagent is not on a package index: ``pip install 'piagent[x]'`` fails; the checkout's form works."""
    texts = [*markdown_files(), ROOT / "examples" / "notebook.ipynb", *sorted((ROOT / "examples").rglob("*.py"))]
    texts += [path for path in sorted(PACKAGE.rglob("*.py")) if path.name != "_extras.py"]  # it has the fallback
    wrong = [f"{path.relative_to(ROOT)}" for path in texts if PACKAGE_INSTALL.search(path.read_text(encoding="utf-8"))]
    assert wrong == []
