"""Side effects exactly once: intents before effects, recovery by policy (docs/effects.md).

Before a tool call executes, its *intent* (call id, tool, validated arguments, time, worker,
idempotency key) is stored durably by the run's :class:`IntentJournal` (a session is one);
a call whose intent cannot be stored does not run. On resume (the first run on a reloaded
transcript: ``continue_()`` or ``prompt()``), a call of the transcript's last tool batch
that has an intent and no result is settled by ``recover_interrupted``: by the
``recover_tool_call`` hook if it decides, else by its tool's ``replay`` policy. A call
without an intent never started: it is left to the model.

``replay="safe"`` tools record no intent (running them again is harmless, so recovery does
the same with or without one): their calls cost no write.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from typing_extensions import Literal, Protocol

from .abort import AbortSignal
from .ai.types import AssistantMessage, ToolCall

if TYPE_CHECKING:
    from .types import AgentContext, AgentTool, AgentToolResult

__all__ = [
    "INTENT_TYPE",
    "IntentJournal",
    "RecoverToolCall",
    "RecoveryContext",
    "RecoveryDecision",
    "ToolIntent",
    "check_journal",
    "idempotency_key",
    "interrupted_calls",
    "worker_id",
]

INTENT_TYPE = "piagent.tool_intent"
"""The ``customType`` of a session's intent entries (pi ignores custom entries)."""

RecoveryAction = Literal["rerun", "done", "fail"]


@dataclass(frozen=True)
class ToolIntent:
    """A tool call about to execute: what ran where, and the key it may pass on."""

    tool_call_id: str
    tool_name: str
    arguments: Any
    recorded_at: float
    worker: str
    key: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "arguments": self.arguments,
            "recordedAt": self.recorded_at,
            "worker": self.worker,
            "key": self.key,
        }

    @classmethod
    def from_dict(cls, data: Any) -> Optional[ToolIntent]:
        """The intent a stored record describes; None for a record that is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("toolCallId"), str):
            return None
        return cls(
            data["toolCallId"],
            str(data.get("toolName", "")),
            data.get("arguments"),
            float(data.get("recordedAt") or 0.0),
            str(data.get("worker", "")),
            str(data.get("key", "")),
        )


class IntentJournal(Protocol):
    """Where a run's intents are stored (a :class:`~piagent.sessions.Session` is one).

    ``scope``: a stable id of the run's store (the session id), the prefix of every
    idempotency key. ``record_intents(intents)`` stores them all at once and returns only once
    they are durable; it raises when it cannot. ``intents()``: the recorded ones by call id.
    Optional: ``resumable(call_ids)``, the calls among those (without an intent) that were
    cleared to run and never started (an approval kept for them): recovery runs them.
    """

    @property
    def scope(self) -> str: ...

    def record_intents(self, intents: Sequence[ToolIntent]) -> None: ...

    def intents(self) -> dict[str, ToolIntent]: ...


def check_journal(name: str, value: Any) -> Any:
    """An Agent option's check: None or an object with ``scope``, ``record_intents`` and ``intents``."""
    from .exceptions import InvalidTypeError

    if value is None or all(hasattr(value, attr) for attr in ("scope", "record_intents", "intents")):
        return value
    raise InvalidTypeError(f"{name} must have scope, record_intents() and intents(), got {type(value).__name__}")


@dataclass
class RecoveryContext:
    """What ``recover_tool_call`` sees: an interrupted call, its tool (None if no longer
    offered), its recorded intent and the context it resumes in."""

    tool_call: ToolCall
    tool: Optional[AgentTool]
    intent: ToolIntent
    context: AgentContext


@dataclass
class RecoveryDecision:
    """How to settle an interrupted call: ``"rerun"`` it, mark it ``"done"`` with ``result``
    (as if the tool had returned it), or ``"fail"`` it with an error result saying ``reason``."""

    action: RecoveryAction
    result: Optional[AgentToolResult] = None
    reason: Optional[str] = None


RecoverToolCall = Callable[[RecoveryContext, AbortSignal], Optional[RecoveryDecision]]

_current_key: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("piagent_idempotency_key", default=None)


def idempotency_key() -> Optional[str]:
    """The running tool call's idempotency key (``"<session id>:<tool call id>"``), None outside a call.

    Stable across a crash and a recovery's re-run: pass it to the system the tool changes
    (a payment API's idempotency key, ``INSERT ... ON CONFLICT``) so a re-run is harmless there.
    """
    return _current_key.get()


@contextlib.contextmanager
def running_with_key(key: str) -> Iterator[None]:
    """Make ``key`` what :func:`idempotency_key` returns while the call runs on this thread."""
    token = _current_key.set(key)
    try:
        yield
    finally:
        _current_key.reset(token)


def key_for(journal: Optional[IntentJournal], call_id: str) -> str:
    return f"{journal.scope}:{call_id}" if journal is not None else call_id


def worker_id() -> str:
    """This process: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def intent_for(journal: IntentJournal, call: ToolCall, tool_name: str, args: Any) -> ToolIntent:
    return ToolIntent(
        call.id, tool_name, _jsonable(args, call.arguments), time.time(), worker_id(), key_for(journal, call.id)
    )


def _jsonable(args: Any, raw: Any) -> Any:
    """The validated arguments as JSON; the model's raw ones when they have no JSON form."""
    from .schema import jsonable

    try:
        value = jsonable(args)
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return raw


def interrupted_calls(messages: Sequence[Any]) -> tuple[Optional[AssistantMessage], list[ToolCall]]:
    """The last assistant message with tool calls and its calls that have no result after it.

    Only the transcript's last batch can be interrupted: a later user or assistant message
    means the run went on past it. A failed or length-cut message's calls never ran.
    """
    answered: set[str] = set()
    for message in reversed(messages):
        role = getattr(message, "role", None)
        if role == "toolResult":
            answered.add(getattr(message, "tool_call_id", ""))
            continue
        if isinstance(message, AssistantMessage) and message.stop_reason not in ("error", "aborted", "length"):
            return message, [call for call in message.tool_calls if call.id not in answered]
        return None, []
    return None, []


def interrupted_text(name: str) -> str:
    return (
        f"Tool {name} was interrupted: the process running it stopped before its result was recorded, "
        "so its outcome is unknown. It was not run again (its replay policy is 'never'). "
        "Check whether it took effect before calling it again."
    )
