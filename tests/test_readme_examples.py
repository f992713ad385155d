"""The README's ```python blocks run as they are, in order, in one namespace (so it cannot rot)."""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

from piagent import AgentTool
from piagent.testing import FauxProvider

README = Path(__file__).resolve().parent.parent / "README.md"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.DOTALL | re.MULTILINE)


def test_readme_python_blocks_run(capsys) -> None:
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 3
    module = types.ModuleType("readme")  # a real module: dataclasses look their module up
    sys.modules["readme"] = module
    namespace = module.__dict__
    try:
        for index, block in enumerate(blocks):
            exec(compile(block, f"README.md python block {index + 1}", "exec"), namespace)
    finally:
        del sys.modules["readme"]
        for value in namespace.values():
            if isinstance(value, FauxProvider):
                value.unregister()
    printed = capsys.readouterr().out
    assert "2 + 3 = 5" in printed and "aborted" in printed
    assert "\nParis is the capital of France.\n" in printed  # the answer printed as it streams
    assert "Invoice(number='A-17', total=12.5, customer='Ada')" in printed  # the structured output
    assert "\n{'number': ''}\n" in printed and "# {'number': ''}: the output as it streams" in README.read_text()
    assert "False API_KEY=[redacted]\nTrue The user did not allow writing this file.\n" in printed  # approval


def test_readme_tools_section_shows_the_schema_tool_really_produces() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Tools\n")
    end = text.find("\n## ", start + 1)
    section = text[start : end if end != -1 else len(text)]
    namespace: dict = {"__name__": "readme"}
    exec(compile(python_blocks(section)[0], "README.md Tools example", "exec"), namespace)
    (decorated,) = [value for value in namespace.values() if isinstance(value, AgentTool)]
    (schema,) = re.findall(r"^```json\n(.*?)^```$", section, flags=re.DOTALL | re.MULTILINE)
    assert decorated.parameters == json.loads(schema)
    assert f'`{decorated.name}.description` is `"{decorated.description}"`' in section


def test_readme_examples_name_current_catalogue_models() -> None:
    from piagent.ai.models import get_model, get_providers

    providers = "|".join(get_providers())
    refs = set(re.findall(rf'"((?:{providers}):[\w./-]+)"', README.read_text(encoding="utf-8")))
    assert "anthropic:claude-sonnet-5" in refs
    for ref in refs:
        model = get_model(ref)
        assert f"{model.provider}:{model.id}" == ref and not model.shutdown, ref  # neither guessed nor retiring
