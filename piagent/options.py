"""``AgentOptions``: every option of an :class:`~piagent.Agent`, defined once.

Each option is one line here: its type, default, check and meaning. From that line come the
``Agent(...)`` keyword argument (type-checked), the public attribute (validated on every
assignment, a bad value leaves the previous one in place), the copy taken when a run starts,
and, when a field of :class:`~piagent.types.AgentLoopConfig` has the same name, the value the
loop receives. See ``docs/architecture.md#adding-an-agent-option``.

``Option[Stored, Accepted]``: ``model`` accepts a ``"provider:model-id"`` string and stores
the :class:`~piagent.ai.Model` it names; most options store what they accept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import Executor
from typing import Any, Callable, Generic, Optional, TypeVar, Union, _SpecialForm

from typing_extensions import Protocol

from . import _options as opt
from ._effects import IntentJournal, RecoverToolCall, check_journal
from ._options import Option, Options
from .abort import AbortSignal
from .ai.registry import StreamFunction, prepare_api
from .ai.types import Model, OnPayload, OnResponse, ToolChoice
from .ai.validation import prepare_validator
from .compaction import Compaction
from .exceptions import InvalidTypeError
from .instrumentation import Instrumentation
from .instrumentation import check as check_instrumentation
from .limits import OnLimit, UsageLimits, check_usage_limits
from .output import DEFAULT_OUTPUT_RETRIES, check_output_type
from .result import OutputT
from .state import PLACEHOLDER_API, THINKING_LEVELS, check_messages, check_tools, resolve_model
from .types import (
    DEFAULT_MAX_TOOL_RESULT_CHARS,
    AfterToolCall,
    AgentMessage,
    AgentTool,
    BeforeToolCall,
    ConvertToLlm,
    FinishTurn,
    GetApiKey,
    OutputMode,
    PrepareNextTurn,
    PrepareRequest,
    QueueMode,
    ShouldStopAfterTurn,
    ThinkingLevel,
    ToolExecutionMode,
    TransformContext,
    TurnUpdate,
)

__all__ = ["AgentOptions", "AgentSession", "LegacyPrepareNextTurn", "ModelSpec"]

T = TypeVar("T")
Same = Option[T, T]  # an option that stores what it accepts

ModelSpec = Union[Model, str, None]
"""A :class:`Model`, a ``"provider:model-id"`` string from the catalogue, or None (a placeholder)."""

LegacyPrepareNextTurn = Callable[[AbortSignal], Optional[TurnUpdate]]
"""pi's older ``prepare_next_turn(signal)``: a hook taking one positional argument gets only the signal."""


def _model(name: str, value: ModelSpec) -> Model:
    model = resolve_model(value)
    if model.api != PLACEHOLDER_API:
        prepare_api(model.api)  # the provider's imports now, not in the first prompt()
    return model


def _system_prompt(name: str, value: Optional[str]) -> str:
    return opt.str_or_none(name, value) or ""


def _tools(name: str, value: Union[Iterable[AgentTool], AgentTool]) -> list[AgentTool]:
    tools = check_tools(value)
    for tool in tools:
        prepare_validator(tool.parameters)  # compiled now, not at the tool's first call
    return tools


def _fallback_models(name: str, value: Union[Iterable[ModelSpec], ModelSpec]) -> list[Model]:
    specs: Iterable[ModelSpec] = [value] if value is None or isinstance(value, (str, Model)) else value
    return [_model(name, spec) for spec in specs]


def _usage_limits(name: str, value: Union[UsageLimits, Iterable[UsageLimits], None]) -> tuple[UsageLimits, ...]:
    return check_usage_limits(value)


def _messages(name: str, value: Iterable[AgentMessage]) -> list[AgentMessage]:
    return check_messages(value)


class AgentSession(Protocol):
    """What ``Agent(session=...)`` needs: a :mod:`piagent.sessions` session, or any object like it.

    ``attach`` is called once, at the end of the agent's construction: it sets the agent's
    transcript (and its model and thinking level unless given) and subscribes what records
    each message (docs/sessions.md#agents). If it also has ``begin_run()``, each run calls it
    first and the callable it returns once the run has ended (docs/sessions.md#one-writer-at-a-time).
    """

    def attach(self, agent: Any, *, model_given: bool, thinking_level_given: bool) -> None: ...


