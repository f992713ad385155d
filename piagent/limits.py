"""Usage limits: bound what a run, or an agent's lifetime, may spend (docs/limits.md).

* :class:`UsageLimits` says how many requests, tokens, tool calls and how much money a scope
  (``"run"``, the default, or ``"agent"``: every run of the agent object) may use.
* :class:`UsageTotals` is what was used: requests and tool calls made, input tokens (cached
  ones included), output tokens, total tokens, cost in USD.
* :class:`UsageGuard` counts and enforces them on a loop config through pi 1.6's hooks:
  ``prepare_request`` (before each request) and ``before_tool_call`` (after each response,
  before each of its calls runs). It counts from the events the run emits: every assistant
  message is a request and its usage, a tool result's ``usage`` (the tool's own model calls)
  adds tokens and cost, and **any other event with a** :class:`~piagent.ai.Usage` **in its
  ``usage`` attribute** is a request of its own (a compaction summary, another feature's model
  call): that is how other features report what they spend.

Reaching a limit asks ``on_limit(reached, signal)``, if set, for raised limits; without them
the run ends: the calls of the response that reached it get error results, and the next
request raises :class:`~piagent.exceptions.UsageLimitExceeded` instead of being made (the
``Agent`` turns it into a failed assistant message, docs/loop.md#rule-22).
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from typing_extensions import Literal

from .abort import AbortSignal
from .ai.types import Usage
from .events import UsageLimitEvent
from .exceptions import InvalidTypeError, InvalidValueError, UsageLimitExceeded
from .types import (
    AgentLoopConfig,
    BeforeToolCall,
    BeforeToolCallContext,
    BeforeToolCallResult,
    PrepareRequest,
    PrepareRequestContext,
    RequestUpdate,
)

__all__ = [
    "LIMIT_REACHED",
    "LimitReached",
    "LimitScope",
    "OnLimit",
    "UsageGuard",
    "UsageLimits",
    "UsageMeter",
    "UsageTotals",
    "check_usage_limits",
]

LimitScope = Literal["run", "agent"]

LIMIT_REACHED = "Usage limit reached"
"""How the message of a reached limit begins (the error of a run it ended)."""
Emit = Callable[[Any], None]

_COUNTERS = ("requests", "input_tokens", "output_tokens", "total_tokens", "cost", "tool_calls")
_BEFORE_REQUEST = ("requests", "input_tokens", "output_tokens", "total_tokens", "cost")
_BEFORE_TOOL_CALL = ("input_tokens", "output_tokens", "total_tokens", "cost", "tool_calls")
_LOOP_EVENTS = frozenset(
    (
        "agent_start",
        "agent_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_update",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "model_fallback",
        "usage_limit",
    )
)


@dataclass(frozen=True)
class UsageLimits:
    """The most a scope may use; None leaves a counter unbounded.

    ``requests``: model calls; ``input_tokens``: prompt tokens, cached ones included;
    ``output_tokens``; ``total_tokens``; ``cost``: USD, from the models' prices;
    ``tool_calls``: calls allowed to run. ``scope``: ``"run"`` (each run counts from zero) or
    ``"agent"`` (every run of the agent object, from its construction).
    """

    requests: Optional[int] = None
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None
    total_tokens: Optional[int] = None
    cost: Optional[float] = None
    tool_calls: Optional[int] = None
    scope: LimitScope = "run"

    def __post_init__(self) -> None:
        for name in _COUNTERS:
            value = getattr(self, name)
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if value is not None and (not number or value < 0 or math.isnan(value)):
                raise InvalidValueError(f"UsageLimits.{name} must be a non-negative number or None, got {value!r}")
            if value is not None and name != "cost" and not isinstance(value, int):
                raise InvalidValueError(f"UsageLimits.{name} must be an int or None, got {value!r}")
        if self.scope not in ("run", "agent"):
            raise InvalidValueError(f'UsageLimits.scope must be "run" or "agent", got {self.scope!r}')

    def replace(self, **changes: Any) -> UsageLimits:
        """A copy with ``changes`` (what an ``on_limit`` hook returns to raise a limit)."""
        return dataclasses.replace(self, **changes)


@dataclass
class UsageTotals:
    """What a scope used (see :class:`UsageLimits` for the meaning of each counter)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cost: float = 0.0
    tool_calls: int = 0

    def add(self, usage: Usage, requests: int = 0) -> None:
        """Add a response's (or a tool's) usage, and ``requests`` model calls."""
        self.requests += requests
        self.input_tokens += usage.input + usage.cache_read + usage.cache_write
        self.output_tokens += usage.output
        self.total_tokens += usage.total_tokens or (usage.input + usage.output + usage.cache_read + usage.cache_write)
        self.cost += usage.cost.total


