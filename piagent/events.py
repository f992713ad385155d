"""Agent events (docs/loop.md#rule-1 onwards): one dataclass per ``type``, named as in pi.

``to_dict()`` gives pi's camelCase JSON of an event (messages included), for logs and
``piagent --json``. Application messages without ``to_dict()`` are written as their
``__dict__``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

from typing_extensions import Literal

from .ai.types import AssistantMessage, AssistantMessageEvent, ToolResultMessage, Usage
from .schema import jsonable
from .types import AgentMessage, AgentToolResult, OutputValue

if TYPE_CHECKING:
    from .ai.types import Model
    from .compaction import CompactionResult
    from .limits import LimitReached, UsageLimits

__all__ = [
    "AgentEndEvent",
    "AgentEvent",
    "AgentStartEvent",
    "CompactionEndEvent",
    "CompactionReason",
    "CompactionStartEvent",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "ModelFallbackEvent",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "ToolRecoveryEvent",
    "TurnEndEvent",
    "TurnStartEvent",
    "UsageLimitEvent",
    "message_to_dict",
    "tool_result_to_dict",
]


def message_to_dict(message: AgentMessage) -> Any:
    to_dict = getattr(message, "to_dict", None)
    if to_dict is not None:
        return to_dict()
    return dict(getattr(message, "__dict__", {})) or message


def tool_result_to_dict(result: Any) -> dict[str, Any]:
    if not isinstance(result, AgentToolResult):
        return {"value": result}
    d: dict[str, Any] = {"content": [block.to_dict() for block in result.content or []]}
    if result.details is not None:
        d["details"] = result.details
    if result.structured_content is not None:
        d["structuredContent"] = result.structured_content
    if result.is_error:
        d["isError"] = True
    if result.usage is not None:
        d["usage"] = result.usage.to_dict()
    return d


@dataclass
class AgentStartEvent:
    type: Literal["agent_start"] = field(default="agent_start", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type}


@dataclass
class AgentEndEvent:
    """The run ended; ``output``: its structured output, when one was asked for and produced."""

    messages: list[AgentMessage]
    output: Optional[OutputValue] = None
    type: Literal["agent_end"] = field(default="agent_end", init=False)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.type, "messages": [message_to_dict(m) for m in self.messages]}
        if self.output is not None:
            d["output"] = self.output.data
        return d


@dataclass
class TurnStartEvent:
    type: Literal["turn_start"] = field(default="turn_start", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type}


@dataclass
class TurnEndEvent:
    message: AgentMessage
    tool_results: list[ToolResultMessage]
    type: Literal["turn_end"] = field(default="turn_end", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "message": message_to_dict(self.message),
            "toolResults": [m.to_dict() for m in self.tool_results],
        }


@dataclass
class MessageStartEvent:
    message: AgentMessage
    type: Literal["message_start"] = field(default="message_start", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "message": message_to_dict(self.message)}


@dataclass
class MessageUpdateEvent:
    """A streamed change of the assistant message.

    ``partial_output``: with a structured output, the answer's JSON parsed so far, set on the
    updates that extend it; else None. Like a partial tool call's ``arguments`` it is the live
    value, which later updates extend: copy it to keep it (docs/structured-output.md#streaming).
    """

    message: AssistantMessage
    assistant_message_event: AssistantMessageEvent
    partial_output: Any = None
    type: Literal["message_update"] = field(default="message_update", init=False)

    def to_dict(self, with_message: bool = True) -> dict[str, Any]:
        """pi's form; ``with_message=False`` leaves out the partial message (then the size, and
        the time to build it, do not grow with the answer)."""
        event = self.assistant_message_event.to_dict(with_partial=False)  # written once, as "message"
        d: dict[str, Any] = {"type": self.type}
        if with_message:
            d["message"] = self.message.to_dict()
        d["assistantMessageEvent"] = event
        if self.partial_output is not None:
            d["partialOutput"] = self.partial_output
        return d


@dataclass
class MessageEndEvent:
    message: AgentMessage
    type: Literal["message_end"] = field(default="message_end", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "message": message_to_dict(self.message)}


@dataclass
class ToolExecutionStartEvent:
    """``args``: the model's raw arguments, before validation; what ``execute`` received is on
    the update and end events as ``validated_args``."""

    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    type: Literal["tool_execution_start"] = field(default="tool_execution_start", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "toolCallId": self.tool_call_id, "toolName": self.tool_name, "args": self.args}


@dataclass
class ToolExecutionUpdateEvent:
    """``args`` are the model's raw arguments (as on ``tool_execution_start``);
    ``validated_args`` what ``execute`` received: validated, coerced, maybe changed by hooks."""

    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    partial_result: AgentToolResult
    validated_args: Any = None
    type: Literal["tool_execution_update"] = field(default="tool_execution_update", init=False)

    def to_dict(self) -> dict[str, Any]:
        return _with_validated_args(
            {
                "type": self.type,
                "toolCallId": self.tool_call_id,
                "toolName": self.tool_name,
                "args": self.args,
                "partialResult": tool_result_to_dict(self.partial_result),
            },
            self.validated_args,
        )


def _with_validated_args(data: dict[str, Any], validated: Any) -> dict[str, Any]:
    """``validatedArgs`` added to pi's JSON form when there are any."""
    if validated is not None:
        try:
            data["validatedArgs"] = jsonable(validated)
        except TypeError:  # a value the tool's hints allow but JSON cannot hold
            data["validatedArgs"] = repr(validated)
    return data


