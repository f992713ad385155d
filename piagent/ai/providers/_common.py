"""What every HTTP provider repeats: keys, payload hook, budgets, usage, and the error contract
(:func:`stream_events`, which the in-process llama-cpp provider uses too).

A provider's stream function is usually just::

    def stream_x(model, context, options):
        return stream_events(model, options, lambda builder: _body(model, context, options, builder))

where ``_body`` is a generator that builds the payload, sends it with :func:`open_request`
(key, ``on_payload``, headers, secrets) and yields ``builder.start()`` once headers arrived,
then the block events and finally ``builder.done(reason)``.

:func:`stream_events` runs that generator in pull mode on the consumer's thread and keeps the
stream-function contract (docs/llm.md#stream-function-contract): *any* exception (missing key, HTTP status, abort,
connection drop, bad JSON...) becomes the terminal ``error`` event, with the partial content
and usage kept and every secret scrubbed from the message. Nothing raises out of the stream.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

from ... import instrumentation
from ...exceptions import AbortedRequest, InvalidValueError, MissingApiKeyError, ProviderStreamError
from ..builder import MessageBuilder
from ..env import env_vars_for, get_env_api_key, needs_api_key
from ..stream import AssistantMessageEventStream
from ..types import AssistantMessageEvent, Model, StreamOptions, Usage
from ._http import HttpStream, describe_error, open_stream

__all__ = [
    "ABORTED_MESSAGE",
    "DEFAULT_THINKING_BUDGETS",
    "ProviderStreamError",
    "apply_on_payload",
    "default_max_tokens",
    "is_local_url",
    "make_usage",
    "open_request",
    "max_tokens_with_budget",
    "merge_headers",
    "parse_event_json",
    "parse_event_object",
    "reasoning_budget",
    "resolve_api_key",
    "secrets_of",
    "stream_events",
    "tool_choice_name",
    "usage_with_cached_prompt",
]

logger = logging.getLogger("piagent")

ABORTED_MESSAGE = "Request was aborted"
DEFAULT_THINKING_BUDGETS: dict[str, int] = {
    "minimal": 1024,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32768,
    "max": 65536,
}
MAX_DEFAULT_OUTPUT_TOKENS = 32000
_SENSITIVE_HEADER_WORDS = ("key", "auth", "token", "secret", "cookie")


# --------------------------------------------------------------------------- keys and headers


def resolve_api_key(model: Model, options: StreamOptions) -> str:
    """``options.api_key``, else the provider's environment variable, else "" for local servers.

    Surrounding whitespace is dropped (a key read from a file keeps its newline, which no
    header may carry). Raises :class:`MissingApiKeyError` naming the variable to set when a
    key is needed.
    """
    key = (options.api_key or "").strip()
    if key:
        return key
    env_key = get_env_api_key(model.provider)  # already stripped
    if env_key:
        return env_key
    if not needs_api_key(model.provider) or is_local_url(model.base_url):
        return ""
    names = " or ".join(env_vars_for(model.provider))
    raise MissingApiKeyError(f"No API key for provider {model.provider}: set {names} or pass api_key")


def is_local_url(base_url: str) -> bool:
    """True for a server on this machine (localhost, 127.0.0.1, ::1, 0.0.0.0)."""
    try:
        host = urlsplit(base_url if "://" in base_url else "//" + base_url).hostname
    except ValueError:  # a malformed address is not a local one
        return False
    return host in ("localhost", "127.0.0.1", "::1", "0.0.0.0")


def merge_headers(model: Model, options: StreamOptions, base: Mapping[str, str]) -> dict[str, str]:
    """``base`` overridden by ``model.headers`` then ``options.headers`` (a None value removes a header)."""
    merged: dict[str, str] = dict(base)
    for extra in (model.headers, options.headers):
        for name, value in (extra or {}).items():
            for existing in [k for k in merged if k.lower() == name.lower()]:
                del merged[existing]
            if value is not None:
                merged[name] = value
    return merged


def secrets_of(model: Model, options: StreamOptions) -> list[str]:
    """Every value that must never appear in an error message: keys and credential headers."""
    found = [options.api_key or "", get_env_api_key(model.provider) or ""]
    for headers in (model.headers, options.headers):
        for name, value in (headers or {}).items():
            if value and any(word in name.lower() for word in _SENSITIVE_HEADER_WORDS):
                found.append(value)
                if " " in value:  # "Bearer <token>"
                    found.append(value.split(" ", 1)[1])
    return [s for s in found if s]


def open_request(
    model: Model, options: StreamOptions, url: str, payload: Any, key_headers: Callable[[str], dict[str, str]]
) -> HttpStream:
    """POST a provider's request: the key is resolved, ``on_payload`` sees the body, the headers
    are ``key_headers(key)`` overridden by ``model.headers`` then ``options.headers``, and every
    secret is scrubbed from errors. Raises what :func:`resolve_api_key` and ``open_stream`` raise."""
    api_key = resolve_api_key(model, options)
    payload = apply_on_payload(options, payload, model)
    headers = merge_headers(model, options, key_headers(api_key))
    return open_stream(url, headers, payload, options, model, secrets_of(model, options) + [api_key])


# --------------------------------------------------------------------------- payload and limits


def apply_on_payload(options: StreamOptions, payload: Any, model: Model) -> Any:
    """Call ``options.on_payload(payload, model)``; a non-None return replaces the payload."""
    if options.on_payload is None:
        return payload
    replacement = options.on_payload(payload, model)
    return payload if replacement is None else replacement


def default_max_tokens(model: Model) -> int:
    """The output limit of a call without ``max_tokens``: ``min(model.max_tokens, 32000)``."""
    return min(model.max_tokens, MAX_DEFAULT_OUTPUT_TOKENS) if model.max_tokens > 0 else MAX_DEFAULT_OUTPUT_TOKENS


def reasoning_budget(level: str, options: StreamOptions, model: Model) -> int:
    """Thinking tokens for a reasoning ``level``: minimal 1024, low 2048, medium 8192, high 16384,
    xhigh 32768, max 65536 (capped later by the model's output limit); ``options.thinking_budgets``
    overrides per level (docs/models.md#thinking-levels)."""
    budgets = dict(DEFAULT_THINKING_BUDGETS)
    budgets.update(options.thinking_budgets or {})
    if level not in budgets:
        raise InvalidValueError(
            f"Unknown reasoning level: {level!r} (expected minimal, low, medium, high, xhigh or max)"
        )
    return int(budgets[level])


def max_tokens_with_budget(options: StreamOptions, model: Model, budget: int) -> tuple[int, int]:
    """``(max_tokens, budget)`` for an API whose output limit includes the thinking budget.

    The answer keeps room for ``options.max_tokens`` (or the default) on top of the budget,
    capped by the model's limit; if the cap leaves no room, the budget shrinks to leave 1024.
    """
    answer = options.max_tokens or default_max_tokens(model)
    total = answer + budget
    if model.max_tokens > 0:
        total = min(total, model.max_tokens)
    if total <= budget:
        budget = max(0, total - 1024)
    return total, budget


def tool_choice_name(choice: Any) -> Optional[str]:
    """Validate ``StreamOptions.tool_choice``; the forced tool's name for ``{"name": ...}``, else None.

    Raises ``ValueError`` for anything but None, "auto", "none", "required" or ``{"name": str}``.
    """
    if choice is None or choice in ("auto", "none", "required"):
        return None
    if isinstance(choice, Mapping) and isinstance(choice.get("name"), str) and choice["name"]:
        return str(choice["name"])
    raise InvalidValueError(f'Invalid tool_choice {choice!r}: use "auto", "none", "required" or {{"name": "<tool>"}}')


# --------------------------------------------------------------------------- usage and JSON


def make_usage(model: Model, input: int = 0, output: int = 0, cache_read: int = 0, cache_write: int = 0) -> Usage:
    """A :class:`Usage` with ``total_tokens`` and cost computed from the model's prices."""
    usage = Usage(int(input or 0), int(output or 0), int(cache_read or 0), int(cache_write or 0))
    usage.compute_cost(model)
    return usage


def usage_with_cached_prompt(model: Model, prompt_tokens: Any, cached_tokens: Any, output_tokens: Any) -> Usage:
    """:func:`make_usage` for APIs whose prompt count includes the tokens read from their cache
    (OpenAI, Gemini): ``input`` is the uncached rest. Missing counts are 0."""
    cached = int(cached_tokens or 0)
    return make_usage(model, input=max(0, int(prompt_tokens or 0) - cached), output=output_tokens, cache_read=cached)


_decoder = json.JSONDecoder()


def parse_event_json(data: bytes) -> Any:
    """Decode one SSE ``data`` payload; raises :class:`ProviderStreamError` with a short excerpt.

    Called once per streamed delta, so the common case (UTF-8, no surrounding whitespace) is
    decoded to ``str`` and scanned directly, about twice as fast as ``json.loads(bytes)``,
    which detects the encoding and strips whitespace first; anything else takes that path.
    """
    try:
        text = data.decode("utf-8")
        value, end = _decoder.raw_decode(text)
        if end == len(text):
            return value
    except ValueError:  # UnicodeDecodeError included
        pass
    try:
        return json.loads(data)
    except ValueError as exc:
        raise ProviderStreamError("Invalid JSON in stream event", data, f" ({exc})") from None


def parse_event_object(data: bytes) -> dict[str, Any]:
    """:func:`parse_event_json` for APIs whose every event is a JSON object; anything else raises."""
    value = parse_event_json(data)
    if not isinstance(value, dict):
        raise ProviderStreamError("Unexpected stream event", data)
    return value


# --------------------------------------------------------------------------- the error contract

Body = Callable[[MessageBuilder], Iterator[AssistantMessageEvent]]


def stream_events(model: Model, options: StreamOptions, body: Body) -> AssistantMessageEventStream:
    """Run ``body(builder)`` lazily on the consumer's thread; never raises (docs/llm.md#stream-function-contract).

    The generator must yield ``start``, block events and one terminal event. If it raises, or
    returns without a terminal event, the stream ends with ``error`` (``aborted`` when the
    signal fired) carrying the partial message. A ``done`` reached after the signal fired
    becomes that ``aborted`` error too: an aborted call never reports success (docs/llm.md#stream-events).
    """
    return AssistantMessageEventStream(source=_guarded(model, options, body))


def _guarded(model: Model, options: StreamOptions, body: Body) -> Iterator[AssistantMessageEvent]:
    builder = MessageBuilder(model)
    signal = options.signal
    try:
        for event in body(builder):
            kind = event.type
            if kind == "done" or kind == "error":
                if kind == "done" and signal is not None and signal.aborted:
                    raise AbortedRequest()
                yield event
                return
            yield event
        raise ProviderStreamError("Provider stream ended without a terminal event")
    except Exception as exc:  # the contract: every failure ends the stream
        observer = instrumentation.current()  # the seam: piagent/instrumentation.py
        if observer is not None:
            observer.model_call_failed(exc)
        aborted = isinstance(exc, AbortedRequest) or bool(signal is not None and signal.aborted)
        if aborted:
            message = ABORTED_MESSAGE
        else:
            message = describe_error(exc, secrets_of(model, options))
            logger.debug("provider %s failed: %s", model.provider, message)
        yield builder.error(message, aborted=aborted)