class UsageMeter:
    """:class:`UsageTotals` updated on the run thread and read from any thread (a copy)."""

    def __init__(self) -> None:
        self._totals = UsageTotals()
        self._lock = threading.Lock()

    def totals(self) -> UsageTotals:
        with self._lock:
            return dataclasses.replace(self._totals)

    def add(self, usage: Optional[Usage] = None, requests: int = 0, tool_calls: int = 0) -> None:
        with self._lock:
            if usage is not None:
                self._totals.add(usage, requests)
            else:
                self._totals.requests += requests
            self._totals.tool_calls += tool_calls

    def observe(self, event: Any) -> None:
        """Count an event: an assistant message's request and usage, a tool result's usage, or
        another feature's event carrying a ``usage`` (one request of its own)."""
        kind = event.type
        if kind == "message_end":
            message = event.message
            role = getattr(message, "role", None)
            usage = getattr(message, "usage", None)
            if role == "assistant" and isinstance(usage, Usage):
                self.add(usage, requests=1)
            elif role == "toolResult" and isinstance(usage, Usage):
                self.add(usage)
        elif kind not in _LOOP_EVENTS:
            usage = getattr(event, "usage", None)
            if isinstance(usage, Usage):
                self.add(usage, requests=1)


@dataclass(frozen=True)
class LimitReached:
    """A limit that the next request or tool call would go past: ``name`` (a counter of
    :class:`UsageLimits`), its ``limit``, what was ``used``, the ``scope``, the ``limits`` in
    force there and that scope's ``usage``."""

    name: str
    limit: float
    used: float
    scope: LimitScope
    limits: UsageLimits
    usage: UsageTotals

    @property
    def message(self) -> str:
        """``"Usage limit reached: cost $0.0300 of $0.02 per run"``, ``"... requests 3 of 3 for this agent"``."""
        where = "per run" if self.scope == "run" else "for this agent"
        cost = self.name == "cost"
        amounts = f"${self.used:.4f} of ${self.limit:g}" if cost else f"{self.used:,} of {self.limit:,}"
        return f"{LIMIT_REACHED}: {self.name.replace('_', ' ')} {amounts} {where}"


OnLimit = Callable[[LimitReached, AbortSignal], Optional[UsageLimits]]
"""``on_limit(reached, signal)``: raised limits for ``reached.scope`` (e.g.
``reached.limits.replace(cost=2.0)``) to go on, or None to end the run. Runs on the run thread;
it may block (ask a person) and should return when the signal is aborted."""


def check_usage_limits(value: Union[UsageLimits, Iterable[UsageLimits], None]) -> tuple[UsageLimits, ...]:
    """The ``usage_limits`` option: one :class:`UsageLimits`, several (one per scope), or None."""
    if value is None:
        return ()
    items = (value,) if isinstance(value, UsageLimits) else tuple(value) if isinstance(value, (list, tuple)) else None
    if items is None or not all(isinstance(item, UsageLimits) for item in items):
        raise InvalidTypeError(f"usage_limits must be a UsageLimits, a list of them or None, got {value!r}")
    scopes = [item.scope for item in items]
    if len(set(scopes)) != len(scopes):
        raise InvalidValueError("usage_limits takes at most one UsageLimits per scope ('run', 'agent')")
    return items


