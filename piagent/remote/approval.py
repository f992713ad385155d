"""Approvals: a ``before_tool_call`` hook that asks another process (see docs/remote.md#approvals).

The worker records the pending call in the run's ``approvals`` hash, publishes an
``approval_request`` event and waits on the call's decision list. ``RunHandle.approve()`` /
``deny()`` run one Lua script: the first decision removes the call from the hash and pushes
itself; a decision on a call that is not pending changes nothing. The worker gives up on timeout
or abort with the opposite script, so a request is decided exactly once, either way.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Callable, Optional

import redis

from ..abort import AbortSignal
from ..exceptions import InvalidTypeError, InvalidValueError
from ..types import BeforeToolCallContext, BeforeToolCallResult
from ._keys import RUN_TTL_MS, RunKeys, redis_errors, write_with_ttl
from ._scripts import TAKE, WITHDRAW

__all__ = ["Approval"]

logger = logging.getLogger("piagent.remote")

DEFAULT_TIMEOUT = 300.0  # seconds a tool call waits for a decision
POLL = 0.05  # seconds between abort checks while waiting (the wait itself is a BLMOVE on Redis)

Hook = Callable[[BeforeToolCallContext, AbortSignal], Optional[BeforeToolCallResult]]


@dataclass(frozen=True)
class Approval:
    """Which tool calls wait for a decision from another process, and for how long.

    ``tools``: the tool names that need approval (None: every tool). ``timeout``: seconds to
    wait; then the call is blocked with "Approval timed out".
    """

    tools: Optional[Collection[str]] = None
    timeout: float = DEFAULT_TIMEOUT

    def __post_init__(self) -> None:
        if isinstance(self.tools, str):
            raise InvalidTypeError("Approval(tools=...) takes a collection of tool names, not one str")
        if not isinstance(self.timeout, (int, float)) or isinstance(self.timeout, bool) or self.timeout <= 0:
            raise InvalidValueError(f"Approval(timeout=...) must be a positive number of seconds, got {self.timeout!r}")

    def needs(self, tool_name: str) -> bool:
        return self.tools is None or tool_name in self.tools


def approval_hook(
    policy: Approval,
    client: redis.Redis,
    keys: RunKeys,
    publish: Callable[[dict[str, Any]], Any],
    inner: Optional[Hook],
) -> Hook:
    """A ``before_tool_call`` that runs ``inner`` (the agent's own hook) first, then asks for approval."""
    withdraw = client.register_script(WITHDRAW)
    take = client.register_script(TAKE)

    def before_tool_call(context: BeforeToolCallContext, signal: AbortSignal) -> Optional[BeforeToolCallResult]:
        if inner is not None:
            decision = inner(context, signal)
            if decision is not None and decision.block:
                return decision
        call = context.tool_call
        if not policy.needs(call.name):
            return None
        request = {"toolCallId": call.id, "toolName": call.name, "args": context.args, "timeout": policy.timeout}
        with redis_errors(f"approval request for tool call {call.id!r} of run {keys.run_id!r}"):
            kept = client.lindex(keys.approved(call.id), 0)  # taken by a worker that died before using it
            raw = None if kept is None else str(kept)
            if raw is None:
                write_with_ttl(client, keys, "HSET", keys.approvals, call.id, json.dumps(request, default=str))
                publish({"type": "approval_request", **request})
                held = [keys.decision(call.id), keys.approved(call.id)]
                raw = _wait(client, take, held, policy.timeout, signal)
                if raw is None:
                    raw = withdraw(keys=[keys.approvals, *held], args=[call.id, RUN_TTL_MS])
        outcome: dict[str, Any]
        if raw is None:
            reason = "Operation aborted" if signal.aborted else f"Approval timed out after {policy.timeout:g} s"
            outcome = {"approved": False, "reason": reason, "timedOut": not signal.aborted}
        else:
            outcome = _decision(raw, call.id, keys.run_id)
        publish({"type": "approval_decision", "toolCallId": call.id, **outcome})
        if outcome["approved"] is True:
            return None  # kept in the approved list until the call's intent uses it (docs/effects.md)
        with redis_errors(f"approval of tool call {call.id!r} of run {keys.run_id!r}"):
            client.delete(keys.approved(call.id))  # a denial is not kept
        return BeforeToolCallResult(block=True, reason=outcome.get("reason") or "Denied by the approver")

    return before_tool_call


def _decision(raw: str, call_id: str, run_id: str) -> dict[str, Any]:
    """A decision as written by ``RunHandle.approve``/``deny``: ``approved`` exactly ``true``
    approves; anything else (another value, not JSON, not an object) denies, with a warning
    for what is malformed."""
    try:
        decision = json.loads(raw)
    except (ValueError, RecursionError):
        decision = None
    if not isinstance(decision, dict) or not isinstance(decision.get("approved"), bool):
        logger.warning("run %r: a malformed decision on tool call %r denied it: %.200s", run_id, call_id, raw)
        return {"approved": False, "reason": "Denied: the decision was malformed"}
    reason = decision.get("reason")
    return {"approved": decision["approved"], "reason": reason if isinstance(reason, str) else None}


def _wait(client: redis.Redis, take: Any, held: list[str], timeout: float, signal: AbortSignal) -> Optional[str]:
    """Take the decision from ``held[0]`` into ``held[1]`` as soon as it comes, until ``timeout``
    passes or the run is aborted: taken, it outlives this process there, with its TTL.

    The wait is a BLMOVE of the list onto itself (in short slices), which leaves the decision in
    place; the ``TAKE`` script then moves it and sets the TTL in one step, so no approval is ever
    kept without one.
    """
    deadline = time.monotonic() + timeout
    while not signal.aborted:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if client.execute_command("BLMOVE", held[0], held[0], "LEFT", "RIGHT", min(POLL, left)) is not None:
            taken = take(keys=held, args=[RUN_TTL_MS])
            if taken is not None:
                return str(taken)
    return None
