"""The agent loop (docs/loop.md): a plain function over a context and a config.

* :func:`run_agent_loop` / :func:`run_agent_loop_continue` block on the caller's thread (the
  run thread) and call ``emit(event)`` synchronously for every event; whatever ``emit`` or a
  hook raises propagates to the caller.
* :func:`agent_loop` / :func:`agent_loop_continue` run the same loop on a background thread
  and return an :class:`EventStream` of events whose result is the run's new messages. An
  exception inside the loop is raised to the consumer (after the events already queued),
  never swallowed and never left hanging.

The loop: an inner loop of turns (model call, then its tool batch) that goes on while there
are tool results to answer or steering messages waiting, inside an outer loop that goes on
while follow-up messages are waiting or ``finish_turn`` asked for one more request.
"""

from __future__ import annotations

import contextvars
import dataclasses
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional, cast

from . import instrumentation
from ._effects import interrupted_calls
from ._output_turns import OutputTurns
from .abort import AbortController, AbortSignal
from .ai.registry import StreamFunction, stream_simple
from .ai.stream import EventStream
from .ai.transcript import (
    collapse_system_messages,
    current_tools,
    has_system_messages,
    initial_system_message,
    is_system_message,
    tool_state_changes,
)
from .ai.types import (
    AssistantMessage,
    Context,
    Message,
    Model,
    StreamOptions,
    SystemMessage,
    ToolResultMessage,
    now_ms,
)
from .events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from .exceptions import InvalidValueError
from .executors import BatchContext, execute_tool_calls, fail_truncated_tool_calls, recover_interrupted
from .types import (
    AgentContext,
    AgentLoopConfig,
    AgentMessage,
    PrepareRequestContext,
    RequestUpdate,
    ThinkingLevel,
    TurnContext,
)

__all__ = ["Emit", "agent_loop", "agent_loop_continue", "run_agent_loop", "run_agent_loop_continue"]

Emit = Callable[[AgentEvent], None]
"""Delivers one event; called on the run thread, synchronously (whatever it raises propagates)."""


def run_agent_loop(
    prompts: Sequence[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Emit,
    signal: Optional[AbortSignal] = None,
    stream_fn: Optional[StreamFunction] = None,
) -> list[AgentMessage]:
    """Run a prompt: append ``prompts`` to (a copy of) the context and loop until done.

    With an intent journal, the calls a killed run left without results are settled first
    (docs/effects.md#recovery), their results before the prompts. Returns the new messages:
    those results, the prompts, injected steering/follow-up messages, final
    assistant messages and tool results, in order. ``context`` is not mutated.
    """
    signal = signal or AbortController().signal

    def body(emit: Emit) -> list[AgentMessage]:
        initial = _declare_tool_changes(context, list(prompts))
        new_messages: list[AgentMessage] = []
        current = dataclasses.replace(context, messages=list(context.messages))
        emit(AgentStartEvent())
        emit(TurnStartEvent())
        if config.intent_journal is not None:  # a batch a killed run left goes before the new prompt
            _recover(current, new_messages, config, emit, signal)
        current.messages.extend(initial)
        new_messages.extend(initial)
        for message in initial:
            emit(MessageStartEvent(message))
            emit(MessageEndEvent(message))
        _run(current, new_messages, config, emit, signal, stream_fn)
        return new_messages

    return _observed_run(body, emit, context, config, signal)


def run_agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Emit,
    signal: Optional[AbortSignal] = None,
    stream_fn: Optional[StreamFunction] = None,
) -> list[AgentMessage]:
    """Continue from the context as it is: a retry.

    The last message must not be an assistant message, unless that message failed
    (``stop_reason`` "error" or "aborted") or its tool calls have no results
    (:func:`can_continue_from`): providers leave failed messages out of the request and answer
    a call without a result with "No result provided" (docs/llm.md#history-normalisation), so
    continuing from one retries the call that failed, and it stays in the transcript
    (docs/loop.md#rule-3). Unlike pi, which refuses any assistant tail, and which appends to
    the caller's message list (here it is copied).
    """
    _check_can_continue(context)
    signal = signal or AbortController().signal

    def body(emit: Emit) -> list[AgentMessage]:
        new_messages: list[AgentMessage] = []
        current = dataclasses.replace(context, messages=list(context.messages))
        emit(AgentStartEvent())
        emit(TurnStartEvent())
        if config.intent_journal is not None:
            _recover(current, new_messages, config, emit, signal)
        _run(current, new_messages, config, emit, signal, stream_fn)
        return new_messages

    return _observed_run(body, emit, context, config, signal)