class UsageGuard:
    """Counts a run's usage and enforces its limits (module docstring; docs/limits.md).

    ``limits``: per scope; ``lifetime``: the meter of the ``"agent"`` scope (kept across runs by
    the caller; a new one if None); ``on_limit``: asked when a limit is reached;
    ``on_raise(old, new)``: told when ``on_limit`` raised the limits of a scope.
    :meth:`install` wires it into a loop config and its ``emit``.
    """

    def __init__(
        self,
        limits: Iterable[UsageLimits] = (),
        *,
        lifetime: Optional[UsageMeter] = None,
        on_limit: Optional[OnLimit] = None,
        on_raise: Optional[Callable[[UsageLimits, UsageLimits], None]] = None,
    ) -> None:
        self.limits = {item.scope: item for item in check_usage_limits(list(limits))}
        self.run = UsageMeter()
        self.lifetime = lifetime if lifetime is not None else UsageMeter()
        self._on_limit = on_limit
        self._on_raise = on_raise
        self._stopped: Optional[LimitReached] = None
        self._emit: Optional[Emit] = None

    def install(self, config: AgentLoopConfig, emit: Emit, **changes: Any) -> tuple[AgentLoopConfig, Emit]:
        """A copy of the config with ``changes`` (more fields set in the same copy) and the checks
        wrapped around its ``prepare_request`` and ``before_tool_call`` (which run first;
        ``before_tool_call`` also counts the calls allowed to run), and an ``emit`` that counts
        each event before passing it on."""
        self._emit = emit
        run, lifetime = self.run, self.lifetime

        def counting_emit(event: Any) -> None:
            if event.type not in _LOOP_EVENTS:  # one set look-up for the rest: every streamed delta
                run.observe(event)
                lifetime.observe(event)
            emit(event)

        user_prepare: Optional[PrepareRequest] = changes.get("prepare_request", config.prepare_request)
        user_before: Optional[BeforeToolCall] = changes.get("before_tool_call", config.before_tool_call)

        def prepare_request(request: PrepareRequestContext, signal: AbortSignal) -> Optional[RequestUpdate]:
            change = user_prepare(request, signal) if user_prepare is not None else None
            reached = self._check(_BEFORE_REQUEST, signal)
            if reached is not None:
                raise UsageLimitExceeded(reached.message, reached)
            return change

        def before_tool_call(call: BeforeToolCallContext, signal: AbortSignal) -> Optional[BeforeToolCallResult]:
            verdict = user_before(call, signal) if user_before is not None else None
            if verdict is not None and not (isinstance(verdict, BeforeToolCallResult) and not verdict.block):
                return verdict  # blocked, or a wrong answer the loop reports: the call does not run
            reached = self._check(_BEFORE_TOOL_CALL, signal)
            if reached is not None:
                return BeforeToolCallResult(block=True, reason=f"{reached.message}: the call was not run")
            self.run.add(tool_calls=1)
            self.lifetime.add(tool_calls=1)
            return verdict

        # tool calls are counted when allowed to run, limits or not; requests need no hook without limits
        changes["before_tool_call"] = before_tool_call
        if self.limits:
            changes["prepare_request"] = prepare_request
        return dataclasses.replace(config, **changes), counting_emit

    def _check(self, counters: tuple[str, ...], signal: AbortSignal) -> Optional[LimitReached]:
        """None when the next request (or call) may go; else the limit that stops it, once
        ``on_limit`` declined."""
        if self._stopped is not None:
            return self._stopped
        while True:
            reached = self._first_reached(counters)
            if reached is None:
                return None
            raised = self._on_limit(reached, signal) if self._on_limit is not None and not signal.aborted else None
            if raised is not None and not isinstance(raised, UsageLimits):
                raise InvalidTypeError(f"on_limit must return UsageLimits or None, got {type(raised).__name__}")
            if raised is not None:
                raised = raised.replace(scope=reached.scope)
            still = raised is None or signal.aborted or _reached_by(raised, reached.name, reached.used)
            self._event(reached, None if still else raised)
            if still:
                self._stopped = reached
                return reached
            assert raised is not None
            self.limits[reached.scope] = raised
            if self._on_raise is not None:
                self._on_raise(reached.limits, raised)

    def _first_reached(self, counters: tuple[str, ...]) -> Optional[LimitReached]:
        for scope, limits in self.limits.items():
            meter = self.run if scope == "run" else self.lifetime
            totals = meter.totals()
            for name in counters:
                used = getattr(totals, name)
                if _reached_by(limits, name, used):
                    return LimitReached(name, getattr(limits, name), used, scope, limits, totals)
        return None

    def _event(self, reached: LimitReached, raised: Optional[UsageLimits]) -> None:
        if self._emit is not None:
            self._emit(UsageLimitEvent(reached, raised))


def _reached_by(limits: UsageLimits, name: str, used: float) -> bool:
    limit = getattr(limits, name)
    return limit is not None and used >= limit