def _session(name: str, value: Optional[AgentSession]) -> Optional[AgentSession]:
    if value is not None and not callable(getattr(value, "attach", None)):
        raise InvalidTypeError(
            f"{name} must be a piagent.sessions session (with an attach() method), got {type(value).__name__}"
        )
    return value


def _budgets(name: str, value: Optional[Mapping[str, int]]) -> Optional[dict[str, int]]:
    return opt.budgets_or_none(name, value)


class AgentOptions(Options, Generic[OutputT]):
    """The options of an :class:`~piagent.Agent`: keyword arguments and public attributes.

    Generic in the output type: ``output_type=Invoice`` makes an ``AgentOptions[Invoice]``
    (``Agent[Invoice]``, whose runs return ``RunResult[Invoice]``); without a class there
    (no output type, a JSON Schema dict, a typing form such as ``Literal[...]``) it is ``Any``.

    ``AgentOptions(**kwargs)`` validates a set of options on its own; ``Agent`` is an
    ``AgentOptions`` with a transcript and a run loop, so ``Agent(model=..., tools=...)``
    takes exactly these names. Options are read when a run starts: a change made during a run
    applies to the next one (the queue modes excepted: they are read at each poll).

    To add an option, add one ``Option`` line below (type, default, check, doc). If the loop
    or the providers need it, give it the name of the :class:`~piagent.types.AgentLoopConfig`
    (or :class:`~piagent.ai.StreamOptions`) field that carries it: runs pass it on by name.
    """

    # -- the conversation (also on agent.state) ---------------------------------------------
    system_prompt: Option[str, Optional[str]] = Option(
        default="", check=_system_prompt, doc="The system prompt (None is the same as '')."
    )
    model: Option[Model, ModelSpec] = Option(
        default=None, check=_model, doc='A Model or "provider:model-id"; None is a placeholder that cannot answer.'
    )
    thinking_level: Same[ThinkingLevel] = Option(
        default="off", check=opt.choice(*THINKING_LEVELS), doc="Reasoning effort; 'off' sends none."
    )
    tools: Option[list[AgentTool], Union[Iterable[AgentTool], AgentTool]] = Option(
        default=(), check=_tools, doc="The tools the model may call (a list, copied, or one tool; names unique)."
    )
    messages: Option[list[AgentMessage], Iterable[AgentMessage]] = Option(
        default=(), check=_messages, doc="The transcript (copied on assignment; each message has a role)."
    )
    system_messages: Same[bool] = Option(
        default=False,
        check=opt.boolean,
        doc="Keep the system prompt and tool declarations in the transcript as system messages (pi 1.6): "
        "the agent starts with a leading one (system_prompt and tools) unless its transcript has one, and "
        "tool changes between runs are announced to the model (docs/loop.md#rule-36).",
    )
    session: Same[Optional[AgentSession]] = Option(
        default=None,
        check=_session,
        doc="Where the transcript is kept (piagent.sessions): the agent starts from its branch, and its model and "
        "thinking level unless given (a model, a level other than 'off'), and appends each message at its "
        "message_end. Attached at construction; assigning it later only stops the recording.",
    )

    # -- structured output (docs/structured-output.md) ----------------------------------------
    # _SpecialForm: how type checkers see Literal[...], Optional[int] and other typing forms.
    output_type: Option[Any, Union[type[OutputT], dict[str, Any], _SpecialForm, None]] = Option(
        default=None, check=check_output_type, doc="The type each run must answer with (None: text)."
    )
    output_mode: Same[OutputMode] = Option(
        default="auto", check=opt.choice("auto", "native", "tool"), doc="How the output is asked for."
    )
    output_retries: Same[int] = Option(
        default=DEFAULT_OUTPUT_RETRIES, check=opt.non_negative_int, doc="Invalid outputs the model may correct."
    )

    # -- hooks (run on the run thread; docs/loop.md) -----------------------------------------
    convert_to_llm: Same[Optional[ConvertToLlm]] = Option(
        default=None, check=opt.callable_or_none, doc="messages -> LLM messages; None keeps user/assistant/toolResult."
    )
    transform_context: Same[Optional[TransformContext]] = Option(
        default=None, check=opt.callable_or_none, doc="(messages, signal) -> messages, before each model call."
    )
    stream_fn: Same[Optional[StreamFunction]] = Option(
        default=None, check=opt.callable_or_none, doc="(model, context, options) -> stream; None: the default."
    )
    get_api_key: Same[Optional[GetApiKey]] = Option(
        default=None, check=opt.callable_or_none, doc="provider -> key, before each model call (falsy: environment)."
    )
    before_tool_call: Same[Optional[BeforeToolCall]] = Option(
        default=None, check=opt.callable_or_none, doc="(BeforeToolCallContext, signal) -> BeforeToolCallResult | None."
    )
    after_tool_call: Same[Optional[AfterToolCall]] = Option(
        default=None, check=opt.callable_or_none, doc="(AfterToolCallContext, signal) -> AfterToolCallResult | None."
    )
    prepare_next_turn: Same[Optional[Union[PrepareNextTurn, LegacyPrepareNextTurn]]] = Option(
        default=None,
        check=opt.callable_or_none,
        doc="(TurnContext, signal) -> TurnUpdate | None before each later turn; pi's (signal) form works too.",
    )
    prepare_next_turn_with_context: Same[Optional[PrepareNextTurn]] = Option(
        default=None,
        check=opt.callable_or_none,
        doc="(TurnContext, signal) -> TurnUpdate | None before each later turn; wins over prepare_next_turn.",
    )
    should_stop_after_turn: Same[Optional[ShouldStopAfterTurn]] = Option(
        default=None,
        check=opt.callable_or_none,
        doc="(TurnContext, signal) -> bool after each good turn's turn_end; True ends the run.",
    )
    finish_turn: Same[Optional[FinishTurn]] = Option(
        default=None,
        check=opt.callable_or_none,
        doc='(TurnContext, signal) -> None | {"action": "end"} | {"action": "continue"}, before each turn_end.',
    )
    prepare_request: Same[Optional[PrepareRequest]] = Option(
        default=None,
        check=opt.callable_or_none,
        doc="(PrepareRequestContext, signal) -> RequestUpdate | None, before every model call.",
    )
    recover_tool_call: Same[Optional[RecoverToolCall]] = Option(
        default=None,
        check=opt.callable_or_none,
        doc="(RecoveryContext, signal) -> RecoveryDecision | None, for an interrupted call on resume.",
    )
    intent_journal: Same[Optional[IntentJournal]] = Option(
        default=None,
        check=check_journal,
        doc="Where tool call intents go (docs/effects.md); None: the session, if it keeps them.",
    )
    on_payload: Same[Optional[OnPayload]] = Option(
        default=None, check=opt.callable_or_none, doc="(payload, model) -> replacement | None, before each request."
    )
    on_response: Same[Optional[OnResponse]] = Option(
        default=None, check=opt.callable_or_none, doc="({'status', 'headers'}, model), for each HTTP response."
    )

    # -- queues and tools --------------------------------------------------------------------
    steering_mode: Same[QueueMode] = Option(
        default="one-at-a-time", check=opt.choice("one-at-a-time", "all"), doc="Steering messages taken per poll."
    )
    follow_up_mode: Same[QueueMode] = Option(
        default="one-at-a-time", check=opt.choice("one-at-a-time", "all"), doc="Follow-up messages taken per poll."
    )
    tool_execution: Same[ToolExecutionMode] = Option(
        default="parallel", check=opt.choice(*opt.TOOL_EXECUTION_MODES), doc="How a batch of tool calls runs."
    )
    executor: Same[Optional[Executor]] = Option(
        default=None, check=opt.executor_or_none, doc="Runs parallel tool calls (None: piagent's worker threads)."
    )
    max_workers: Same[Optional[int]] = Option(
        default=None, check=opt.positive_int_or_none, doc="At most this many parallel calls at once (None: 16)."
    )
    max_tool_calls: Same[Optional[int]] = Option(
        default=None,
        check=opt.positive_int_or_none,
        doc="Tool calls of one response that run; the rest get error results (None: 128).",
    )
    abort_grace: Same[Optional[float]] = Option(
        default=None,
        check=opt.non_negative_number_or_none,
        doc="Seconds a tool call may run on after an abort before it is abandoned (None: 1).",
    )
    compaction: Same[Optional[Compaction]] = Option(
        default=Compaction(),
        check=opt.instance_or_none(Compaction),
        doc="Compacting the transcript near the context window (docs/compaction.md); None: never.",
    )
    max_turns: Same[Optional[int]] = Option(
        default=None, check=opt.positive_int_or_none, doc="End the run after this many turns (None: no limit)."
    )
    tool_timeout: Same[Optional[float]] = Option(
        default=None, check=opt.positive_number_or_none, doc="Seconds before a tool call becomes an error result."
    )
    max_tool_result_chars: Same[Optional[int]] = Option(
        default=DEFAULT_MAX_TOOL_RESULT_CHARS,
        check=opt.positive_int_or_none,
        doc="Characters of text kept per tool result (None: no bound).",
    )
    usage_limits: Option[tuple[UsageLimits, ...], Union[UsageLimits, Iterable[UsageLimits], None]] = Option(
        default=None,
        check=_usage_limits,
        doc="UsageLimits (requests, tokens, cost, tool calls) per run, or with scope='agent' for every run of "
        "the agent; a list takes one of each scope (docs/limits.md).",
    )
    on_limit: Same[Optional[OnLimit]] = Option(
        default=None,
        check=opt.callable_or_none,
        doc="(LimitReached, signal) -> raised UsageLimits | None when a usage limit is reached; None ends the run.",
    )
    fallback_models: Option[list[Model], Union[Iterable[ModelSpec], ModelSpec]] = Option(
        default=(),
        check=_fallback_models,
        doc="Models asked in order when a request fails for a reason another model can serve (docs/limits.md).",
    )
    fallback_sticky: Same[bool] = Option(
        default=False,
        check=opt.boolean,
        doc="Keep asking the model that answered after a fallback for the rest of the run (False: the first).",
    )
    instrumentation: Same[Optional[Instrumentation]] = Option(
        default=None,
        check=check_instrumentation,
        doc="Observes this agent's runs instead of piagent.instrument()'s (docs/observability.md).",
    )

    # -- model calls (None: the provider's default) --------------------------------------------
    session_id: Same[Optional[str]] = Option(
        default=None, check=opt.str_or_none, doc="Sent to providers that cache per session."
    )
    thinking_budgets: Option[Optional[dict[str, int]], Optional[Mapping[str, int]]] = Option(
        default=None, check=_budgets, doc="Token budget per thinking level, for budget-based providers."
    )
    max_retry_delay_ms: Same[Optional[int]] = Option(
        default=None, check=opt.non_negative_int_or_none, doc="Longest wait a server may ask for before a retry."
    )
    tool_choice: Same[ToolChoice] = Option(
        default=None, check=opt.tool_choice_or_none, doc='None, "auto", "none", "required" or {"name": tool}.'
    )
    temperature: Same[Optional[float]] = Option(
        default=None, check=opt.non_negative_number_or_none, doc="Sampling temperature."
    )
    max_tokens: Same[Optional[int]] = Option(
        default=None, check=opt.positive_int_or_none, doc="Output token limit per call."
    )
    timeout_ms: Same[Optional[int]] = Option(
        default=None,
        check=opt.positive_int_or_none,
        doc="Longest wait for the connection, the headers and (unless idle_timeout_ms) each stream event, in ms.",
    )
    idle_timeout_ms: Same[Optional[int]] = Option(
        default=None,
        check=opt.positive_int_or_none,
        doc="Longest wait between two stream events, in ms (None: 600,000).",
    )
    deadline_ms: Same[Optional[int]] = Option(
        default=None, check=opt.positive_int_or_none, doc="Time budget of a whole model call, in ms (None: 3,600,000)."
    )
    max_response_bytes: Same[Optional[int]] = Option(
        default=None, check=opt.positive_int_or_none, doc="Decompressed bytes of one response (None: 256 MiB)."
    )
    max_event_bytes: Same[Optional[int]] = Option(
        default=None, check=opt.positive_int_or_none, doc="Bytes of one stream line or event (None: 16 MiB)."
    )
    max_retries: Same[Optional[int]] = Option(
        default=None, check=opt.non_negative_int_or_none, doc="Retries of 429/5xx/connection failures."
    )
    cache_retention: Same[Optional[str]] = Option(
        default=None, check=opt.optional_choice(*opt.CACHE_RETENTIONS), doc='Prompt caching: "none", "short", "long".'
    )

    def snapshot(self) -> AgentOptions:
        """A plain ``AgentOptions`` holding every option's current value (a subclass's too; lists
        and dicts copied), not validated again: what a run reads."""
        copy = AgentOptions.__new__(AgentOptions)
        copy.__dict__.update(self.option_values())
        return copy