def _recover(
    context: AgentContext, new_messages: list[AgentMessage], config: AgentLoopConfig, emit: Emit, signal: AbortSignal
) -> None:
    """Settle the last batch's calls left without results by a killed run (docs/effects.md#recovery)."""
    message, calls = interrupted_calls(context.messages)
    if message is not None and calls:
        batch = BatchContext(context, message, config, signal, emit)
        results, rerun = recover_interrupted(batch, calls)
        if rerun:
            results += execute_tool_calls(batch, rerun).messages
        context.messages.extend(results)
        new_messages.extend(results)


def _observed_run(
    body: Callable[[Emit], list[AgentMessage]],
    emit: Emit,
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal,
) -> list[AgentMessage]:
    """``body(emit)``, observed by the run's instrumentation if it has one (piagent/instrumentation.py)."""
    observer = config.instrumentation or instrumentation.active
    if observer is None:
        return body(emit)
    with instrumentation.observing(observer):
        return observer.run(body, emit, context, config, signal)


def agent_loop(
    prompts: Sequence[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    signal: Optional[AbortSignal] = None,
    stream_fn: Optional[StreamFunction] = None,
) -> EventStream[AgentEvent, list[AgentMessage]]:
    """Start :func:`run_agent_loop` on a background thread; returns its event stream at once."""
    return _in_background(lambda emit: run_agent_loop(prompts, context, config, emit, signal, stream_fn))


def agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    signal: Optional[AbortSignal] = None,
    stream_fn: Optional[StreamFunction] = None,
) -> EventStream[AgentEvent, list[AgentMessage]]:
    """Start :func:`run_agent_loop_continue` on a background thread (validating first, here)."""
    _check_can_continue(context)
    return _in_background(lambda emit: run_agent_loop_continue(context, config, emit, signal, stream_fn))


def is_failed_assistant(message: AgentMessage) -> bool:
    """An assistant message that ended in an error or an abort (a retry may continue from it)."""
    return isinstance(message, AssistantMessage) and message.stop_reason in ("error", "aborted")


def can_continue_from(message: AgentMessage) -> bool:
    """Whether a continue may start from this last message.

    Anything but an assistant message; or an assistant message that failed (the call is
    retried), or whose tool calls have no results (its run was killed mid-batch, e.g. a
    resumed session: providers answer each such call with "No result provided").
    """
    if getattr(message, "role", None) != "assistant":
        return True
    return is_failed_assistant(message) or any(
        getattr(block, "type", None) == "toolCall" for block in getattr(message, "content", ())
    )


def _check_can_continue(context: AgentContext) -> None:
    if not context.messages:
        raise InvalidValueError("Cannot continue: no messages in context")
    last = context.messages[-1]
    if not can_continue_from(last):
        raise InvalidValueError("Cannot continue from message role: assistant")


def _is_agent_end(event: AgentEvent) -> bool:
    return event.type == "agent_end"


def _new_messages(event: AgentEvent) -> list[AgentMessage]:
    return event.messages if event.type == "agent_end" else []


def _in_background(run: Callable[[Emit], list[AgentMessage]]) -> EventStream[AgentEvent, list[AgentMessage]]:
    events: EventStream[AgentEvent, list[AgentMessage]] = EventStream(_is_agent_end, _new_messages)

    def target() -> None:
        try:
            events.end(run(events.push))
        except BaseException as exc:  # delivered to the consumer, never lost
            events.end(error=exc)

    # in a copy of the caller's context: a trace (or any contextvar) the caller is in goes on there
    threading.Thread(target=contextvars.copy_context().run, args=(target,), name="piagent-loop", daemon=True).start()
    return events


