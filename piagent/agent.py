"""``Agent``: the stateful shell around the agent loop (docs/architecture.md#the-agent).

An agent is its options (:class:`~piagent.options.AgentOptions`, every one a keyword argument
and a validated attribute), a transcript (:class:`~piagent.state.AgentState`), listeners and
two message queues; it runs :func:`~piagent.loop.run_agent_loop` over a snapshot of them.

Threads:

* The run thread is the thread that called ``prompt()``/``continue_()``, or one background
  thread with ``wait=False``. Every listener and hook runs there, one at a time; the state is
  reduced from each event there, before listeners see it.
* ``steer``, ``follow_up``, the queue methods, ``abort``, ``subscribe`` and reading ``state``
  are safe from any thread and from listeners, hooks and tools. ``prompt()``/``continue_()``
  while a run is active raise :class:`~piagent.exceptions.AgentBusyError` (from a listener
  too: the claim never blocks). The agent's lock is held only for short bookkeeping, never
  while user code runs.
* Options are read when a run starts (docs/loop.md#rule-21): changing one mid-run affects the
  next run. The queues and the queue modes are live.

Model and tool failures never raise out of ``prompt()``: they end the run with an error or
aborted assistant message. Anything raised inside the run (a listener, a hook, a stream
function) becomes a failure message (docs/loop.md#rule-22). Ctrl-C on the run thread (the main
thread), or a ``KeyboardInterrupt`` out of a listener, aborts the run, which ends as an aborted
run does, then raises; other ``BaseException``s (and a second Ctrl-C) abort the run, settle it
and propagate at once.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import logging
import signal as signals
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any, Callable, Optional, TypeVar, Union, cast, overload

from typing_extensions import Literal

from . import _options as opt
from ._interrupts import ctrl_c_calls
from .abort import AbortController, AbortSignal
from .ai.fallback import with_fallbacks
from .ai.registry import StreamFunction, stream_simple
from .ai.transcript import initial_system_message, is_system_message, leads_with_system_message
from .ai.types import AssistantMessage, ImageContent, Model, TextContent, UserContent, UserMessage
from .compaction import Compaction, CompactionResult
from .compaction._run import RunCompaction, compact_transcript, install, summarizer_for
from .events import AgentEndEvent, AgentEvent, MessageEndEvent, MessageStartEvent, ModelFallbackEvent, TurnEndEvent
from .exceptions import (
    AgentBusyError,
    InvalidStateError,
    InvalidTypeError,
    InvalidValueError,
    ProviderNotFoundError,
    UsageLimitExceeded,
)
from .limits import UsageGuard, UsageLimits, UsageMeter, UsageTotals
from .loop import Emit, can_continue_from, run_agent_loop, run_agent_loop_continue
from .options import AgentOptions, LegacyPrepareNextTurn
from .output import output_spec
from .queues import MessageQueue, to_message
from .result import OutputT, RunResult
from .state import PLACEHOLDER_API, AgentState, check_messages
from .types import (
    AgentContext,
    AgentLoopConfig,
    AgentMessage,
    AgentTool,
    OutputSpec,
    OutputValue,
    PrepareNextTurn,
    QueueMode,
    ShouldStopAfterTurn,
    TurnContext,
    TurnUpdate,
    keep_llm_messages,
)

__all__ = [
    "Agent",
    "AgentState",
    "Listener",
    "PromptInput",
    "RunResult",
    "get_default_stream_fn",
    "set_default_stream_fn",
]

logger = logging.getLogger("piagent")

Listener = Union[Callable[[AgentEvent, AbortSignal], object], Callable[[AgentEvent], object]]
"""``listener(event, signal)``, or ``listener(event)`` for a callable taking one positional argument."""

PromptInput = Union[str, AgentMessage, Sequence[AgentMessage]]
"""What ``prompt()`` takes: text (a user message), a message, or a list of messages."""

T = TypeVar("T")

_QUEUES_LOCK = threading.Lock()
"""Guards the making of any agent's steering and follow-up queues (rare: once per queue)."""
_LOOP_FIELDS = frozenset(field.name for field in dataclasses.fields(AgentLoopConfig))


def _check_tool_choice(choice: object, tools: Sequence[AgentTool]) -> None:
    """A ``tool_choice`` that no tool can satisfy is a ValueError at ``prompt()``, not a silent run."""
    names = [tool.name for tool in tools]
    if choice == "required" and not names:
        raise InvalidValueError('tool_choice="required" needs tools: give the agent tools=[...] or use "auto"')
    name = choice.get("name") if isinstance(choice, dict) else None
    if name is not None and name not in names:
        known = ", ".join(names) or "none"
        raise InvalidValueError(f"tool_choice names {name!r}, which is not among the agent's tools (tools: {known})")


