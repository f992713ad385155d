"""Fallback models: the same request to the next model when one cannot serve it (docs/limits.md#fallback-models).

:func:`with_fallbacks` wraps a stream function: the model it is called with is tried first,
then each fallback in order. An attempt that fails before any content arrived, for a reason
another model can serve (:func:`fallback_reason`: rate limits, server errors and overloads,
timeouts and lost connections, a context overflow when the next model has a larger window),
is dropped and the request goes to the next model, with that model's key (``api_key(model)``)
and its own capabilities (the thinking level is mapped by its provider). Never for an abort,
a refusal or another error, which any model would meet again (a bad request, a bad key).

This is the LLM layer: it knows nothing of agents; ``on_fallback(failed, model, next_model,
reason)`` tells the caller (the agent emits an event there).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Sequence
from typing import Any, Callable, Optional

from .overflow import is_context_overflow
from .registry import StreamFunction
from .stream import AssistantMessageEventStream
from .types import AssistantMessage, AssistantMessageEvent, Context, Model, StreamOptions

__all__ = ["FallbackReason", "OnFallback", "fallback_reason", "with_fallbacks"]

FallbackReason = str
"""``"rate_limit"``, ``"overloaded"``, ``"server_error"``, ``"timeout"``, ``"connection"`` or
``"context_overflow"``."""

OnFallback = Callable[[AssistantMessage, Model, Model, FallbackReason], None]
"""``on_fallback(failed, model, next_model, reason)``: called on the consuming thread before
``next_model`` is asked."""

_STATUS = re.compile(r"^HTTP (\d{3})\b")
_OVERLOADED = re.compile(r"overloaded", re.IGNORECASE)
_SERVER_ERROR = re.compile(r"^(api_error|internal_server_error|server_error)\b", re.IGNORECASE)
_RATE_LIMIT = re.compile(r"^rate_limit_error\b|RESOURCE_EXHAUSTED", re.IGNORECASE)
_TIMEOUT = re.compile(r"^(Read timed out|Connection timed out|The model call exceeded its deadline)")
_CONNECTION = re.compile(r"^(Connection error|Connection lost)")


def fallback_reason(message: AssistantMessage) -> Optional[FallbackReason]:
    """Why another model could answer where this failed message did not, or None.

    Only a message with ``stop_reason`` ``"error"`` qualifies (never an abort or a refusal):
    HTTP 429 (``"rate_limit"``), 529 or an overload reported in the stream (``"overloaded"``),
    408 and timeouts (``"timeout"``), any 5xx or a server error reported in the stream
    (``"server_error"``), a refused or lost connection (``"connection"``), and a context
    overflow in any API's words (``"context_overflow"``). Any other 4xx is None: another model
    would answer it the same way (a malformed request, a bad key, an unknown model).
    """
    if message.stop_reason != "error":
        return None
    text = message.error_message or ""
    status = _STATUS.match(text)
    code = int(status.group(1)) if status is not None else None
    if code is not None and code >= 500:
        return "overloaded" if code == 529 or _OVERLOADED.search(text) else "server_error"
    if is_context_overflow(message):  # in any API's words (docs/compaction.md#overflow)
        return "context_overflow"
    if code is not None:
        return {429: "rate_limit", 408: "timeout"}.get(code)
    if _OVERLOADED.search(text):
        return "overloaded"
    if _RATE_LIMIT.search(text):
        return "rate_limit"
    if _SERVER_ERROR.search(text):
        return "server_error"
    if _TIMEOUT.search(text):
        return "timeout"
    if _CONNECTION.search(text):
        return "connection"
    return None


def with_fallbacks(
    stream_fn: StreamFunction,
    fallbacks: Sequence[Model],
    *,
    sticky: bool = False,
    on_fallback: Optional[OnFallback] = None,
    api_key: Optional[Callable[[Model], Optional[str]]] = None,
) -> StreamFunction:
    """A stream function that asks the model it is called with, then each of ``fallbacks``.

    Each request starts again from the model it is called with; ``sticky=True`` starts from the
    model that answered the last request instead (for as long as this function lives). A
    fallback gets ``api_key(model)`` (None: its provider's environment variable) unless it has
    the first model's provider; the first model's ``headers`` are not sent to another provider,
    and ``max_tokens`` is capped at the fallback's own. A context overflow skips the models
    whose ``context_window`` is not larger. When every model failed, the last failure is the
    answer and its ``error_message`` lists them all.
    """
    chain = list(fallbacks)
    answered: list[Optional[Model]] = [None]

    def stream(model: Model, context: Context, options: StreamOptions) -> AssistantMessageEventStream:
        models = [model, *[m for m in chain if m is not model]]
        last = answered[0]
        if sticky and last is not None and last in models:
            models = models[models.index(last) :]

        def attempts() -> Iterator[AssistantMessageEvent]:
            failures: list[str] = []
            index = 0
            while True:
                current = models[index]
                events = stream_fn(current, context, _options_for(current, model, options, api_key))
                held: list[AssistantMessageEvent] = []  # "start", until the attempt proves itself
                for event in events:
                    if event.type == "start" and not held:
                        held.append(event)
                        continue
                    if event.type == "error":
                        failed = events.result()
                        reason = fallback_reason(failed) if not failed.content else None
                        following = _next_model(models, index, reason)
                        signal = options.signal
                        if reason is not None and following is not None and not (signal and signal.aborted):
                            failures.append(f"{current.provider}:{current.id}: {failed.error_message}")
                            if on_fallback is not None:
                                on_fallback(failed, current, models[following], reason)
                            index = following
                            break
                        if failures:
                            failures.append(f"{current.provider}:{current.id}: {failed.error_message}")
                            failed.error_message = f"Every model failed: {'; '.join(failures)}"
                    answered[0] = current
                    yield from held
                    held = []
                    yield event
                    if event.type in ("done", "error"):
                        return
                else:  # the attempt's stream ended without a terminal event: its own result says so
                    yield from held
                    return

        return AssistantMessageEventStream(source=attempts())

    return stream


def _next_model(models: Sequence[Model], index: int, reason: Optional[FallbackReason]) -> Optional[int]:
    """The index of the model to try after ``models[index]`` failed for ``reason``, or None."""
    if reason is None:
        return None
    window = models[index].context_window
    for following in range(index + 1, len(models)):
        if reason != "context_overflow" or models[following].context_window > window:
            return following
    return None


def _options_for(
    model: Model, first: Model, options: StreamOptions, api_key: Optional[Callable[[Model], Optional[str]]]
) -> StreamOptions:
    """``options`` for ``model``: the first model's own, or a copy with this model's key and bounds."""
    if model is first:
        return options
    changes: dict[str, Any] = {}
    if model.provider != first.provider:
        changes["api_key"] = api_key(model) if api_key is not None else None
        changes["headers"] = None
    if options.max_tokens and model.max_tokens and options.max_tokens > model.max_tokens:
        changes["max_tokens"] = model.max_tokens
    return dataclasses.replace(options, **changes) if changes else options
