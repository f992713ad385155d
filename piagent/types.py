"""The agent layer's data: tools, the loop's context and config, hook contexts and results.

Hooks are plain callables run on the run thread. Unless stated otherwise a hook is called as
``hook(context, signal)`` and returns None or the result dataclass named beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union, cast

from typing_extensions import Literal, Protocol, TypedDict

from ._effects import IntentJournal, RecoverToolCall
from .abort import AbortSignal
from .ai.types import (
    AssistantMessage,
    Message,
    Model,
    OutputFormat,
    StreamOptions,
    SystemMessage,
    Tool,
    ToolCall,
    ToolChoice,
    ToolResultMessage,
    Usage,
    UserContent,
)
from .instrumentation import Instrumentation

__all__ = [
    "AfterToolCall",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "AgentContext",
    "AgentLoopConfig",
    "AgentMessage",
    "AgentTool",
    "AgentToolResult",
    "BeforeToolCall",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "ConvertToLlm",
    "CustomMessage",
    "GetApiKey",
    "OutputMode",
    "OutputSpec",
    "OutputValue",
    "FinishTurn",
    "PrepareNextTurn",
    "PrepareRequest",
    "PrepareRequestContext",
    "QueueMode",
    "ReplayPolicy",
    "RequestUpdate",
    "ShouldStopAfterTurn",
    "ThinkingLevel",
    "ToolCallOutcome",
    "ToolExecute",
    "ToolExecutionMode",
    "TransformContext",
    "TurnContext",
    "TurnDecision",
    "TurnUpdate",
    "ToolUpdateCallback",
]


class CustomMessage(Protocol):
    """An application message: any object with a ``role`` (e.g. "notification").

    The loop keeps it in the transcript and never sends it: ``convert_to_llm`` drops or
    translates it before each model call.
    """

    @property
    def role(self) -> str: ...


AgentMessage = Union[Message, CustomMessage]
"""What the transcript, the loop and the events carry: an LLM message or an application message."""

ThinkingLevel = Literal["off", "minimal", "low", "medium", "high", "xhigh", "max"]
ToolExecutionMode = Literal["sequential", "parallel"]
OutputMode = Literal["auto", "native", "tool"]
"""How the model is made to answer in the output's shape (docs/structured-output.md#modes)."""
QueueMode = Literal["all", "one-at-a-time"]
"""How many queued steering/follow-up messages one poll takes: all of them or the oldest one."""
ReplayPolicy = Literal["never", "safe"]
"""What recovery may do with a call whose intent was recorded but whose outcome is unknown
(``AgentTool.replay``): ``"never"`` run it again, or run it again because that is ``"safe"``."""


@dataclass
class AgentToolResult:
    """What a tool returns. ``terminate`` asks the loop to stop after this batch (all must agree).

    ``content`` is what the model sees; ``details`` is for logs and UIs. ``structured_content``
    (pi 1.6): a JSON value matching the tool's ``output_schema``, for programs and UIs, never
    sent to the model. ``is_error=True`` reports a failure without raising: the model sees
    ``content`` as an error result, and ``details``/``structured_content`` are kept. ``usage``:
    what the tool's own model calls cost, if any (not counted in the run's context).
    """

    content: list[UserContent] = field(default_factory=list)
    details: Any = None
    terminate: bool = False
    structured_content: Any = None
    is_error: bool = False
    usage: Optional[Usage] = None


ToolUpdateCallback = Callable[[AgentToolResult], None]
"""Reports a partial result while a tool runs; safe from any thread, a no-op once the call settled."""

ToolExecute = Callable[[str, Any, AbortSignal, ToolUpdateCallback], AgentToolResult]
"""``execute(tool_call_id, args, signal, on_update) -> AgentToolResult``; raises to report failure."""


@dataclass
class AgentTool(Tool):
    """A tool the agent can run: the model-facing schema plus ``execute``.

    An ``AgentTool`` is a :class:`~piagent.ai.Tool` (what the model sees) plus how to run it.
    ``execute(tool_call_id, args, signal, on_update)`` runs with validated arguments; it
    reports failure by raising (the model sees the message). ``prepare_arguments(raw)`` may
    reshape raw arguments before validation. ``execution_mode="sequential"`` makes any batch
    containing this tool run sequentially. ``timeout`` (seconds) turns a call that runs longer
    into an error result; its thread is left to finish. Calls run on piagent's worker threads
    (docs/architecture.md#the-thread-contract); ``on_run_thread=True`` runs this tool's calls
    on the run thread instead (for thread-bound resources: a database connection inside the
    caller's transaction, thread-locals) and makes its batches sequential. Such a call is
    never left behind: no timeout applies to it, an abort waits for it to return, and a
    BaseException it raises (KeyboardInterrupt, SystemExit) propagates from ``prompt()``.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    execute: ToolExecute
    label: str = ""
    prepare_arguments: Optional[Callable[[Any], Any]] = None
    execution_mode: Optional[ToolExecutionMode] = None
    timeout: Optional[float] = None
    on_run_thread: bool = False
    output_schema: Optional[dict[str, Any]] = None
    replay: ReplayPolicy = "never"


@dataclass
class AgentContext:
    """The loop's view of the conversation; ``messages`` may hold application messages."""

    system_prompt: str = ""
    messages: list[AgentMessage] = field(default_factory=list)
    tools: list[AgentTool] = field(default_factory=list)