@dataclass
class ToolExecutionEndEvent:
    """``validated_args``: the arguments ``execute`` received (validated and coerced, after
    ``prepare_arguments`` and ``before_tool_call``); None when the call never got that far.
    The raw arguments are on ``tool_execution_start``. ``duration_ms`` (pi 1.6): how long
    ``execute`` took, in milliseconds on a monotonic clock; None when the tool did not run
    (or was abandoned). ``result.structured_content`` is there for programs and UIs."""

    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool
    validated_args: Any = None
    duration_ms: Optional[int] = None
    type: Literal["tool_execution_end"] = field(default="tool_execution_end", init=False)

    def to_dict(self) -> dict[str, Any]:
        d = _with_validated_args(
            {
                "type": self.type,
                "toolCallId": self.tool_call_id,
                "toolName": self.tool_name,
                "result": tool_result_to_dict(self.result),
                "isError": self.is_error,
            },
            self.validated_args,
        )
        if self.duration_ms is not None:
            d["durationMs"] = self.duration_ms
        return d


@dataclass
class ModelFallbackEvent:
    """A request failed on ``model`` with ``error_message`` (``reason``: docs/limits.md#fallback-models)
    and goes to ``next_model``; emitted before that model's answer starts (piagent's own event)."""

    model: Model
    next_model: Model
    reason: str
    error_message: str
    type: Literal["model_fallback"] = field(default="model_fallback", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "model": f"{self.model.provider}:{self.model.id}",
            "nextModel": f"{self.next_model.provider}:{self.next_model.id}",
            "reason": self.reason,
            "errorMessage": self.error_message,
        }


@dataclass
class UsageLimitEvent:
    """A usage limit was reached (docs/limits.md): ``raised`` holds the limits ``on_limit`` raised
    it to, None when the run ends there (piagent's own event)."""

    reached: LimitReached
    raised: Optional[UsageLimits] = None
    type: Literal["usage_limit"] = field(default="usage_limit", init=False)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "type": self.type,
            "limit": self.reached.name,
            "scope": self.reached.scope,
            "value": self.reached.limit,
            "used": self.reached.used,
            "message": self.reached.message,
        }
        if self.raised is not None:
            d["raisedTo"] = getattr(self.raised, self.reached.name)
        return d


@dataclass
class ToolRecoveryEvent:
    """On resume, an interrupted call (an intent, no result) was settled (docs/effects.md#recovery):
    ``action`` is "rerun", "done" or "fail"; ``decided_by`` "policy" (the tool's ``replay``),
    "hook" (``recover_tool_call``) or "approval" (a call that never started, whose remote
    approval was kept: it runs); ``intent`` the recorded intent's JSON form ({} without one)."""

    tool_call_id: str
    tool_name: str
    action: str
    decided_by: str
    intent: dict[str, Any]
    type: Literal["tool_recovery"] = field(default="tool_recovery", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "action": self.action,
            "decidedBy": self.decided_by,
            "intent": self.intent,
        }


CompactionReason = Literal["threshold", "overflow", "manual"]
"""Why a compaction ran: the context neared the window, a request overflowed it, or ``agent.compact()``."""


@dataclass
class CompactionStartEvent:
    """A compaction begins (docs/compaction.md#events), between two requests of a run or in
    ``agent.compact()``."""

    reason: CompactionReason
    type: Literal["compaction_start"] = field(default="compaction_start", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "reason": self.reason}


@dataclass
class CompactionEndEvent:
    """A compaction ended: ``result`` when it replaced the transcript (its ``usage`` is what the
    summary cost), else ``aborted`` or ``error_message``. ``will_retry``: the request that
    overflowed is sent again."""

    reason: CompactionReason
    result: Optional[CompactionResult] = None
    aborted: bool = False
    will_retry: bool = False
    error_message: Optional[str] = None
    type: Literal["compaction_end"] = field(default="compaction_end", init=False)

    @property
    def usage(self) -> Optional[Usage]:
        """What the summary cost (None without a result): usage limits count it as a request."""
        return None if self.result is None else self.result.usage

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.type, "reason": self.reason, "aborted": self.aborted}
        d["willRetry"] = self.will_retry
        if self.result is not None:
            d["result"] = self.result.to_dict()
        if self.error_message is not None:
            d["errorMessage"] = self.error_message
        return d


AgentEvent = Union[
    AgentStartEvent,
    AgentEndEvent,
    TurnStartEvent,
    TurnEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    MessageEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolExecutionEndEvent,
    ModelFallbackEvent,
    UsageLimitEvent,
    ToolRecoveryEvent,
    CompactionStartEvent,
    CompactionEndEvent,
]
