"""How a model is driven: its thinking controls and what its API rejects, as data.

Every catalogue model carries a :class:`Capabilities` (``model.capabilities``); request
builders read it and never look at the model id. The rules are written out in
``docs/models.md#capabilities``; in short:

* ``thinking`` is the control the model has: ``"none"`` (it never reasons), ``"budget"``
  (a token budget: Anthropic ``budget_tokens``, Gemini 2.x ``thinkingBudget``),
  ``"adaptive"`` (Anthropic ``thinking: {type: "adaptive"}`` + ``output_config.effort``),
  ``"level"`` (Gemini 3+ ``thinkingLevel``), ``"effort"`` (OpenAI ``reasoning.effort`` /
  ``reasoning_effort``) or ``"toggle"`` (DeepSeek ``thinking: {type}`` + ``reasoning_effort``).
* ``efforts`` are the wire values the model accepts, lowest first. piagent's levels
  (``minimal`` .. ``max``) map to the same value when the model has it, else to the next
  higher one it has, else to its highest (:func:`effort_for`).
* ``thinking_off`` says how "off" is said: ``"disabled"`` (an explicit switch), ``"none"``
  (the effort value ``none``), ``"zero_budget"`` (``thinkingBudget: 0``), ``"omit"`` (sending
  nothing is off), ``"between_tools"`` (Anthropic ``thinking: {type: "between_tools"}``: no
  up-front thinking, short notes between tool calls); ``None`` when the model always thinks:
  "off" becomes its lowest effort.
* ``effort_map`` maps a piagent level to the wire value where the provider documents its own
  mapping (DeepSeek: ``xhigh`` is ``high``); other levels round as above.
* ``sampling``: ``"always"``, ``"without_thinking"`` (temperature only while thinking is off)
  or ``"never"``. A rejected temperature is left out with a one-time warning.
* ``forced_tool_choice``: False when the model refuses a forced tool choice ("required" or a
  named tool); such a choice is sent as "auto" with a one-time warning.
* ``chat_tools_with_reasoning``: False when OpenAI Chat Completions refuses function tools while
  the model reasons; on a model that always reasons, tools then need the Responses API.
* ``system_messages_in_place``: the model accepts system (developer) messages after the
  conversation started, so a transcript's later system messages are sent where they stand
  rather than folded into the system prompt; ``tool_changes_in_place``: it also accepts tool
  changes there (Anthropic ``tool_addition``/``tool_removal`` blocks, OpenAI Responses
  ``additional_tools`` items). A model's ``compat`` may set either for one model
  (:func:`system_messages_in_place`, :func:`tool_changes_in_place`).

What a provider was seen to refuse (``piagent/ai/providers/_rejections.py``) is learned as
changes to these fields, per model, and :func:`capabilities_of` applies them (:func:`learn`).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Optional

from ..exceptions import InvalidValueError

__all__ = [
    "THINKING_LEVELS",
    "Capabilities",
    "allowed_temperature",
    "allowed_tool_choice",
    "capabilities_of",
    "effort_for",
    "forget_learned",
    "is_forced",
    "learn",
    "learned",
    "lowest_effort",
    "plan_thinking",
    "system_messages_in_place",
    "thinks",
    "tool_changes_in_place",
    "warn_if_thinking_ignored",
    "warn_once",
]

logger = logging.getLogger("piagent")

#: piagent's thinking levels above "off", lowest first (``StreamOptions.reasoning``).
THINKING_LEVELS = ("minimal", "low", "medium", "high", "xhigh", "max")
#: Every effort value an API may use, lowest first (the order :func:`effort_for` rounds in).
_EFFORT_ORDER = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
_THINKING_MODES = ("none", "budget", "adaptive", "level", "effort", "toggle")
_THINKING_OFF = (None, "disabled", "none", "zero_budget", "omit", "between_tools")
_MAX_TOKENS_FIELDS = (None, "max_completion_tokens", "max_tokens")


@dataclass(frozen=True)
class Capabilities:
    """What a model accepts (immutable); see the module docstring and ``docs/models.md#capabilities``."""

    thinking: str = "none"
    efforts: tuple[str, ...] = ()
    thinking_off: Optional[str] = "omit"
    sampling: str = "always"
    forced_tool_choice: bool = True
    #: Chat Completions: ``"max_completion_tokens"`` or ``"max_tokens"`` (None: decided by the server).
    max_tokens_field: Optional[str] = None
    #: Gemini: a function call in the current turn must carry a thought signature.
    thought_signatures: bool = False
    #: Anthropic: ``thinking.display`` may be set (piagent asks for ``"summarized"``).
    thinking_display: bool = False
    #: Anthropic budget thinking: send the interleaved-thinking beta header with tools.
    interleaved_thinking_beta: bool = False
    #: OpenAI Chat Completions: False when function tools are refused together with reasoning
    #: (the request then reasons at the model's "off" setting, with a one-time warning).
    chat_tools_with_reasoning: bool = True
    #: OpenAI: the request takes ``prompt_cache_options`` (mode, ttl; GPT-5.6 and later).
    prompt_cache_options: bool = False
    #: A transcript's later system messages are sent where they stand (pi-ai 1.6's
    #: ``supportsMidConvoSystemMessages``), not folded into the system prompt.
    system_messages_in_place: bool = False
    #: Tool changes are sent where they stand too (pi-ai 1.6's ``supportsMidConvoToolChanges`` on
    #: Anthropic, ``supportsAdditionalTools`` on OpenAI Responses); needs ``system_messages_in_place``.
    tool_changes_in_place: bool = False
    #: (piagent level, wire effort) pairs where the provider documents its own mapping; given
    #: and written (``to_dict``, the catalogue) as a mapping, kept as pairs so the value stays frozen.
    effort_map: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.thinking not in _THINKING_MODES:
            raise InvalidValueError(f"thinking must be one of {', '.join(_THINKING_MODES)}; got {self.thinking!r}")
        object.__setattr__(self, "efforts", tuple(self.efforts))  # a list from JSON becomes a tuple
        unknown = [e for e in self.efforts if e not in _EFFORT_ORDER]
        if unknown:
            raise InvalidValueError(f"unknown effort values {unknown}; known: {', '.join(_EFFORT_ORDER)}")
        given: Any = self.effort_map  # a mapping from JSON, or pairs
        pairs = dict(given.items() if isinstance(given, Mapping) else given)
        bad = {k: v for k, v in pairs.items() if k not in THINKING_LEVELS or v not in self.efforts}
        if bad:
            raise InvalidValueError(f"effort_map must map piagent levels to accepted efforts; got {bad}")
        ordered = tuple(sorted(pairs.items(), key=lambda pair: THINKING_LEVELS.index(pair[0])))
        object.__setattr__(self, "effort_map", ordered)
        if self.sampling not in ("always", "without_thinking", "never"):
            raise InvalidValueError(f"sampling must be always, without_thinking or never; got {self.sampling!r}")
        if self.thinking_off not in _THINKING_OFF:
            raise InvalidValueError(f"thinking_off must be one of {_THINKING_OFF}; got {self.thinking_off!r}")
        if self.max_tokens_field not in _MAX_TOKENS_FIELDS:
            raise InvalidValueError(
                f"max_tokens_field must be one of {_MAX_TOKENS_FIELDS}; got {self.max_tokens_field!r}"
            )

    @property
    def reasoning(self) -> bool:
        return self.thinking != "none"

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["efforts"] = list(self.efforts)
        out["effort_map"] = dict(self.effort_map)
        return out

    def changed(self, changes: Mapping[str, Any]) -> Capabilities:
        """These capabilities with ``changes`` (fields) applied. New ``efforts`` drop the
        ``effort_map`` entries whose value they no longer hold (those levels then round as any
        other), unless ``changes`` give an ``effort_map`` too."""
        if "efforts" in changes and "effort_map" not in changes:
            kept = tuple((level, wire) for level, wire in self.effort_map if wire in changes["efforts"])
            changes = {**changes, "effort_map": kept}
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Capabilities:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidValueError(f"unknown capability fields {unknown}; known: {sorted(known)}")
        return cls(**dict(data))