@dataclass
class ToolCallOutcome:
    """A tool call's final outcome after the hooks (``run_tool_call``): ``duration_ms`` is how
    long ``execute`` took (monotonic clock), None when the tool did not run."""

    tool_call: ToolCall
    result: AgentToolResult
    is_error: bool
    duration_ms: Optional[int] = None


@dataclass
class BeforeToolCallContext:
    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    context: AgentContext


@dataclass
class BeforeToolCallResult:
    """``block=True`` turns the call into an error result with ``reason``; ``terminate`` as a tool's."""

    block: bool = False
    reason: Optional[str] = None
    terminate: bool = False


@dataclass
class AfterToolCallContext:
    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    result: AgentToolResult
    is_error: bool
    context: AgentContext


@dataclass
class AfterToolCallResult:
    """Field-by-field override of a tool's outcome; None keeps the original.

    pi's merge rules: each field set replaces the original in full (no deep merge), except
    that ``content`` given without ``structured_content`` drops the original structured
    content, which may no longer match it (give both to keep it).
    """

    content: Optional[list[UserContent]] = None
    details: Any = None
    is_error: Optional[bool] = None
    terminate: Optional[bool] = None
    structured_content: Any = None
    usage: Optional[Usage] = None


@dataclass
class TurnContext:
    """What ``finish_turn``, ``prepare_next_turn`` and ``should_stop_after_turn`` see after a turn.

    ``context``: the current context, the turn's assistant message and tool results appended;
    ``new_messages``: what the run returns if it ends here.
    """

    message: AssistantMessage
    tool_results: list[ToolResultMessage]
    context: AgentContext
    new_messages: list[AgentMessage]


class TurnDecision(TypedDict):
    """Returned by ``finish_turn``: ``{"action": "end"}`` or ``{"action": "continue"}`` (pi 1.6)."""

    action: Literal["continue", "end"]


@dataclass
class RequestUpdate:
    """Returned by ``prepare_request``: what to use for this request and the later ones (None keeps it).

    ``tool_choice`` replaces ``AgentLoopConfig.tool_choice`` ("auto", "none", "required" or
    ``{"name": tool}``), e.g. to force a tool call in the first turn only.
    """

    context: Optional[AgentContext] = None
    model: Optional[Model] = None
    thinking_level: Optional[ThinkingLevel] = None
    tool_choice: ToolChoice = None


@dataclass
class TurnUpdate(RequestUpdate):
    """Returned by ``prepare_next_turn``: what to use from the next turn on (None keeps it), and
    ``messages`` to append before its request (with their ``message_start``/``message_end``)."""

    messages: Optional[list[AgentMessage]] = None


@dataclass
class PrepareRequestContext:
    """What ``prepare_request`` sees: the context, model and thinking level of the coming request."""

    context: AgentContext
    model: Model
    thinking_level: ThinkingLevel


@dataclass
class OutputSpec:
    """A run's structured output, as the loop uses it (docs/structured-output.md).

    ``format`` is what the model is asked for (its schema's root is an object); ``convert``
    turns a validated JSON value of ``format.schema`` into the Python value the run returns
    (it may raise ``ValueError``/``TypeError``, which is a validation failure too);
    ``wrapped``: the schema is ``{"value": <the type's schema>}`` because the type's own
    schema is not an object. ``mode`` and ``retries`` as the agent options of those names.
    """

    format: OutputFormat
    convert: Callable[[Any], Any]
    wrapped: bool = False
    mode: OutputMode = "auto"
    retries: int = 3


@dataclass
class OutputValue:
    """The structured output of a run: ``value`` (converted) and ``data`` (its validated JSON)."""

    value: Any
    data: Any


_LLM_ROLES = ("user", "assistant", "toolResult")

ConvertToLlm = Callable[[list[AgentMessage]], list[Message]]
TransformContext = Callable[[list[AgentMessage], AbortSignal], list[AgentMessage]]
GetApiKey = Callable[[str], Optional[str]]
BeforeToolCall = Callable[[BeforeToolCallContext, AbortSignal], Optional[BeforeToolCallResult]]
AfterToolCall = Callable[[AfterToolCallContext, AbortSignal], Optional[AfterToolCallResult]]
PrepareNextTurn = Callable[[TurnContext, AbortSignal], Optional[TurnUpdate]]
ShouldStopAfterTurn = Callable[[TurnContext, AbortSignal], bool]
FinishTurn = Callable[[TurnContext, AbortSignal], Optional[TurnDecision]]
PrepareRequest = Callable[[PrepareRequestContext, AbortSignal], Optional[RequestUpdate]]


