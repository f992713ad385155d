"""Providers keyed by ``api``, and the four ways to call a model.

A provider is a pair of functions ``(model, context, options) -> AssistantMessageEventStream``:
``stream`` takes provider options as given, ``stream_simple`` maps ``options.reasoning``
(a level) onto the API's own knob. Once called, a provider reports every failure inside the
stream (an ``error`` event), never by raising; only the dispatchers here raise, for an
unregistered ``api`` or a model whose ``api`` is not the provider's.

A context whose messages include system messages (pi 1.6) reaches a provider folded: the
system messages replayed into its system prompt and tools, unless the provider renders them in
place and the model accepts that; the tool changes they carry likewise
(docs/llm.md#system-messages).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..exceptions import ProviderNotFoundError
from .capabilities import system_messages_in_place, tool_changes_in_place, warn_if_thinking_ignored
from .stream import AssistantMessageEventStream
from .transcript import resolve_transcript
from .types import AssistantMessage, Context, Model, StreamOptions

__all__ = [
    "ApiProvider",
    "StreamFunction",
    "complete",
    "complete_simple",
    "get_api_provider",
    "get_api_providers",
    "mark_unavailable",
    "prepare_api",
    "register_api_provider",
    "stream",
    "stream_simple",
    "unregister_api_provider",
]

StreamFunction = Callable[[Model, Context, StreamOptions], AssistantMessageEventStream]


@dataclass(frozen=True)
class ApiProvider:
    api: str
    stream: StreamFunction
    stream_simple: StreamFunction


_providers: dict[str, ApiProvider] = {}
_unavailable: dict[str, str] = {}  # api -> why no provider is registered (see mark_unavailable)
_lock = threading.Lock()


def _checked(api: str, fn: StreamFunction, system_messages: bool, tool_changes: bool) -> StreamFunction:
    def call(model: Model, context: Context, options: StreamOptions) -> AssistantMessageEventStream:
        if model.api != api:
            raise ProviderNotFoundError(f"Mismatched api: {model.api} expected {api}")
        in_place = system_messages and system_messages_in_place(model)
        changes = in_place and tool_changes and tool_changes_in_place(model)
        return fn(model, resolve_transcript(context, in_place, changes), options)

    return call


def register_api_provider(
    api: str,
    stream: StreamFunction,
    stream_simple: Optional[StreamFunction] = None,
    *,
    system_messages: bool = False,
    tool_changes: bool = False,
) -> ApiProvider:
    """Register (or replace) the provider for ``api``; ``stream_simple`` defaults to ``stream``.

    ``system_messages=True``: the provider renders later system messages in place for a model
    that takes them (:func:`~piagent.ai.capabilities.system_messages_in_place`); every other
    context reaches it with its system messages folded into the system prompt and the tools.
    ``tool_changes=True`` too: for a model that takes tool changes in place
    (:func:`~piagent.ai.capabilities.tool_changes_in_place`) the context's tools are the ones
    declared before the conversation, and the provider renders the later changes.
    """
    provider = ApiProvider(
        api,
        _checked(api, stream, system_messages, tool_changes),
        _checked(api, stream_simple or stream, system_messages, tool_changes),
    )
    with _lock:
        _providers[api] = provider
    return provider


def mark_unavailable(api: str, reason: str) -> None:
    """Say why ``api`` has no provider (a built-in one whose extra is not installed): the error of
    :func:`get_api_provider` for ``api`` then carries ``reason``, e.g. what to install."""
    with _lock:
        _unavailable[api] = reason


def unregister_api_provider(api: str) -> None:
    with _lock:
        _providers.pop(api, None)


def get_api_provider(api: str) -> ApiProvider:
    """The provider for ``api``; raises :class:`ProviderNotFoundError` if none is registered."""
    _ensure_builtin_providers()
    provider = _providers.get(api)
    if provider is None:
        reason = _unavailable.get(api)
        raise ProviderNotFoundError(f"No API provider registered for api: {api}" + (f": {reason}" if reason else ""))
    return provider


def prepare_api(api: str) -> None:
    """Import what the built-in provider of ``api`` needs (its module, the HTTP stack) now, so
    that the first request does not pay for it. Does nothing more for other apis."""
    _ensure_builtin_providers()


def get_api_providers() -> list[str]:
    _ensure_builtin_providers()
    return sorted(_providers)


_builtin_loaded = False
_builtin_lock = threading.RLock()


def _ensure_builtin_providers() -> None:
    """Import the built-in providers on first use, so ``import piagent`` stays cheap.

    Thread-safe: a thread arriving while another imports them waits for the registrations
    (the flag is set only once they are done).
    """
    global _builtin_loaded
    if _builtin_loaded:
        return
    with _builtin_lock:
        if _builtin_loaded:
            return
        from . import providers  # noqa: F401 -- imported to register the built-in providers

        _builtin_loaded = True


def _options(options: Optional[StreamOptions], overrides: dict[str, Any]) -> StreamOptions:
    if options is None:
        return StreamOptions(**overrides)
    if overrides:
        return StreamOptions.from_object(options, **overrides)
    return options


def stream(
    model: Model, context: Context, options: Optional[StreamOptions] = None, **kwargs: Any
) -> AssistantMessageEventStream:
    """Stream a response with provider options (keyword arguments override ``options``)."""
    return get_api_provider(model.api).stream(model, context, _options(options, kwargs))


def complete(
    model: Model, context: Context, options: Optional[StreamOptions] = None, **kwargs: Any
) -> AssistantMessage:
    """Blocking :func:`stream`: the final assistant message."""
    return stream(model, context, options, **kwargs).result()


def stream_simple(
    model: Model, context: Context, options: Optional[StreamOptions] = None, **kwargs: Any
) -> AssistantMessageEventStream:
    """Stream a response, mapping ``reasoning`` (a level or None) onto the provider's knob; a
    level asked of a model that cannot think is left out, with a one-time warning."""
    chosen = _options(options, kwargs)
    warn_if_thinking_ignored(model, chosen.reasoning)
    return get_api_provider(model.api).stream_simple(model, context, chosen)


def complete_simple(
    model: Model, context: Context, options: Optional[StreamOptions] = None, **kwargs: Any
) -> AssistantMessage:
    """Blocking :func:`stream_simple`: the final assistant message."""
    return stream_simple(model, context, options, **kwargs).result()
