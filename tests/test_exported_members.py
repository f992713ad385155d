"""``piagent.__all__`` is the public surface: sorted, complete, and every name resolves."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import piagent


def test_all_is_sorted() -> None:
    assert piagent.__all__ == sorted(piagent.__all__)


def test_every_name_in_all_is_an_attribute() -> None:
    missing = [name for name in piagent.__all__ if not hasattr(piagent, name)]
    assert missing == []


def test_every_public_class_or_function_of_piagent_is_in_all() -> None:
    exported = set(piagent.__all__)
    public = {
        name
        for name, value in vars(piagent).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", "").split(".")[0] == "piagent"
    }
    assert sorted(public - exported) == []


# --------------------------------------------------------------------------- one exception tree

_BUILTIN_RAISES = re.compile(r"\braise (ValueError|TypeError|KeyError|LookupError|Exception)\(")
_TOOL_MODULES = {"tools/files.py", "tools/command.py"}  # a tool's OSError/RuntimeError is its error result


def test_every_exception_class_piagent_defines_derives_from_piagent_error() -> None:
    import importlib
    import inspect
    import pkgutil

    import piagent
    from piagent.exceptions import PiAgentError

    outside = []
    for info in pkgutil.walk_packages(piagent.__path__, "piagent."):
        if info.name.endswith("llama_cpp") or ".cli" in info.name and info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as exc:  # an extra's dependency (redis, celery...) not installed here
            if (exc.name or "").startswith("piagent"):
                raise
            continue
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and not name.startswith("_")
                and not issubclass(value, PiAgentError)
            ):
                outside.append(f"{info.name}.{name}")
    assert outside == []


def test_piagent_raises_its_own_exceptions_not_bare_builtins() -> None:
    root = Path(piagent_root())
    found = [
        f"{path.relative_to(root)}:{number}"
        for path in sorted(root.rglob("*.py"))
        if path.relative_to(root).as_posix() not in _TOOL_MODULES
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _BUILTIN_RAISES.search(line)
    ]
    assert found == []


def piagent_root() -> str:
    import piagent

    return str(Path(piagent.__file__).parent)
