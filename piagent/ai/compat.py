"""The ``model.compat`` flags: per-model wire differences, checked wherever a user gives them.

:data:`COMPAT_FLAGS` names every flag piagent reads and the values it takes (what each one does:
``docs/servers.md#overriding``). A model's ``compat`` is checked when it is set (``Model(...)``,
``custom_model``, ``dataclasses.replace``, ``model.compat = ...``): an unknown key or a value
outside the flag's values raises :class:`~piagent.exceptions.InvalidValueError` or
:class:`~piagent.exceptions.InvalidTypeError` naming the key, the closest known key and the
allowed values. Catalogue data is read with :func:`known_compat` instead: a catalogue made by a
newer piagent may carry a flag this one does not know, which is left out with a one-time
warning rather than refusing the whole catalogue. A provider that reads a flag of its own
declares it with :func:`register_compat_flag`.
"""

from __future__ import annotations

import difflib
import threading
from collections.abc import Mapping
from typing import Any, Optional

from ..exceptions import InvalidTypeError, InvalidValueError, PiAgentError
from .capabilities import warn_once

__all__ = ["COMPAT_FLAGS", "check_compat", "known_compat", "parse_compat_value", "register_compat_flag"]

_BOOLEAN = (True, False)

#: Every compat flag and its allowed values, by name.
COMPAT_FLAGS: dict[str, tuple[Any, ...]] = {
    "max_tokens_field": ("max_completion_tokens", "max_tokens"),
    "send_reasoning_back": _BOOLEAN,
    "streams_tool_choice_auto": _BOOLEAN,
    "structured_output_form": ("json_schema", "json_object"),
    "supports_developer_role": _BOOLEAN,
    "supports_mid_convo_system_messages": _BOOLEAN,
    "supports_mid_convo_tool_changes": _BOOLEAN,
    "supports_null_content": _BOOLEAN,
    "supports_prompt_cache_key": _BOOLEAN,
    "supports_prompt_cache_retention": _BOOLEAN,
    "supports_reasoning_effort": _BOOLEAN,
    "supports_structured_output": _BOOLEAN,
    "supports_usage_in_streaming": _BOOLEAN,
    "tool_call_ids": ("openai", "mistral"),
    "tool_result_name": _BOOLEAN,
}
_flags_lock = threading.Lock()


def register_compat_flag(name: str, values: tuple[Any, ...]) -> None:
    """Declare the compat flag ``name`` a provider reads, with its allowed ``values`` (booleans or
    strings), so models may set it. Raises for a name piagent already uses with other values."""
    if not isinstance(name, str) or not name:
        raise InvalidTypeError(f"a compat flag's name must be a non-empty string; got {name!r}")
    if not values or not all(isinstance(v, (bool, str)) for v in values):
        raise InvalidValueError(f"compat flag {name!r}: its values must be booleans or strings; got {values!r}")
    with _flags_lock:
        if COMPAT_FLAGS.get(name, tuple(values)) != tuple(values):
            raise InvalidValueError(f"compat flag {name!r} is already declared with the values {_spell(name)}")
        COMPAT_FLAGS[name] = tuple(values)


def check_compat(compat: Any) -> dict[str, Any]:
    """A copy of ``compat`` once every key is a known flag and every value one of its values.

    Raises :class:`InvalidTypeError` for something that is not a mapping of names, or a value of
    the wrong kind; :class:`InvalidValueError` for an unknown key or a value not allowed."""
    if not isinstance(compat, Mapping):
        raise InvalidTypeError(
            f"compat must be a dict of flags, e.g. {{'supports_null_content': True}}; got {compat!r}"
        )
    for key, value in compat.items():
        _check_flag(key, value)
    return dict(compat)


def known_compat(compat: Any, source: str) -> Optional[dict[str, Any]]:
    """``compat`` from catalogue data (``source`` names it; None stays None) without the flags
    this piagent does not know or the values it cannot use, each left out with a one-time warning."""
    if compat is None:
        return None
    if not isinstance(compat, Mapping):
        raise InvalidTypeError(f"{source}: compat must be an object; got {compat!r}")
    kept: dict[str, Any] = {}
    for key, value in compat.items():
        try:
            _check_flag(key, value)
        except PiAgentError as exc:
            warn_once(("compat", source, key), f"{source}: {exc}; left out (a newer piagent may know it)")
        else:
            kept[key] = value
    return kept


def parse_compat_value(key: str, text: str) -> Any:
    """The value of flag ``key`` written as text (the command line's ``KEY=VALUE``): ``true`` or
    ``false`` (any case; ``1`` or ``0``) for a yes/no flag, else one of its values, bare or as a
    JSON string. Raises like :func:`check_compat`."""
    _check_key(key)
    allowed = COMPAT_FLAGS[key]
    spelled = text.strip()
    if _is_boolean(allowed):
        value: Any = {"true": True, "1": True, "false": False, "0": False}.get(spelled.lower(), spelled)
    elif len(spelled) >= 2 and spelled[0] == spelled[-1] == '"':
        value = spelled[1:-1]
    else:
        value = spelled
    _check_flag(key, value, command_line=True)
    return value


def _is_boolean(allowed: tuple[Any, ...]) -> bool:
    return all(isinstance(v, bool) for v in allowed)


def _check_key(key: Any) -> None:
    if not isinstance(key, str):
        raise InvalidTypeError(f"compat keys are flag names (strings); got {key!r}")
    if key not in COMPAT_FLAGS:
        close = difflib.get_close_matches(key, list(COMPAT_FLAGS), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise InvalidValueError(f"unknown compat flag {key!r}: {hint}known flags: {', '.join(sorted(COMPAT_FLAGS))}")


def _check_flag(key: Any, value: Any, command_line: bool = False) -> None:
    _check_key(key)
    allowed = COMPAT_FLAGS[key]
    if any(type(value) is type(v) and value == v for v in allowed):
        return
    wrong_kind = not any(type(value) is type(v) for v in allowed)
    error = InvalidTypeError if wrong_kind else InvalidValueError
    raise error(f"compat flag {key!r} must be {_spell(key, command_line)}; got {value!r}")


def _spell(key: str, command_line: bool = False) -> str:
    spelled = [(str(v).lower() if isinstance(v, bool) else v) if command_line else repr(v) for v in COMPAT_FLAGS[key]]
    return " or ".join(spelled)