# --------------------------------------------------------------------------- the loop


def _poll(source: Optional[Callable[[], list[AgentMessage]]]) -> list[AgentMessage]:
    return list(source() or []) if source is not None else []


def _run(
    context: AgentContext,
    new_messages: list[AgentMessage],
    config: AgentLoopConfig,
    emit: Emit,
    signal: AbortSignal,
    stream_fn: Optional[StreamFunction],
) -> None:
    """pi 1.6's ``runLoop``: turns while there are tool results to answer or steering waiting,
    again while follow-ups wait or ``finish_turn`` asked for one more request.

    A turn: prepare it (``prepare_next_turn``, from the second on), deliver the waiting
    messages, ``prepare_request``, the model call, the tool batch, ``finish_turn``,
    ``turn_end``, then the scheduling. A structured output (docs/loop.md#rule-29) asks for
    itself in the model call, its verdict is part of the tool step, and the rest goes through
    the hooks (:meth:`OutputTurns.hooked`).
    """
    repoll = config.prepare_next_turn is not None  # the run's own hook, not the output's (below)
    output = OutputTurns(config.output, context.tools) if config.output is not None else None
    if output is not None:
        config = output.hooked(config)
    last_turn: Optional[TurnContext] = None
    explicit_continuation = False
    pending = _poll(config.get_steering_messages)
    while True:
        more_tools = True
        while more_tools or pending:
            prepared: list[AgentMessage] = []
            if last_turn is not None:  # docs/loop.md#rule-32
                update = config.prepare_next_turn(last_turn, signal) if config.prepare_next_turn is not None else None
                if update is not None:
                    context = update.context or context
                    prepared = list(update.messages or [])
                    config = _updated_config(config, update)
                if not pending and repoll:
                    # preparing may take long: steering queued meanwhile joins this turn (only when the
                    # poll before found nothing, or one-at-a-time would deliver two); without the run's
                    # own hook nothing ran since that poll, and 0.73.1's poll counts hold (rule 32)
                    pending = _poll(config.get_steering_messages)
                emit(TurnStartEvent())
            _append(_declare_tool_changes(context, prepared + pending), context, new_messages, emit)
            pending = []

            if config.prepare_request is not None:  # docs/loop.md#rule-31
                request = PrepareRequestContext(context, _model(config), cast(ThinkingLevel, config.reasoning or "off"))
                change = config.prepare_request(request, signal)
                if change is not None:
                    context = change.context or context
                    config = _updated_config(config, change)

            message = _stream_assistant_response(context, config, signal, emit, stream_fn, output)
            new_messages.append(message)
            if message.stop_reason in ("error", "aborted"):  # docs/loop.md#rule-9
                if config.finish_turn is not None:
                    config.finish_turn(TurnContext(message, [], context, new_messages), signal)
                emit(TurnEndEvent(message, []))
                emit(AgentEndEvent(new_messages))
                return

            results, more_tools = _tool_step(context, new_messages, message, config, emit, signal, output)
            last_turn = TurnContext(message, results, context, new_messages)
            decision = _action(config.finish_turn(last_turn, signal) if config.finish_turn is not None else None)
            emit(TurnEndEvent(message, results))
            if decision == "end":  # docs/loop.md#rule-30
                emit(AgentEndEvent(new_messages, output.accepted if output is not None else None))
                return
            if config.should_stop_after_turn is not None and config.should_stop_after_turn(last_turn, signal):
                emit(AgentEndEvent(new_messages))
                return
            pending = _poll(config.get_steering_messages)
            explicit_continuation = decision == "continue" and not (more_tools or pending)

        pending = _poll(config.get_follow_up_messages)
        if pending:
            explicit_continuation = False
            continue
        if explicit_continuation:  # nothing else asked for a request: one on the context as it is
            explicit_continuation = False
            continue
        break
    emit(AgentEndEvent(new_messages))


