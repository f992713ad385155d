"""An agent run's compaction (docs/compaction.md#when): before each request through the loop's
``prepare_request`` seam, and once more after a request the provider refused as too long.

The agent installs it when a run starts (:func:`install`) and asks :meth:`RunCompaction.recover`
after the loop returned; ``agent.compact()`` uses :func:`compact_transcript`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional, cast

from ..abort import AbortSignal
from ..ai.overflow import context_window, is_context_overflow, learn_context_window
from ..ai.registry import StreamFunction
from ..ai.stream import AssistantMessageEventStream
from ..ai.tokens import estimate_tokens
from ..ai.types import AssistantMessage, AssistantMessageEvent, Context, Model, StreamOptions
from ..events import AgentEvent, CompactionEndEvent, CompactionReason, CompactionStartEvent
from ..exceptions import CompactionError
from ..types import AgentContext, AgentLoopConfig, PrepareRequest, PrepareRequestContext, RequestUpdate
from ._accounting import estimate_context_tokens
from ._compact import plan_compaction, run_compaction
from ._settings import Compaction, CompactionResult
from ._summary import Summarizer

__all__ = ["NOTHING_TO_COMPACT", "STILL_TOO_LONG", "RunCompaction", "compact_transcript", "install"]

logger = logging.getLogger("piagent")

#: The start of the error of a request that overflowed again after its compaction.
STILL_TOO_LONG = "The context still exceeds the model's context window after compaction"

NOTHING_TO_COMPACT = "Nothing to compact: the transcript fits in what compaction keeps"

Emit = Callable[[AgentEvent], None]
SetTranscript = Callable[[list[Any]], None]


def summarizer_for(config: AgentLoopConfig, stream_fn: StreamFunction, signal: AbortSignal) -> Summarizer:
    """One summary request: the run's stream function, options and key (the key given to the
    agent only for a model of the agent's provider), no thinking, no tools, the run's signal.

    ``config`` (a run's, which does not change) is read now and not kept: a run's config holds
    the compaction's hook, and keeping it here would make a reference cycle."""
    get_api_key, agent_model, agent_key = config.get_api_key, config.model, config.api_key
    options = StreamOptions.from_object(config, signal=signal, reasoning=None, tool_choice=None, output_format=None)

    def summarizer(model: Model, context: Context) -> AssistantMessage:
        key = get_api_key(model.provider) if get_api_key is not None else None
        if not key and agent_model is not None and model.provider == agent_model.provider:
            key = agent_key
        events = stream_fn(model, context, dataclasses.replace(options, api_key=key))
        for _ in events:
            pass
        return events.result()

    return summarizer


def compact_transcript(
    messages: Sequence[Any],
    settings: Compaction,
    model: Model,
    summarizer: Summarizer,
    emit: Emit,
    set_transcript: SetTranscript,
    reason: CompactionReason,
    *,
    will_retry: bool = False,
    instructions: Optional[str] = None,
) -> Optional[CompactionResult]:
    """Compact ``messages`` for ``model`` and install the result with ``set_transcript``, between
    ``compaction_start`` and ``compaction_end``. None (and no event) when there is nothing to
    compact, or when the summary failed or was aborted (then ``compaction_end`` says so); a
    manual compaction raises :class:`CompactionError` instead; after an overflow, nothing to compact
    is a ``compaction_end`` with that error."""
    plan = plan_compaction(messages, settings, context_window(model))
    if plan is None and reason == "manual":
        raise CompactionError(NOTHING_TO_COMPACT)
    if plan is None and reason == "overflow":  # the overflow stands: say why it was not recovered from
        emit(CompactionStartEvent(reason))
        emit(CompactionEndEvent(reason, error_message=NOTHING_TO_COMPACT))
    if plan is None:
        return None
    emit(CompactionStartEvent(reason))
    try:
        result = run_compaction(plan, settings.model or model, summarizer, instructions)
    except CompactionError as exc:
        emit(CompactionEndEvent(reason, aborted=exc.aborted, error_message=None if exc.aborted else str(exc)))
        if reason == "manual":
            raise
        logger.warning("compaction failed: %s", exc)
        return None
    set_transcript(result.messages)
    emit(CompactionEndEvent(reason, result, will_retry=will_retry))
    return result


def _request_tokens(context: Context) -> int:
    """The estimated size of a request: its messages, system prompt and tool declarations."""
    tokens = sum(estimate_tokens(message) for message in context.messages)
    tools = [(tool.name, tool.description, tool.parameters) for tool in context.tools or ()]
    return tokens + -(-(len(context.system_prompt or "") + len(json.dumps(tools, default=str))) // 4)


class _Retry:
    """The stream of a request sent again after its overflow: if it overflows again, its error
    says that compaction did not make it fit (rewritten before the loop reads the message)."""

    def __init__(self, events: AssistantMessageEventStream, check: Callable[[AssistantMessage], None]) -> None:
        self._events = events
        self._check = check

    def __iter__(self) -> Iterator[AssistantMessageEvent]:
        for event in self._events:
            if event.error is not None:
                self._check(event.error)
            yield event

    def result(self, timeout: Optional[float] = None) -> AssistantMessage:
        final = self._events.result(timeout)
        self._check(final)
        return final


class RunCompaction:
    """The compaction of one run: ``prepare_request`` compacts when the context nears the window,
    ``stream`` notes each request, ``recover`` compacts after an overflow so the run can retry."""

    def __init__(
        self,
        settings: Compaction,
        config: AgentLoopConfig,
        stream_fn: StreamFunction,
        signal: AbortSignal,
        emit: Emit,
        set_transcript: SetTranscript,
    ) -> None:
        self.settings = settings
        self.user_prepare_request: Optional[PrepareRequest] = config.prepare_request
        self.model = config.model
        self.signal = signal
        self.emit = emit
        self.set_transcript = set_transcript
        self.inner_stream = stream_fn
        self.summarizer = summarizer_for(config, stream_fn, signal)
        self.last_request: Optional[Context] = None
        self.retrying = False

    def compact(
        self, messages: Sequence[Any], model: Model, reason: CompactionReason, will_retry: bool = False
    ) -> Optional[CompactionResult]:
        settings, summarizer = self.settings, self.summarizer
        return compact_transcript(
            messages, settings, model, summarizer, self.emit, self.set_transcript, reason, will_retry=will_retry
        )

    def prepare_request(self, request: PrepareRequestContext, signal: AbortSignal) -> Optional[RequestUpdate]:
        """Compact when the context would exceed the window minus the reserve, then the agent's own
        ``prepare_request`` on the context as it then is."""
        self.model = request.model
        context = request.context
        tokens = estimate_context_tokens(context.messages).tokens
        if not signal.aborted and self.settings.should_compact(tokens, context_window(request.model)):
            result = self.compact(context.messages, request.model, "threshold")
            if result is not None:
                context = AgentContext(context.system_prompt, list(result.messages), context.tools)
        update = None
        if self.user_prepare_request is not None:
            update = self.user_prepare_request(dataclasses.replace(request, context=context), signal)
        if context is request.context or (update is not None and update.context is not None):
            return update
        return RequestUpdate(context=context) if update is None else dataclasses.replace(update, context=context)

    def stream(self, model: Model, context: Context, options: StreamOptions) -> AssistantMessageEventStream:
        """The run's stream function, noting the request (its size decides an empty answer)."""
        self.last_request = context
        events = self.inner_stream(model, context, options)
        if not self.retrying:
            return events
        self.retrying = False
        window = context_window(model)

        def check(message: AssistantMessage) -> None:
            error = message.error_message or ""
            if not error.startswith(STILL_TOO_LONG) and self._overflowed(message, window):
                message.error_message = f"{STILL_TOO_LONG} ({window} tokens): {error}"

        return cast(AssistantMessageEventStream, _Retry(events, check))

    def _overflowed(self, message: AssistantMessage, window: int) -> bool:
        if message.stop_reason != "error":
            return False
        request = self.last_request
        return is_context_overflow(message, window, _request_tokens(request) if request is not None else None)

    def recover(self, messages: Sequence[Any]) -> bool:
        """After the loop returned: if its last answer is an overflow (not already retried), compact
        the transcript without it and return True: the run sends the request again, once."""
        last = messages[-1] if messages else None
        if self.signal.aborted or self.model is None or not isinstance(last, AssistantMessage):
            return False
        if (last.error_message or "").startswith(STILL_TOO_LONG):
            return False
        if not self._overflowed(last, context_window(self.model)):
            return False
        learn_context_window(self.model, last)  # a server's own window, smaller than the one declared
        if self.compact(messages[:-1], self.model, "overflow", will_retry=True) is None:
            return False
        self.retrying = True
        return True


def install(
    settings: Optional[Compaction],
    config: AgentLoopConfig,
    stream_fn: StreamFunction,
    signal: AbortSignal,
    emit: Emit,
    set_transcript: SetTranscript,
) -> Optional[RunCompaction]:
    """The run's compaction (None when ``settings`` is None). Its ``prepare_request`` (which calls
    ``config``'s after it) must become the ``prepare_request`` of the config the run uses, and
    the run's stream function its ``stream``. It keeps nothing of ``config`` itself."""
    if settings is None:
        return None
    return RunCompaction(settings, config, stream_fn, signal, emit, set_transcript)
