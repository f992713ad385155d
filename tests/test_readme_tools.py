"""The README's "Tools" section shows the schema @tool really produces."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, List

from piagent import AgentTool

README = Path(__file__).resolve().parent.parent / "README.md"


def tools_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Tools\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def code_blocks(section: str, language: str) -> List[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)


def test_readme_tool_example_schema_matches_the_real_output() -> None:
    section = tools_section()
    example = code_blocks(section, "python")[0]
    namespace: Dict[str, Any] = {}
    exec(compile(example, str(README), "exec"), namespace)
    (tool,) = [value for value in namespace.values() if isinstance(value, AgentTool)]
    documented = json.loads(code_blocks(section, "json")[0])
    assert tool.parameters == documented
    assert f'`{tool.name}.description` is `"{tool.description}"`' in section


def test_readme_builtin_tools_example_runs(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "workspace").mkdir()
    monkeypatch.chdir(tmp_path)
    namespace: Dict[str, Any] = {}
    exec(code_blocks(tools_section(), "python")[1], namespace)
    assert [t.name for t in namespace["tools"]] == ["read_file", "list_dir", "write_file", "run_command", "calculator"]