#: The error of a run on an agent that was never given a model.
NO_MODEL = (
    'No model set: give the agent one, e.g. Agent(model="openai:gpt-4.1") or agent.model = '
    'get_model("anthropic:claude-sonnet-4-5") (a Model, or "provider:model-id" from the catalogue)'
)
BUSY_PROMPT = (
    "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, or wait for completion."
)
BUSY_CONTINUE = "Agent is already processing. Wait for completion before continuing."
BUSY_RESET = "Agent is already processing. Wait for completion before resetting."
BUSY_COMPACT = "Agent is already processing. Wait for completion before compacting."
INTERRUPTED = "Interrupted"
"""The abort reason of a run ended by Ctrl-C or a listener's ``KeyboardInterrupt``."""

_default_stream_fn: Optional[StreamFunction] = None


def set_default_stream_fn(fn: Optional[StreamFunction]) -> None:
    """Set the stream function of every agent built without ``stream_fn`` (None: ``stream_simple``).

    Read when a run starts, so it also affects existing agents.
    """
    global _default_stream_fn
    _default_stream_fn = opt.callable_or_none("fn", fn)


def get_default_stream_fn() -> StreamFunction:
    return _default_stream_fn or stream_simple


class _Run:
    """One claimed run as the agent tracks it: its abort controller, thread and messages.

    It holds none of the run's wiring (:class:`_Wiring`): the wiring's hooks point at the run,
    never the reverse, so a settled run is freed by reference counting (docs/architecture.md#memory).
    """

    __slots__ = ("controller", "thread_id", "messages", "in_flight", "output", "release_session", "interrupted")

    def __init__(self, release_session: Optional[Callable[[], None]]) -> None:
        self.controller = AbortController()
        self.thread_id: Optional[int] = None
        self.messages: list[AgentMessage] = []  # every message_end of the run, in order
        # messages taken from a queue and not yet delivered (message_end); put back if the run ends first
        self.in_flight: list[tuple[MessageQueue, AgentMessage]] = []
        self.output: Optional[OutputValue] = None  # from agent_end
        self.release_session = release_session  # the session's claim (Session.begin_run)
        self.interrupted = False  # by Ctrl-C or a listener's KeyboardInterrupt: raised once the run ended

    def interrupt(self) -> None:
        """A Ctrl-C on the run thread, or a ``KeyboardInterrupt`` out of a listener: the first
        aborts the run, whose ``KeyboardInterrupt`` is raised once it ended (docs/loop.md#rule-22);
        another raises at once. Safe in a signal handler (:meth:`AbortController.abort_from_signal_handler`)."""
        if self.interrupted:
            raise KeyboardInterrupt
        self.interrupted = True
        self.controller.abort_from_signal_handler(INTERRUPTED)

    @property
    def signal(self) -> AbortSignal:
        return self.controller.signal

    def take(self, queue: Optional[MessageQueue], mode: QueueMode) -> list[AgentMessage]:
        """Drain ``queue`` (None: a queue not made yet, empty), noting what is now in flight."""
        if queue is None:
            return []
        items = queue.drain(mode)
        self.in_flight.extend((queue, item) for item in items)
        return items

    def observe(self, event: MessageEndEvent) -> None:
        """Record a ``message_end`` event."""
        self.messages.append(event.message)
        for index, (_, message) in enumerate(self.in_flight):
            if message is event.message:
                del self.in_flight[index]
                break

    def requeue_undelivered(self) -> None:
        queues: list[MessageQueue] = []
        for queue, _ in self.in_flight:
            if queue not in queues:
                queues.append(queue)
        for queue in queues:
            queue.requeue([message for owner, message in self.in_flight if owner is queue])
        self.in_flight = []


class _Wiring:
    """What a run executes with, made from the options at its start (not kept: the config has
    what the loop reads): its model, context, loop config (the usage checks and the compaction's
    hook in it), counting emit, stream function and compaction (whose hooks hold the
    :class:`_Run` they report to)."""

    __slots__ = ("run", "model", "compaction_settings", "context", "config", "counted", "stream_fn", "compaction")

    def __init__(self, run: _Run, options: AgentOptions) -> None:
        self.run = run
        self.model = options.model
        self.compaction_settings = options.compaction
        self.context = AgentContext(options.system_prompt, options.messages, options.tools)
        self.config: AgentLoopConfig
        self.counted: Emit  # counts each event's usage (docs/limits.md), then emits it
        self.stream_fn: StreamFunction = options.stream_fn or get_default_stream_fn()
        self.compaction: Optional[RunCompaction] = None  # docs/compaction.md

    @property
    def signal(self) -> AbortSignal:
        return self.run.controller.signal


