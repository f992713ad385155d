"""Validated agent options (internal): public attributes checked on construction and assignment.

A bad value raises ``TypeError`` (wrong kind of object) or ``ValueError`` (right kind, bad
value) with the option's name in the message, and leaves the previous value in place.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

__all__ = [
    "Option",
    "TOOL_EXECUTION_MODES",
    "TRANSPORTS",
    "callable_or_none",
    "choice",
    "executor_or_none",
    "positional_arity",
    "positive_int_or_none",
    "positive_number_or_none",
    "budgets_or_none",
    "non_negative_int_or_none",
    "non_negative_number_or_none",
    "optional_choice",
    "str_or_none",
    "tool_choice_or_none",
]

Check = Callable[[str, Any], Any]

TOOL_EXECUTION_MODES = ("parallel", "sequential")
TRANSPORTS = ("auto", "sse", "websocket", "websocket-cached")
CACHE_RETENTIONS = ("none", "short", "long")


class Option:
    """A data descriptor that validates with ``check(name, value)`` before storing."""

    def __init__(self, check: Check) -> None:
        self._check = check
        self._name = ""
        self._slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name
        self._slot = "_option_" + name

    def __get__(self, obj: Any, owner: Optional[type] = None) -> Any:
        if obj is None:
            return self
        return getattr(obj, self._slot)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj, self._slot, self._check(self._name, value))


def callable_or_none(name: str, value: Any) -> Any:
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be callable or None, got {type(value).__name__}")
    return value


def choice(*allowed: str) -> Check:
    def check(name: str, value: Any) -> Any:
        if value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
        return value

    return check


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def positive_int_or_none(name: str, value: Any) -> Any:
    if value is not None and (not _is_int(value) or value < 1):
        raise ValueError(f"{name} must be a positive int or None, got {value!r}")
    return value


def non_negative_int_or_none(name: str, value: Any) -> Any:
    if value is not None and (not _is_int(value) or value < 0):
        raise ValueError(f"{name} must be a non-negative int or None, got {value!r}")
    return value


def positive_number_or_none(name: str, value: Any) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0):
        raise ValueError(f"{name} must be a positive number of seconds or None, got {value!r}")
    return value


def non_negative_number_or_none(name: str, value: Any) -> Any:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0):
        raise ValueError(f"{name} must be a non-negative number or None, got {value!r}")
    return value


def optional_choice(*allowed: str) -> Check:
    """None or one of ``allowed``."""

    def check(name: str, value: Any) -> Any:
        if value is not None and value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))} or None, got {value!r}")
        return value

    return check


def str_or_none(name: str, value: Any) -> Any:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a str or None, got {type(value).__name__}")
    return value


def budgets_or_none(name: str, value: Any) -> Optional[dict[str, int]]:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) and _is_int(v) and v >= 0 for k, v in value.items()):
        raise ValueError(f"{name} must map thinking levels to token counts (dict of str -> int), got {value!r}")
    return dict(value)


def tool_choice_or_none(name: str, value: Any) -> Any:
    """None, "auto", "none", "required", or ``{"name": <tool name>}`` (copied)."""
    if value is None or (isinstance(value, str) and value in ("auto", "none", "required")):
        return value
    if isinstance(value, dict) and set(value) == {"name"} and isinstance(value["name"], str) and value["name"]:
        return dict(value)
    raise ValueError(f'{name} must be None, "auto", "none", "required" or {{"name": <tool>}}, got {value!r}')


def executor_or_none(name: str, value: Any) -> Any:
    if value is not None and not callable(getattr(value, "submit", None)):
        raise TypeError(f"{name} must be a concurrent.futures.Executor (something with submit()), got {value!r}")
    return value


_POSITIONAL: tuple[Any, ...] = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def positional_arity(fn: Callable[..., Any]) -> Optional[int]:
    """How many positional arguments ``fn`` takes; None if unlimited (``*args``) or unknown."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    count = 0
    for parameter in parameters:
        if parameter.kind == inspect.Parameter.VAR_POSITIONAL:
            return None
        if parameter.kind in _POSITIONAL:
            count += 1
    return count