def _model(config: AgentLoopConfig) -> Model:
    if config.model is None:
        raise InvalidValueError("AgentLoopConfig.model is required")
    return config.model


def _tool_step(
    context: AgentContext,
    new_messages: list[AgentMessage],
    message: AssistantMessage,
    config: AgentLoopConfig,
    emit: Emit,
    signal: AbortSignal,
    output: Optional[OutputTurns],
) -> tuple[list[ToolResultMessage], bool]:
    """Run the message's tool calls; returns their results and whether the model must answer them.

    A structured output's verdict (docs/loop.md#rule-29) comes first: the results it gives the
    ``final_answer`` call, and, when it rejected the answer, the model must answer again.
    """
    calls = message.tool_calls
    results: list[ToolResultMessage] = []
    more_tools = False
    verdict = output.verdict if output is not None else None
    if verdict is not None:
        if verdict.output is not None:
            calls = []  # the answer ends the run: other calls in it do not run
        elif verdict.call is not None:
            calls = [c for c in calls if c is not verdict.call]
        _append(verdict.results, context, new_messages, emit)
        results = list(verdict.results)
        more_tools = verdict.output is None
    if calls:
        batch = BatchContext(context, message, config, signal, emit)
        if message.stop_reason == "length":
            outcome = fail_truncated_tool_calls(batch, calls)
        else:
            outcome = execute_tool_calls(batch, calls)
        results += outcome.messages
        more_tools = more_tools or not outcome.terminate
        context.messages.extend(outcome.messages)
        new_messages.extend(outcome.messages)
    return results, more_tools


def _action(decision: object) -> Optional[str]:
    """``finish_turn``'s decision: ``"end"``, ``"continue"`` or None (docs/loop.md#rule-30)."""
    if decision is None:
        return None
    action = decision.get("action") if isinstance(decision, Mapping) else None
    if action not in ("end", "continue"):
        raise InvalidValueError(
            f'finish_turn returned {decision!r}: expected None, {{"action": "end"}} or {{"action": "continue"}}'
        )
    return cast(str, action)


def _append(
    messages: Sequence[AgentMessage], context: AgentContext, new_messages: list[AgentMessage], emit: Emit
) -> None:
    """Deliver messages: their ``message_start``/``message_end``, then into the context and the new messages."""
    for message in messages:
        emit(MessageStartEvent(message))
        emit(MessageEndEvent(message))
        context.messages.append(message)
        new_messages.append(message)


def _declare_tool_changes(context: AgentContext, pending: list[AgentMessage]) -> list[AgentMessage]:
    """``pending`` with the tools the model may call brought in line with ``context.tools`` (pi 1.6,
    docs/loop.md#rule-36); the same list when the transcript carries no system message.

    The transcript's system messages declare what the model may call; ``context.tools`` is what
    runs. A difference becomes ``tools_added``/``tools_removed`` on the last pending system
    message (its own tool fields are taken as intent and replaced by the difference), or on a
    new system message before the first pending message that is not one.
    """
    if not (has_system_messages(context.messages) or has_system_messages(pending)):
        return pending
    pending = _with_base_prompt(context, pending)
    index = next((i for i in range(len(pending) - 1, -1, -1) if is_system_message(pending[i])), -1)
    own = cast(SystemMessage, pending[index]) if index >= 0 else None
    baseline = list(pending)
    if own is not None:
        baseline[index] = dataclasses.replace(own, tools_added=None, tools_removed=None)
    added, removed = tool_state_changes(current_tools([*context.messages, *baseline]), context.tools)
    if own is not None:
        if not (added or removed or own.tools_added or own.tools_removed):
            return pending
        baseline[index] = dataclasses.replace(own, tools_added=added or None, tools_removed=removed or None)
        return baseline
    if not (added or removed):
        return pending
    update = SystemMessage("", tools_added=added or None, tools_removed=removed or None)
    first = next((i for i, m in enumerate(pending) if not is_system_message(m)), len(pending))
    return [*pending[:first], update, *pending[first:]]