def effort_for(level: str, efforts: Sequence[str]) -> str:
    """The effort value for piagent's ``level``: itself if accepted, else the next higher
    accepted one, else the highest accepted. Raises ``ValueError`` for an unknown level."""
    if level not in THINKING_LEVELS:
        raise InvalidValueError(f"Unknown reasoning level {level!r}: use one of {', '.join(THINKING_LEVELS)}")
    usable = [e for e in _EFFORT_ORDER if e in efforts and e != "none"]
    if not usable:
        return level
    rank = _EFFORT_ORDER.index(level)
    for effort in usable:
        if _EFFORT_ORDER.index(effort) >= rank:
            return effort
    return usable[-1]


def lowest_effort(efforts: Sequence[str]) -> Optional[str]:
    """The lowest effort that still thinks (what "off" becomes on a model that always thinks)."""
    usable = [e for e in _EFFORT_ORDER if e in efforts and e != "none"]
    return usable[0] if usable else None


_warned: set = set()
_warned_lock = threading.Lock()


def warn_once(key: Any, message: str) -> None:
    """Log ``message`` as a warning the first time ``key`` is seen in this process."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    logger.warning(message)


#: What a Model declared by hand without capabilities gets, per API (the behaviour before the
#: capabilities table): budget thinking on Anthropic and Gemini, low..high effort on OpenAI.
BUDGET_DEFAULT = Capabilities(thinking="budget", efforts=THINKING_LEVELS, sampling="without_thinking")
EFFORT_DEFAULT = Capabilities(thinking="effort", efforts=("low", "medium", "high"))
NO_THINKING = Capabilities()


#: Capability changes learned from a provider's refusals, by (provider, model id); bounded by
#: the models a process talks to. Applied by capabilities_of().
_learned: dict[tuple[str, str], dict[str, Any]] = {}
_learned_lock = threading.Lock()


def capabilities_of(model: Any, reasoning_default: Capabilities) -> Capabilities:
    """``model.capabilities``, else ``reasoning_default`` for a reasoning model, else no thinking;
    with what was learned about the model (:func:`learn`) applied."""
    if model.capabilities is not None:
        caps: Capabilities = model.capabilities
    else:
        caps = reasoning_default if model.reasoning else NO_THINKING
    with _learned_lock:
        changes = _learned.get((model.provider, model.id))
    return caps.changed(changes) if changes else caps


def learn(provider: str, model_id: str, changes: Mapping[str, Any], *, warned: bool = False) -> None:
    """Apply ``changes`` (capability fields) to every later request to ``provider:model_id``.

    ``warned``: the caller's warning already said what follows from them, so the one-time
    warnings of a refused temperature or forced tool choice are not given again for the model.
    """
    Capabilities.from_dict(changes)  # only known fields with valid values
    with _learned_lock:
        _learned.setdefault((provider, model_id), {}).update(changes)
    if warned:
        said: list[tuple[Any, ...]] = []
        if changes.get("forced_tool_choice") is False:
            said.append(("forced-choice", provider, model_id))
        if changes.get("sampling") == "never":
            said += [("temperature", provider, model_id, thinking) for thinking in (False, True)]
        with _warned_lock:
            _warned.update(said)


def learned() -> dict[tuple[str, str], dict[str, Any]]:
    """A copy of every learned change, by (provider, model id)."""
    with _learned_lock:
        return {key: dict(changes) for key, changes in _learned.items()}


def forget_learned() -> None:
    """Forget every learned change (tests; a model whose rules changed back)."""
    with _learned_lock:
        _learned.clear()


#: The ``model.compat`` keys that set :attr:`Capabilities.system_messages_in_place` and
#: :attr:`Capabilities.tool_changes_in_place` for one model (a custom model, a proxy).
SYSTEM_MESSAGES_COMPAT = "supports_mid_convo_system_messages"
TOOL_CHANGES_COMPAT = "supports_mid_convo_tool_changes"


def _in_place(model: Any, compat_key: str, field: str) -> bool:
    compat = model.compat or {}
    if compat_key in compat:
        return bool(compat[compat_key])
    return bool(getattr(capabilities_of(model, NO_THINKING), field))


def system_messages_in_place(model: Any) -> bool:
    """Whether ``model`` takes a transcript's later system messages where they stand: its
    ``compat``'s ``supports_mid_convo_system_messages`` when given, else its capabilities."""
    return _in_place(model, SYSTEM_MESSAGES_COMPAT, "system_messages_in_place")