def keep_llm_messages(messages: Sequence[AgentMessage]) -> list[Message]:
    """The default ``convert_to_llm``: keep system, user, assistant and toolResult messages (same objects).

    A system message is a :class:`SystemMessage`: an application message whose role is "system"
    stays out, as in 0.73.1.
    """
    # duck typing: the role is what tells an LLM message apart, whatever its class
    return [
        cast(Message, m) for m in messages if getattr(m, "role", None) in _LLM_ROLES or isinstance(m, SystemMessage)
    ]


DEFAULT_MAX_TOOL_RESULT_CHARS = 100_000
DEFAULT_MAX_WORKERS = 16
"""Calls of one parallel batch running at once when ``max_workers`` is None."""
DEFAULT_MAX_TOOL_CALLS = 128
"""Tool calls of one assistant message that are executed; the rest get error results."""
DEFAULT_ABORT_GRACE = 1.0
"""Seconds a tool call may go on after an abort before it is abandoned."""
"""About 25,000 tokens: a huge tool output is cut rather than overflow the model's context."""


@dataclass
class AgentLoopConfig(StreamOptions):
    """Everything the loop needs besides the context: the model call options plus hooks.

    Hook contracts (all run on the run thread):

    * ``convert_to_llm(messages) -> messages`` and ``transform_context(messages, signal)``
      run before every model call; they must not raise (a raise ends the run as a failure).
    * ``get_api_key(provider) -> str | None`` runs before every model call; a falsy result
      falls back to ``api_key``.
    * ``get_steering_messages()`` / ``get_follow_up_messages()`` return lists, never block.
    * ``before_tool_call(BeforeToolCallContext, signal) -> BeforeToolCallResult | None``,
      ``after_tool_call(AfterToolCallContext, signal) -> AfterToolCallResult | None``.
    * ``finish_turn(TurnContext, signal) -> TurnDecision | None`` runs after every turn (its
      tool results included), before ``turn_end`` (docs/loop.md#rule-30).
    * ``should_stop_after_turn(TurnContext, signal) -> bool`` runs after every good turn's
      ``turn_end`` (docs/loop.md#rule-18).
    * ``prepare_request(PrepareRequestContext, signal) -> RequestUpdate | None`` runs before
      every model call (docs/loop.md#rule-31).
    * ``prepare_next_turn(TurnContext, signal) -> TurnUpdate | None`` runs before each turn
      after the first, once the loop knows it goes on (docs/loop.md#rule-32).

    ``tool_execution`` is "parallel" (default) or "sequential"; parallel batches run on
    ``executor`` if given, else each call on a worker thread of its own (idle workers are
    reused), at most ``max_workers`` calls at once (None: :data:`DEFAULT_MAX_WORKERS`, 16).
    ``tool_timeout`` is the default per-call timeout in seconds. ``max_tool_calls`` bounds
    the calls of one assistant message that run (None: :data:`DEFAULT_MAX_TOOL_CALLS`, 128;
    the rest get error results). After an abort, a call still running after ``abort_grace``
    seconds (None: :data:`DEFAULT_ABORT_GRACE`, 1 s) is abandoned like a timed-out one,
    sequential or parallel; only a call of an ``on_run_thread`` tool cannot be abandoned.
    ``max_tool_result_chars`` bounds the text of each tool result (outputs and error messages)
    that enters the transcript and the model's context: longer text keeps its beginning and
    ends with a note saying how much was cut. None means no bound.
    ``instrumentation`` observes the run instead of the installed one (piagent/instrumentation.py).
    ``output``: the structured output the run must end with (docs/loop.md#rule-29), or None.
    ``intent_journal`` stores each call's intent before it runs, and ``recover_tool_call``
    settles an interrupted call on resume (docs/effects.md); the agent takes the journal
    from its session.
    """

    model: Optional[Model] = None
    convert_to_llm: ConvertToLlm = keep_llm_messages
    transform_context: Optional[TransformContext] = None
    get_api_key: Optional[GetApiKey] = None
    get_steering_messages: Optional[Callable[[], list[AgentMessage]]] = None
    get_follow_up_messages: Optional[Callable[[], list[AgentMessage]]] = None
    tool_execution: ToolExecutionMode = "parallel"
    before_tool_call: Optional[BeforeToolCall] = None
    after_tool_call: Optional[AfterToolCall] = None
    prepare_next_turn: Optional[PrepareNextTurn] = None
    should_stop_after_turn: Optional[ShouldStopAfterTurn] = None
    finish_turn: Optional[FinishTurn] = None
    prepare_request: Optional[PrepareRequest] = None
    executor: Optional[Executor] = None
    max_workers: Optional[int] = None
    tool_timeout: Optional[float] = None
    max_tool_calls: Optional[int] = None
    abort_grace: Optional[float] = None
    max_tool_result_chars: Optional[int] = DEFAULT_MAX_TOOL_RESULT_CHARS
    instrumentation: Optional[Instrumentation] = None
    output: Optional[OutputSpec] = None
    intent_journal: Optional[IntentJournal] = None
    recover_tool_call: Optional[RecoverToolCall] = None
