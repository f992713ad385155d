"""The layers import in one direction (docs/architecture.md#what-may-import-what), checked on
the real import statements of the package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "piagent"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    """Every piagent module ``path`` imports, anywhere in it (relative imports resolved)."""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package.pop()
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "piagent" or name.startswith("piagent.")}


def sources(under: str) -> list[Path]:
    root = PACKAGE / under
    return sorted(root.rglob("*.py")) if root.is_dir() else [root.with_suffix(".py")]


def violations(under: str, allowed: tuple[str, ...]) -> list[str]:
    def ok(name: str) -> bool:
        return any(name == prefix or name.startswith(prefix + ".") for prefix in allowed)

    return [
        f"{module_name(path)} imports {name}"
        for path in sources(under)
        for name in sorted(imported_modules(path))
        if name != "piagent" and not ok(name)
    ]


def test_the_llm_layer_imports_nothing_of_the_agent_layer() -> None:
    shared = ("piagent.abort", "piagent.exceptions", "piagent._threads", "piagent._interrupts", "piagent._redaction")
    shared += ("piagent._extras", "piagent._files")  # _files: reading a file that may be hostile (a FIFO...)
    shared += ("piagent._untrusted_http",)  # shared with MCP's HTTP: the redirect rule and the inflater
    assert violations("ai", ("piagent.ai", "piagent.instrumentation", *shared)) == []


@pytest.mark.parametrize("under", ["loop", "executors", "_output_turns"])
def test_the_loop_imports_nothing_of_the_agent(under: str) -> None:
    allowed = ("piagent.ai", "piagent.abort", "piagent.exceptions", "piagent.events", "piagent.types")
    allowed += (
        "piagent.executors",
        "piagent._threads",
        "piagent._interrupts",
        "piagent.instrumentation",
        "piagent._output_turns",
        "piagent._effects",
    )
    assert violations(under, allowed) == []


def test_the_instrumentation_seam_imports_nothing_of_piagent_at_run_time() -> None:
    tree = ast.parse((PACKAGE / "instrumentation.py").read_text(encoding="utf-8"))
    runtime = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert [node.module for node in runtime if isinstance(node, ast.ImportFrom) and node.level] == []


def test_the_core_imports_the_otel_extension_only_inside_instrument() -> None:
    """``piagent.instrument()`` imports ``piagent.otel`` when called; nothing else in the core does."""
    outside = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "otel" in path.relative_to(PACKAGE).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        allowed = {
            id(node)
            for function in ast.walk(tree)
            if isinstance(function, ast.FunctionDef) and function.name == "instrument"
            for node in ast.walk(function)
        }
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in allowed:
                names = [alias.name for alias in node.names] + [getattr(node, "module", None) or ""]
                if any(name == "otel" or "otel" in name.split(".") for name in names):
                    outside.append(f"{module_name(path)}:{node.lineno}")
    assert outside == []


def test_the_import_check_sees_relative_imports() -> None:
    assert "piagent.ai.types" in imported_modules(PACKAGE / "loop.py")
    assert "piagent.abort" in imported_modules(PACKAGE / "ai" / "providers" / "_http.py")


def test_only_the_command_imports_sessions_and_sessions_import_no_command() -> None:
    """piagent.sessions sits on the core; the core reaches a session only through Agent(session=...)."""
    importers = {
        module_name(path)
        for path in PACKAGE.rglob("*.py")
        if not module_name(path).startswith("piagent.sessions")
        and any(name.startswith("piagent.sessions") for name in imported_modules(path))
    }
    assert importers == {"piagent.cli.sessions"}
    assert [
        name for path in sources("sessions") for name in imported_modules(path) if name.startswith("piagent.cli")
    ] == []