def tool_changes_in_place(model: Any) -> bool:
    """Whether ``model`` takes tool changes where they stand (``compat`` key
    ``supports_mid_convo_tool_changes``, else its capabilities); never without
    :func:`system_messages_in_place`."""
    return system_messages_in_place(model) and _in_place(model, TOOL_CHANGES_COMPAT, "tool_changes_in_place")


def thinks(model: Any) -> bool:
    """True if ``model`` can think (its capabilities say so, else its ``reasoning`` flag)."""
    return model.capabilities.reasoning if model.capabilities is not None else bool(model.reasoning)


def warn_if_thinking_ignored(model: Any, level: Optional[str]) -> None:
    """Warn once per model when a thinking level is asked of a model that cannot think."""
    if level not in (None, "off") and not thinks(model):
        warn_once(
            ("thinking ignored", model.provider, model.id),
            f"{model.provider}:{model.id} does not think: thinking level {level!r} is ignored",
        )


def plan_thinking(caps: Capabilities, level: Optional[str]) -> tuple[bool, Optional[str]]:
    """``(thinking on, effort)`` for piagent's ``level`` (None = off): see docs/models.md#thinking-levels.

    Off stays off where the model allows it; a model that always thinks gets its lowest effort.
    """
    if caps.thinking == "none":
        return False, None
    if level is None or level == "off":
        if caps.thinking_off is not None:
            return False, None
        return True, lowest_effort(caps.efforts)
    mapped = dict(caps.effort_map).get(level)
    if mapped is not None:
        return True, mapped
    return True, effort_for(level, caps.efforts)


def allowed_temperature(
    model: Any, caps: Capabilities, temperature: Optional[float], thinking: bool
) -> Optional[float]:
    """``temperature`` unless the model rejects it now (then None, with a one-time warning)."""
    if temperature is None:
        return None
    if caps.sampling == "never" or (caps.sampling == "without_thinking" and thinking):
        why = "" if caps.sampling == "never" else " while thinking"
        warn_once(
            ("temperature", model.provider, model.id, thinking),
            f"{model.provider}:{model.id} rejects temperature{why}: it is left out of the request",
        )
        return None
    return temperature


def is_forced(choice: Any) -> bool:
    """True for a tool choice that forces a call: ``"required"`` or ``{"name": ...}``."""
    return choice == "required" or isinstance(choice, Mapping)


def allowed_tool_choice(model: Any, caps: Capabilities, choice: Any) -> Any:
    """``choice``, or ``"auto"`` (one-time warning) when it forces a call the model refuses."""
    if not is_forced(choice) or caps.forced_tool_choice:
        return choice
    warn_once(
        ("forced-choice", model.provider, model.id),
        f"{model.provider}:{model.id} refuses a forced tool choice; "
        'it is sent as "auto" (the model may answer without calling the tool)',
    )
    return "auto"