def _with_base_prompt(context: AgentContext, pending: list[AgentMessage]) -> list[AgentMessage]:
    """``pending`` bringing the transcript's first system messages: the context's own prompt goes
    ahead of them as a system message, so that the transcript carries it from then on."""
    head = initial_system_message(context.system_prompt)
    if has_system_messages(context.messages) or head is None:
        return pending
    head.timestamp = now_ms()
    first = next(i for i, m in enumerate(pending) if is_system_message(m))
    return [*pending[:first], head, *pending[first:]]


def _request_context(context: AgentContext, messages: list[Message]) -> Context:
    """The model call's context. With system messages in the transcript (pi 1.6) they carry the
    prompt and the tools; without, the context's prompt and tools, as in 0.73.1."""
    if not has_system_messages(messages):
        return Context(context.system_prompt, messages, list(context.tools))
    return Context(None, messages, None)


def _updated_config(config: AgentLoopConfig, update: RequestUpdate) -> AgentLoopConfig:
    changes: dict[str, Any] = {}
    if update.model is not None:
        changes["model"] = update.model
    if update.thinking_level is not None:
        changes["reasoning"] = None if update.thinking_level == "off" else update.thinking_level
    if update.tool_choice is not None:
        changes["tool_choice"] = update.tool_choice
    return dataclasses.replace(config, **changes) if changes else config


def _stream_assistant_response(
    context: AgentContext,
    config: AgentLoopConfig,
    signal: AbortSignal,
    emit: Emit,
    stream_fn: Optional[StreamFunction],
    output: Optional[OutputTurns] = None,
) -> AssistantMessage:
    """One model call (docs/loop.md#rule-7): the partial lives in the context while it streams.

    With a structured output, the call asks for it, updates carry the partial output and the
    complete answer is judged before its ``message_end`` (docs/loop.md#rule-29).
    """
    messages = context.messages
    if config.transform_context is not None:
        messages = config.transform_context(messages, signal)
    llm_context = _request_context(context, list(config.convert_to_llm(messages)))
    model = _model(config)
    api_key = config.get_api_key(model.provider) if config.get_api_key is not None else None
    options = StreamOptions.from_object(config, api_key=api_key or config.api_key, signal=signal)
    if output is not None:
        output.prepare(model, llm_context, options)
    observer = instrumentation.current()
    if observer is None:
        return _stream_message(model, llm_context, options, context, emit, stream_fn, output)
    return observer.model_call(
        lambda: _stream_message(model, llm_context, options, context, emit, stream_fn, output),
        model,
        collapse_system_messages(llm_context),  # observers see the prompt and tools system messages give
        options,
    )


def _stream_message(
    model: Model,
    llm_context: Context,
    options: StreamOptions,
    context: AgentContext,
    emit: Emit,
    stream_fn: Optional[StreamFunction],
    output: Optional[OutputTurns],
) -> AssistantMessage:
    events = (stream_fn or stream_simple)(model, llm_context, options)

    partial: Optional[AssistantMessage] = None
    final: Optional[AssistantMessage] = None
    for event in events:
        kind = event.type
        if kind == "done" or kind == "error":
            final = events.result()
            break
        update = event.partial
        if update is None:
            continue  # an event without a message: nothing to show
        if kind == "start":
            partial = update
            context.messages.append(partial)
            emit(MessageStartEvent(partial.snapshot()))
        elif partial is not None:  # block events before "start" are ignored
            partial = update
            context.messages[-1] = partial
            message = partial.snapshot()
            emit(MessageUpdateEvent(message, event) if output is None else output.update(message, event, partial))
    if final is None:  # ended without a terminal event: its result, or an error keeping the partial
        final = events.result()
    final.thinking_level = options.reasoning or "off"  # what was asked, whichever stream answered (pi 1.6)
    if output is not None and final.stop_reason not in ("error", "aborted"):
        output.judge(final)
    if partial is not None:
        context.messages[-1] = final
    else:
        context.messages.append(final)
        emit(MessageStartEvent(final.snapshot()))
    emit(MessageEndEvent(final))
    return final
