"""Learning what a model rejects from its answer (docs/providers.md#rejected-fields).

When a provider refuses an *optional* request field with an error that names it, the request
is sent once more without the field, or with the value the error says is supported; a
one-time warning names the model, the field and the provider's words, and the lesson holds for
that model for the rest of the process (:func:`piagent.ai.capabilities.learn`), and in the
user-level file when :func:`piagent.ai.remember_rejections` asked for it. A model released tomorrow with
a new rule costs a warning and one extra round trip, not an outage.

Only the rules of :data:`RULES` are recognised, each only in the error shape of its API
(:func:`_names_field`); a required field is in none of them. One retry per request at most,
and only before the response started streaming (:func:`open_learning` sees HTTP errors only).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ...exceptions import HttpStatusError
from .._learned import save_lessons
from ..capabilities import THINKING_LEVELS, Capabilities, capabilities_of, learn, lowest_effort, warn_once
from ..types import Model, StreamOptions
from ._common import open_request
from ._http import HttpStream

__all__ = [
    "RULES",
    "Rejection",
    "Rule",
    "open_learning",
    "recognise",
]


@dataclass(frozen=True)
class Rule:
    """One optional field a provider may refuse: where it is in a request of ``api``, the names
    an error uses for it, and what is learned (``kind``: ``off``, the thinking switch, also
    Anthropic's budget ``enabled`` that a model may refuse for ``adaptive``; ``effort``,
    ``tool_choice``, ``temperature``)."""

    api: str
    kind: str
    field: str  # as the request names it, for the warning
    path: tuple[str, ...]  # where the value is in the request body
    names: tuple[str, ...]  # the field as errors name it (OpenAI: error.param)


_ANTHROPIC, _RESPONSES, _COMPLETIONS, _GOOGLE = (
    "anthropic-messages",
    "openai-responses",
    "openai-completions",
    "google-generative-ai",
)
_THINKING_CONFIG = ("generationConfig", "thinkingConfig")

#: The recognised refusals (the table of docs/providers.md#rejected-fields).
RULES: tuple[Rule, ...] = (
    Rule(_ANTHROPIC, "off", "thinking.type", ("thinking", "type"), ("thinking.type",)),
    Rule(_ANTHROPIC, "effort", "output_config.effort", ("output_config", "effort"), ("effort", "valid levels")),
    Rule(_ANTHROPIC, "tool_choice", "tool_choice", ("tool_choice", "type"), ("tool_choice",)),
    Rule(_ANTHROPIC, "temperature", "temperature", ("temperature",), ("temperature",)),
    Rule(_RESPONSES, "effort", "reasoning.effort", ("reasoning", "effort"), ("reasoning.effort",)),
    Rule(_RESPONSES, "tool_choice", "tool_choice", ("tool_choice",), ("tool_choice",)),
    Rule(_RESPONSES, "temperature", "temperature", ("temperature",), ("temperature",)),
    Rule(_COMPLETIONS, "effort", "reasoning_effort", ("reasoning_effort",), ("reasoning_effort",)),
    Rule(_COMPLETIONS, "tool_choice", "tool_choice", ("tool_choice",), ("tool_choice",)),
    Rule(_COMPLETIONS, "temperature", "temperature", ("temperature",), ("temperature",)),
    Rule(
        _GOOGLE,
        "off",
        "thinkingConfig.thinkingBudget",
        _THINKING_CONFIG + ("thinkingBudget",),
        ("thinking_budget", "thinkingBudget", "Budget 0"),
    ),
    Rule(
        _GOOGLE,
        "effort",
        "thinkingConfig.thinkingLevel",
        _THINKING_CONFIG + ("thinkingLevel",),
        ("thinking_level", "thinkingLevel", "Thinking level"),
    ),
    Rule(
        _GOOGLE,
        "tool_choice",
        "toolConfig.functionCallingConfig",
        ("toolConfig", "functionCallingConfig", "mode"),
        ("function_calling_config", "functionCallingConfig", "tool_config", "toolConfig"),
    ),
    Rule(_GOOGLE, "temperature", "temperature", ("generationConfig", "temperature"), ("temperature",)),
)

_OFF_VALUES = ("disabled", "none", 0)  # what "off" is on the wire
_FORCED = ("any", "tool", "required", "ANY")  # a forced tool choice on the wire (dicts too)
_OPENAI_CODES = ("unsupported_parameter", "unsupported_value")
#: How a free-text error says a field is refused for the model (not that its value is out of range).
_REFUSED = re.compile(r"(?i)deprecated|not supported|unsupported|not (?:allowed|permitted)|cannot|may not|no longer")
_EFFORTS = ("none",) + THINKING_LEVELS


@dataclass(frozen=True)
class Rejection:
    """A recognised refusal: the rule, the value sent, the provider's words, and the capability
    changes that avoid it."""

    rule: Rule
    value: Any
    words: str
    changes: dict[str, Any]
    retry: str  # what the request does instead, for the warning


def _value_at(payload: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(payload, Mapping) or key not in payload:
            return None
        payload = payload[key]
    return payload


def _names_field(rule: Rule, error: HttpStatusError) -> bool:
    """True when ``error`` is ``rule.api``'s shape of a refusal naming ``rule``'s field."""
    if error.status != 400:
        return False
    if rule.api in (_RESPONSES, _COMPLETIONS):  # error.param + error.code
        code = error.fields.get("code", "")
        return error.fields.get("param") in rule.names and (
            code in _OPENAI_CODES or error.message.startswith("Unsupported")
        )
    if rule.api == _ANTHROPIC and error.fields.get("type") != "invalid_request_error":
        return False
    if rule.api == _GOOGLE and error.fields.get("status") != "INVALID_ARGUMENT":
        return False
    named = f"{error.message} {error.fields.get('violations', '')}"  # Gemini: details[].fieldViolations[].field
    return any(name in named for name in rule.names)


def _supported(words: str) -> list[str]:
    """The effort values an error lists as supported, quoted or not ("Supported values are:
    'low' and 'high'", "valid levels: low, medium, high")."""
    tail = re.split(r"(?i)supported values|valid levels|expected|should be", words, maxsplit=1)
    return [w for w in re.findall(r"[a-z]+", tail[1].lower()) if w in _EFFORTS] if len(tail) == 2 else []


def _changes(rule: Rule, value: Any, caps: Capabilities, words: str) -> Optional[tuple[dict[str, Any], str]]:
    """``(capability changes, what the retry does)`` for a refused ``value``, or None."""
    free_text = rule.api not in (_RESPONSES, _COMPLETIONS)
    if free_text and rule.kind in ("temperature", "tool_choice") and not _REFUSED.search(words):
        return None  # "must be between 0 and 2", "tool not found": about the value asked, not the model
    if rule.kind == "temperature":
        return {"sampling": "never"}, "without temperature"
    if rule.kind == "tool_choice":
        if not (value in _FORCED or isinstance(value, Mapping)):
            return None
        return {"forced_tool_choice": False}, 'with tool_choice "auto" (structured output: the native format)'
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    if rule.api == _ANTHROPIC and rule.kind == "off" and value == "enabled":  # budget thinking refused
        if "adaptive" not in words:
            return None
        efforts = tuple(e for e in caps.efforts if e not in ("none", "minimal")) or ("low", "medium", "high")
        return {"thinking": "adaptive", "efforts": efforts}, 'with thinking "adaptive" and output_config.effort'
    wire = value.lower() if isinstance(value, str) else value
    listed = tuple(_supported(words))
    changes: dict[str, Any]
    if rule.kind == "off" or wire == "none":
        if wire not in _OFF_VALUES:
            return None
        changes = {"thinking_off": None, "efforts": listed or tuple(e for e in caps.efforts if e != "none")}
    else:
        if free_text and str(value).lower() not in words.lower():
            return None  # free-text errors: the refused value must be named too
        changes = {"efforts": listed or tuple(e for e in caps.efforts if e != wire)}
    lowest = lowest_effort(changes["efforts"])
    if lowest is None:
        return None
    if "thinking_off" in changes:
        return changes, f"at the lowest setting ({lowest})"
    return changes, f"with efforts {', '.join(changes['efforts'])}"


def recognise(model: Model, caps: Capabilities, payload: Any, error: BaseException) -> Optional[Rejection]:
    """The :class:`Rejection` ``error`` is, for a request ``payload`` to ``model``; None when it
    names no optional field of :data:`RULES` that the request sent, or nothing would change."""
    if not isinstance(error, HttpStatusError):
        return None
    for rule in RULES:
        if rule.api != model.api or not _names_field(rule, error):
            continue
        value = _value_at(payload, rule.path)
        if value is None:
            continue
        found = _changes(rule, value, caps, error.message)
        if found is not None and caps.changed(found[0]) != caps:
            return Rejection(rule, value, error.message, *found)
    return None


# --------------------------------------------------------------------------- the retry


def open_learning(
    model: Model,
    options: StreamOptions,
    url: str,
    build: Callable[[], Any],
    key_headers: Callable[[str], dict[str, str]],
    default: Capabilities,
    fallback: Optional[Callable[[HttpStatusError], bool]] = None,
) -> HttpStream:
    """:func:`open_request` of ``build()``; when the provider refuses an optional field of it
    (:func:`recognise`), the lesson is learned and ``build()`` is sent once more (the only
    retry: a second refusal is the call's error). ``default`` is the API's capabilities for a
    model declared without them; ``fallback(error)``, asked when no rule matched, may learn
    something else (it returns True) for that one retry."""
    payload = build()
    try:
        return open_request(model, options, url, payload, key_headers)
    except HttpStatusError as error:
        rejection = recognise(model, capabilities_of(model, default), payload, error)
        if rejection is not None:
            _learn(model, rejection)
        elif fallback is None or not fallback(error):
            raise
    return open_request(model, options, url, build(), key_headers)


def _learn(model: Model, rejection: Rejection) -> None:
    learn(model.provider, model.id, rejection.changes, warned=True)
    saved = save_lessons(model.provider, model.id)
    where = f"; saved in {saved}" if saved else " for this process"
    rule = rejection.rule
    warn_once(
        ("rejected", model.provider, model.id, rule.kind, str(rejection.value)),
        f"{model.provider}:{model.id} refused {rule.field}={json.dumps(rejection.value)} "
        f'("{rejection.words}"): sent again {rejection.retry}, and remembered{where}',
    )