class Agent(AgentOptions[OutputT]):
    """A stateful agent: ``prompt()`` it, ``steer()`` it from anywhere, ``subscribe()`` to its events.

    ``Agent(**options)`` takes the keyword arguments of :class:`~piagent.options.AgentOptions`
    (every one optional, every one also a public attribute, validated on assignment). See the
    module docstring for the thread contract. ``Agent(output_type=Invoice)`` is an
    ``Agent[Invoice]``: its runs return ``RunResult[Invoice]`` (``Agent[Any]`` without one).
    """

    # the state reads the options' __dict__: kept out of it, it makes no reference cycle with it
    __slots__ = ("_state",)

    def __post_init__(self) -> None:
        self._state = AgentState(self)
        # made at their first use (_make_queue): most agents never queue a message (docs/architecture.md#memory)
        self._steering_queue: Optional[MessageQueue] = None
        self._follow_up_queue: Optional[MessageQueue] = None
        # guards _run, _idle and _listeners; never held while user code runs, but for
        # the session's begin_run(): the claim and the transcript it brings up to date belong to the run being
        # claimed (_with_session)
        self._lock = threading.Lock()
        self._run: Optional[_Run] = None
        self._idle: Optional[threading.Event] = None  # made by a wait_for_idle() during a run, set as it settles
        self._listeners: tuple[tuple[Callable[..., object], bool], ...] = ()  # (listener, takes the event only)
        self._usage = UsageMeter()  # every run's, for usage_limits of scope "agent"
        if self.session is not None:  # duck-typed: the core never imports piagent.sessions
            self.session.attach(
                self, model_given=self.model.provider != "unknown", thinking_level_given=self.thinking_level != "off"
            )
        self._seed_system_message()

    def _seed_system_message(self) -> None:
        """With ``system_messages`` (pi 1.6), a transcript that does not lead with a system message gets
        one made of the prompt and the tools. A session records it only as its first message: a branch
        that already has messages keeps its prompt in its own entry, from which each agent seeds its
        transcript again (docs/sessions.md#agents)."""
        if not self.system_messages or leads_with_system_message(self.messages):
            return
        leading = initial_system_message(self.system_prompt, self.tools)
        if leading is None:
            return
        first = not self.messages
        self.messages = [leading, *self.messages]
        record = getattr(self.session, "append_message", None)
        if first and callable(record):
            record(leading)

    # -- state ----------------------------------------------------------------------------

    @property
    def state(self) -> AgentState:
        return self._state

    @property
    def usage(self) -> UsageTotals:
        """What this agent's runs used since it was built (a copy; docs/limits.md)."""
        return self._usage.totals()

    # -- listeners --------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event, signal)`` for every event (``listener(event)`` if it takes one argument).

        Listeners run on the run thread in subscription order, each finishing before the loop
        goes on; a listener that raises ends the run with a failure message. Subscribing the
        same callable twice registers it once. Returns an idempotent ``unsubscribe()``.
        """
        if not callable(listener):
            raise InvalidTypeError(f"listener must be callable, got {type(listener).__name__}")
        arity = opt.positional_arity(listener)
        if arity == 0:
            raise InvalidTypeError(f"listener {listener!r} must accept the event as a positional argument")
        with self._lock:
            if all(registered != listener for registered, _ in self._listeners):
                self._listeners = self._listeners + ((listener, arity == 1),)

        def unsubscribe() -> None:
            with self._lock:
                self._listeners = tuple(entry for entry in self._listeners if entry[0] != listener)

        return unsubscribe

    def _dispatch(self, run: _Run, event: AgentEvent) -> None:
        if self._run is not run:
            return  # an event from a run that already settled (docs/loop.md#rule-24): dropped
        self._state._reduce(event)
        if event.type == "message_end":
            run.observe(event)
        elif event.type == "agent_end":
            run.output = event.output
        for listener, event_only in self._listeners:  # a snapshot: the tuple is replaced, never mutated
            try:
                if event_only:
                    listener(event)
                else:
                    listener(event, run.controller.signal)
            except KeyboardInterrupt:  # as a Ctrl-C: the run aborts, the other listeners still get the event
                if run.interrupted:
                    raise
                run.interrupt()

    # -- runs -------------------------------------------------------------------------------

    @overload
    def prompt(
        self,
        input: PromptInput,
        images: Optional[Sequence[ImageContent]] = None,
        *,
        wait: Literal[True] = True,
        output_type: type[T],
    ) -> RunResult[T]: ...
    @overload
    def prompt(
        self,
        input: PromptInput,
        images: Optional[Sequence[ImageContent]] = None,
        *,
        wait: Literal[True] = True,
        output_type: None = None,
    ) -> RunResult[OutputT]: ...
    @overload
    def prompt(
        self,
        input: PromptInput,
        images: Optional[Sequence[ImageContent]] = None,
        *,
        wait: Literal[True] = True,
        output_type: object,
    ) -> RunResult[Any]: ...
    @overload
    def prompt(
        self,
        input: PromptInput,
        images: Optional[Sequence[ImageContent]] = None,
        *,
        wait: Literal[False],
        output_type: type[T],
    ) -> Future[RunResult[T]]: ...
    @overload
    def prompt(
        self,
        input: PromptInput,
        images: Optional[Sequence[ImageContent]] = None,
        *,
        wait: Literal[False],
        output_type: None = None,
    ) -> Future[RunResult[OutputT]]: ...
    @overload
    def prompt(
        self,
        input: PromptInput,
        images: Optional[Sequence[ImageContent]] = None,
        *,
        wait: Literal[False],
        output_type: object,
    ) -> Future[RunResult[Any]]: ...
    @overload
    def prompt(
        self,
        input: PromptInput,
        images: Optional[Sequence[ImageContent]] = None,
        *,
        wait: bool,
        output_type: object = None,
    ) -> Union[RunResult[Any], Future[RunResult[Any]]]: ...
    def prompt(
        self,
        input: PromptInput,
        images: Optional[Sequence[ImageContent]] = None,
        *,
        wait: bool = True,
        output_type: object = None,
    ) -> Union[RunResult[Any], Future[RunResult[Any]]]:
        """Run the agent on ``input``: a string (a user message, with ``images``), a message or a list.

        Blocks until the run settled and returns its :class:`RunResult`. With ``wait=False`` the
        run is claimed on this thread (``is_streaming`` is True on return) and runs on a
        background thread; the returned ``Future`` holds the result. ``output_type`` replaces
        the agent's for this run: the run ends with a value of that type in ``result.output``
        (docs/structured-output.md). Raises :class:`AgentBusyError` while a run is active,
        ``TypeError`` for an ``output_type`` with no JSON form.
        """
        messages = _prompt_messages(input, images)
        output = self._output_spec(output_type)  # outside the lock: a pydantic model's schema is user code
        with self._lock:
            if self._run is not None:
                raise AgentBusyError(BUSY_PROMPT)
            wiring = self._with_session(lambda release: self._claim(release, output=output))
        return self._launch(wiring, messages, wait)

    @overload
    def continue_(self, *, wait: Literal[True] = True) -> RunResult[OutputT]: ...
    @overload
    def continue_(self, *, wait: Literal[False]) -> Future[RunResult[OutputT]]: ...
    @overload
    def continue_(self, *, wait: bool) -> Union[RunResult[OutputT], Future[RunResult[OutputT]]]: ...
    def continue_(self, *, wait: bool = True) -> Union[RunResult[Any], Future[RunResult[Any]]]:
        """pi's ``continue()``: run again from the transcript as it is.

        With an assistant message last, queued steering messages (else follow-ups) are run as a
        prompt; with nothing queued it raises :class:`InvalidStateError`, as with an empty
        transcript, unless that message failed (stop reason "error" or "aborted"): then the
        failed call is retried (the failed message stays in the transcript and is not sent), or
        it has tool calls without results (a run killed mid-batch, resumed from a session): then
        the model is called again, and providers answer each such call with "No result provided".
        Same return convention as :meth:`prompt`.
        """
        output = self._output_spec(None)
        with self._lock:
            if self._run is not None:
                raise AgentBusyError(BUSY_CONTINUE)
            wiring, prompts = self._with_session(lambda release: self._claim_continue(release, output))
        return self._launch(wiring, prompts, wait)

    def _claim_continue(
        self, release_session: Optional[Callable[[], None]], output: Optional[OutputSpec]
    ) -> tuple[_Wiring, Optional[list[AgentMessage]]]:
        """The run of :meth:`continue_` and its prompts (None: from the transcript as it is); caller holds the lock."""
        messages = self._state.messages
        if all(is_system_message(m) for m in messages):  # none, or only the prompt
            raise InvalidStateError("No messages to continue from")
        if messages[-1].role != "assistant":
            return self._claim(release_session, output=output), None
        queue, mode = self._steering_queue, self.steering_mode
        prompts = queue.drain(mode) if queue is not None else []
        if not prompts:
            queue, mode = self._follow_up_queue, self.follow_up_mode
            prompts = queue.drain(mode) if queue is not None else []
        if queue is not None and prompts:
            # drained steering is delivered now: the loop's initial steering poll is skipped
            wiring = self._claim(release_session, skip_initial_steering=queue is self._steering_queue, output=output)
            wiring.run.in_flight.extend((queue, message) for message in prompts)
            return wiring, prompts
        if can_continue_from(messages[-1]):
            # a retry of the failed call (docs/loop.md#rule-26), or a tool batch cut short
            return self._claim(release_session, output=output), None
        raise InvalidStateError("Cannot continue from message role: assistant")

    def _output_spec(self, output_type: object) -> Optional[OutputSpec]:
        """The structured output of a run: ``output_type`` if given, else the agent's (None: text)."""
        chosen = output_type if output_type is not None else self.output_type
        return None if chosen is None else output_spec(chosen, self.output_mode, self.output_retries)

    def _with_session(self, start: Callable[[Optional[Callable[[], None]]], T]) -> T:
        """Claim the session for a run, then ``start(release)`` (caller holds the lock).

        One agent run at a time writes a session (docs/sessions.md#one-writer-at-a-time): its
        ``begin_run()`` claims it (raising :class:`SessionBusyError` while another run holds it)
        and may bring the transcript up to date with another agent's messages, so it comes
        before ``start`` reads the transcript or a queue. The claim is released if ``start``
        raises, else when the run settles. Lock order: the agent's, then the session's.
        """
        begin_run = getattr(self.session, "begin_run", None)
        release = begin_run() if begin_run is not None else None
        try:
            if release is not None:
                self._seed_system_message()  # a transcript the session caught up with comes without it
            return start(release)
        except BaseException:
            if release is not None:
                release()
            raise

    def _claim(
        self,
        release_session: Optional[Callable[[], None]],
        skip_initial_steering: bool = False,
        output: Optional[OutputSpec] = None,
    ) -> _Wiring:
        """Start a run (caller holds the lock): snapshot options and context, flip the state.

        ``release_session``: the session's claim (:meth:`_with_session`), released when the run
        settles. ``output``: the run's structured output (:meth:`_output_spec`, built before the lock).
        """
        options = self.snapshot()
        _check_tool_choice(options.tool_choice, options.tools)
        run = _Run(release_session)
        wiring = _Wiring(run, options)
        config = self._loop_config(options, run, skip_initial_steering)
        config.output = output
        guard = UsageGuard(
            options.usage_limits, lifetime=self._usage, on_limit=options.on_limit, on_raise=self._raise_limits
        )
        if options.fallback_models:
            wiring.stream_fn = self._with_fallbacks(options, wiring)
        emit = functools.partial(self._dispatch, run)
        compaction = install(options.compaction, config, wiring.stream_fn, run.signal, emit, self._set_transcript)
        if compaction is not None:
            wiring.stream_fn = compaction.stream
        wiring.compaction = compaction
        # the config the run executes with: a copy with the compaction's hook and the usage checks (the
        # compaction keeps nothing of the config it read: one config per run, no cycle)
        hooks = {"prepare_request": compaction.prepare_request} if compaction is not None else {}
        wiring.config, wiring.counted = guard.install(config, emit, **hooks)
        self._run = run
        self._state._begin_run()
        return wiring

    def _loop_config(self, options: AgentOptions, run: _Run, skip_initial_steering: bool) -> AgentLoopConfig:
        """The run's loop config: every option named like a config field, then the agent's own wiring."""
        values = {name: getattr(options, name) for name in type(self).options() if name in _LOOP_FIELDS}
        skip_next_steering_poll = [skip_initial_steering]  # one-shot (continue_ from an assistant tail)

        def get_steering_messages() -> list[AgentMessage]:
            if skip_next_steering_poll[0]:
                skip_next_steering_poll[0] = False
                return []
            return run.take(self._steering_queue, self.steering_mode)

        def get_follow_up_messages() -> list[AgentMessage]:
            return run.take(self._follow_up_queue, self.follow_up_mode)

        values.update(
            model=options.model,
            reasoning=None if options.thinking_level == "off" else options.thinking_level,
            convert_to_llm=options.convert_to_llm or keep_llm_messages,
            get_steering_messages=get_steering_messages,
            get_follow_up_messages=get_follow_up_messages,
            prepare_next_turn=self._prepare_next_turn_hook(options),
            should_stop_after_turn=self._should_stop_hook(options),
            # duck-typed: a session stores intents before tool calls run (docs/effects.md)
            intent_journal=options.intent_journal
            or (self.session if callable(getattr(self.session, "record_intents", None)) else None),
        )
        return AgentLoopConfig(**values)

    def _raise_limits(self, old: UsageLimits, new: UsageLimits) -> None:
        """``on_limit`` raised an agent-scope limit: it stays raised for the next runs."""
        if new.scope == "agent":
            self.usage_limits = tuple(new if item.scope == "agent" else item for item in self.usage_limits)

    def _with_fallbacks(self, options: AgentOptions, wiring: _Wiring) -> StreamFunction:
        """The run's stream function asking ``fallback_models`` in turn (docs/limits.md#fallback-models)."""
        emit, get_api_key = functools.partial(self._dispatch, wiring.run), options.get_api_key

        def on_fallback(failed: AssistantMessage, model: Model, next_model: Model, reason: str) -> None:
            emit(ModelFallbackEvent(model, next_model, reason, failed.error_message or ""))

        def api_key(model: Model) -> Optional[str]:
            return get_api_key(model.provider) if get_api_key is not None else None

        return with_fallbacks(
            wiring.stream_fn,
            options.fallback_models,
            sticky=options.fallback_sticky,
            on_fallback=on_fallback,
            api_key=api_key,
        )

    def _prepare_next_turn_hook(self, options: AgentOptions) -> Optional[PrepareNextTurn]:
        """Installed only if either form is set at run start; then reads the current attributes at
        each turn, ``prepare_next_turn_with_context`` first (as pi's Agent).

        A ``prepare_next_turn`` taking one positional argument is pi's form with the signal only.
        """
        if options.prepare_next_turn is None and options.prepare_next_turn_with_context is None:
            return None

        def prepare_next_turn(context: TurnContext, signal: AbortSignal) -> Optional[TurnUpdate]:
            with_context = self.prepare_next_turn_with_context
            if with_context is not None:
                return with_context(context, signal)
            hook = self.prepare_next_turn
            if hook is None:
                return None
            if opt.positional_arity(hook) == 1:
                return cast(LegacyPrepareNextTurn, hook)(signal)
            return cast(PrepareNextTurn, hook)(context, signal)

        return prepare_next_turn

    def _should_stop_hook(self, options: AgentOptions) -> Optional[ShouldStopAfterTurn]:
        """The user's ``should_stop_after_turn`` combined with ``max_turns`` (both snapshotted)."""
        hook, limit = options.should_stop_after_turn, options.max_turns
        if limit is None:
            return hook
        turns = [0]

        def should_stop_after_turn(context: TurnContext, signal: AbortSignal) -> bool:
            turns[0] += 1
            stop = bool(hook(context, signal)) if hook is not None else False
            return stop or turns[0] >= limit

        return should_stop_after_turn

    def _launch(
        self, wiring: _Wiring, prompts: Optional[list[AgentMessage]], wait: bool
    ) -> Union[RunResult, Future[RunResult]]:
        if wait:
            return self._execute(wiring, prompts)
        future: Future[RunResult] = Future()
        future.set_running_or_notify_cancel()

        def target() -> None:
            try:
                future.set_result(self._execute(wiring, prompts))
            except BaseException as exc:  # delivered through the future, never lost
                future.set_exception(exc)

        thread = threading.Thread(
            target=contextvars.copy_context().run, args=(target,), name="piagent-run", daemon=True
        )
        held = _hold_sigint()
        try:
            thread.start()
        except BaseException:  # not started: no Ctrl-C can interrupt start() once it did
            _release_sigint(held)
            self._settle(wiring.run)
            raise
        _release_sigint(held)  # a Ctrl-C meanwhile is raised here, the run going: abort() reaches it
        return future

    def _execute(self, wiring: _Wiring, prompts: Optional[list[AgentMessage]]) -> RunResult:
        """Run the loop on this thread (the run thread) and settle the run, whatever happens.

        ``prompts`` None is a plain continue from the transcript.
        """
        run, signal, stream_fn, compaction = wiring.run, wiring.signal, wiring.stream_fn, wiring.compaction
        config, counted = wiring.config, wiring.counted
        run.thread_id = threading.get_ident()
        emit: Emit = functools.partial(self._dispatch, run)  # a failure message is no request: not counted
        try:
            with ctrl_c_calls(run.interrupt):  # on the main thread: Ctrl-C aborts the run (docs/loop.md#rule-22)
                try:
                    if prompts is None:
                        run_agent_loop_continue(wiring.context, config, counted, signal, stream_fn)
                    else:
                        run_agent_loop(prompts, wiring.context, config, counted, signal, stream_fn)
                    while compaction is not None and compaction.recover(self._state.messages):
                        # the request overflowed: compacted, it is sent again once (docs/compaction.md#overflow)
                        context = AgentContext(wiring.context.system_prompt, self._state.messages, wiring.context.tools)
                        run_agent_loop_continue(context, config, counted, signal, stream_fn)
                except Exception as exc:
                    self._fail(wiring, emit, exc)
            if run.interrupted:
                raise KeyboardInterrupt  # the run ended as an abort does; now the caller's
            return RunResult.from_messages(run.messages, run.output, config.output is not None)
        except BaseException as exc:  # KeyboardInterrupt, or the failure's own dispatch raised
            run.controller.abort(f"Run ended by {type(exc).__name__}")
            raise
        finally:
            self._settle(run)

    def _fail(self, wiring: _Wiring, emit: Emit, exc: Exception) -> None:
        """Turn an exception out of the loop into the failure lifecycle (docs/loop.md#rule-22)."""
        error, model = str(exc) or type(exc).__name__, wiring.model
        if isinstance(exc, ProviderNotFoundError) and model.api == PLACEHOLDER_API:
            error = NO_MODEL
        if isinstance(exc, UsageLimitExceeded):  # a budget doing its job: no traceback
            logger.info("agent run stopped: %s", error)
        else:
            logger.warning("agent run failed: %s", error, exc_info=exc)
        failure = AssistantMessage(
            content=[TextContent("")],
            api=model.api,
            provider=model.provider,
            model=model.id,
            stop_reason="aborted" if wiring.signal.aborted else "error",
            error_message=error,
        )
        emit(MessageStartEvent(failure))
        emit(MessageEndEvent(failure))
        emit(TurnEndEvent(failure, []))
        emit(AgentEndEvent([failure]))

    def _set_transcript(self, messages: list[AgentMessage]) -> None:
        """A compaction's new transcript (on the run thread)."""
        self._state.messages = messages

    def compact(self, instructions: Optional[str] = None) -> CompactionResult:
        """Compact the transcript now (pi's ``/compact``): the older part is summarised, the recent
        part kept, as the ``compaction`` option says (pi's defaults when it is None).

        Emits ``compaction_start``/``compaction_end`` on this thread; ``abort()`` stops it.
        ``instructions``: what the summary should focus on. Raises :class:`AgentBusyError` during
        a run, :class:`CompactionError` when there is nothing to compact or the summary failed.
        """
        with self._lock:
            if self._run is not None:
                raise AgentBusyError(BUSY_COMPACT)
            wiring = self._with_session(lambda release: self._claim(release))
        wiring.run.thread_id = threading.get_ident()
        try:
            settings = wiring.compaction_settings or Compaction()
            summarizer = summarizer_for(wiring.config, wiring.stream_fn, wiring.signal)
            emit: Emit = functools.partial(self._dispatch, wiring.run)
            messages = list(self._state.messages)
            result = compact_transcript(
                messages,
                settings,
                wiring.model,
                summarizer,
                emit,
                self._set_transcript,
                "manual",
                instructions=instructions,
            )
            return cast(CompactionResult, result)  # a manual compaction raises rather than giving None
        finally:
            self._settle(wiring.run)
            if wiring.run.interrupted:  # a listener's KeyboardInterrupt aborted the compaction: it goes on up
                raise KeyboardInterrupt

    def _settle(self, run: _Run) -> None:
        """Run finish: undelivered queue messages go back, runtime fields clear, waiters wake."""
        run.requeue_undelivered()
        try:
            if run.release_session is not None:
                run.release_session()  # a store's own release may raise: the run's error, the agent still settles
        finally:
            with self._lock:
                self._state._end_run()
                self._run = None
                idle, self._idle = self._idle, None
            if idle is not None:
                idle.set()

    # -- queues -----------------------------------------------------------------------------

    @property
    def steering_queue(self) -> MessageQueue:
        """Messages injected before the next model call; ``put()`` from any thread."""
        queue = self._steering_queue
        return queue if queue is not None else self._make_queue("_steering_queue")

    @property
    def follow_up_queue(self) -> MessageQueue:
        """Messages run when the agent would otherwise stop; ``put()`` from any thread."""
        queue = self._follow_up_queue
        return queue if queue is not None else self._make_queue("_follow_up_queue")

    def _make_queue(self, name: str) -> MessageQueue:
        """The queue named ``name``, made now unless another thread just made it (under a lock of
        their own: a session's ``begin_run()``, called under ``_lock``, may reach the queues)."""
        with _QUEUES_LOCK:
            queue: Optional[MessageQueue] = getattr(self, name)
            if queue is None:
                queue = MessageQueue()
                setattr(self, name, queue)
            return queue

    def _made_queues(self) -> list[MessageQueue]:
        """The queues made so far, steering first (a queue not made yet is empty)."""
        return [queue for queue in (self._steering_queue, self._follow_up_queue) if queue is not None]

    def steer(self, message: Union[str, AgentMessage]) -> None:
        """Queue a message to inject after the current turn (a str becomes a user message)."""
        self.steering_queue.put(message)

    def follow_up(self, message: Union[str, AgentMessage]) -> None:
        """Queue a message to run once the agent has nothing left to do."""
        self.follow_up_queue.put(message)

    def clear_steering_queue(self) -> None:
        if self._steering_queue is not None:
            self._steering_queue.clear()

    def clear_follow_up_queue(self) -> None:
        if self._follow_up_queue is not None:
            self._follow_up_queue.clear()

    def clear_all_queues(self) -> None:
        for queue in self._made_queues():
            queue.clear()

    def has_queued_messages(self) -> bool:
        return not all(queue.empty() for queue in self._made_queues())

    def peek_queued_messages(self) -> list[AgentMessage]:
        """The messages the next poll would take, without taking them (pi 1.6): the steering
        queue's (by ``steering_mode``), else the follow-up queue's (by ``follow_up_mode``)."""
        steering, follow_up = self._steering_queue, self._follow_up_queue
        peeked = steering.peek(self.steering_mode) if steering is not None else []
        return peeked if peeked or follow_up is None else follow_up.peek(self.follow_up_mode)

    # -- control ----------------------------------------------------------------------------

    @property
    def signal(self) -> Optional[AbortSignal]:
        """The active run's abort signal, or None when idle."""
        run = self._run
        return run.signal if run is not None else None

    def abort(self, reason: object = None) -> None:
        """Abort the active run (the model stream stops, tools and hooks see the signal); no-op when idle."""
        run = self._run
        if run is not None:
            run.controller.abort(reason)

    def wait_for_idle(self, timeout: Optional[float] = None) -> bool:
        """Block until no run is active (its ``agent_end`` listeners finished); False on timeout.

        Raises :class:`InvalidStateError` on the run thread (a listener or hook), which would wait
        for itself.
        """
        run = self._run
        if run is not None and run.thread_id == threading.get_ident():
            raise InvalidStateError(
                "wait_for_idle() called on the run thread (from a listener or hook): it would wait for itself"
            )
        with self._lock:  # the run settles under the lock: an Event made here is the one it sets
            if self._run is None:
                return True
            if self._idle is None:
                self._idle = threading.Event()
            idle = self._idle
        return idle.wait(timeout)

    def reset(self) -> None:
        """Forget the transcript, runtime fields and both queues; keep model, tools and options.

        A transcript with system messages keeps them, replayed into one (pi 1.6): the prompt
        and the declared tools stay.
        """
        with self._lock:
            if self._run is not None:
                raise AgentBusyError(BUSY_RESET)
            self._state._clear()
            self.clear_all_queues()

    def __repr__(self) -> str:
        model = self._state.model
        status = "streaming" if self._state.is_streaming else "idle"
        return (
            f"<Agent {status} model={model.provider}:{model.id} tools={[t.name for t in self._state.tools]} "
            f"messages={len(self._state.messages)}>"
        )


def _prompt_messages(input: PromptInput, images: Optional[Sequence[ImageContent]]) -> list[AgentMessage]:
    """pi's normalisation: a str is one user message ``[text, *images]``; a list is used as is."""
    if isinstance(input, str):
        blocks: list[UserContent] = [TextContent(input)]
        for image in images or ():
            if getattr(image, "type", None) != "image":
                raise InvalidTypeError(f"images must be ImageContent blocks, got {type(image).__name__}")
            blocks.append(image)
        return [UserMessage(blocks)]
    if images:
        raise InvalidValueError(
            "images= goes with a text prompt; put ImageContent blocks in the message's content instead"
        )
    if isinstance(input, (list, tuple)):
        return check_messages(input)
    return [to_message(input)]


def _hold_sigint() -> bool:
    """Block SIGINT on the main thread while a run thread starts (True if blocked): a Ctrl-C
    inside ``Thread.start()`` would otherwise leave a started run looking unstarted. The run
    thread inherits the mask, so Python's handler keeps running on the main thread alone."""
    if not hasattr(signals, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        return False
    signals.pthread_sigmask(signals.SIG_BLOCK, {signals.SIGINT})
    return True


def _release_sigint(held: bool) -> None:
    """Undo :func:`_hold_sigint`; a SIGINT that came meanwhile is delivered now."""
    if held:
        signals.pthread_sigmask(signals.SIG_UNBLOCK, {signals.SIGINT})
