"""Recognising a request that did not fit the model's context window (docs/compaction.md#overflow).

:func:`is_context_overflow` looks at a finished assistant message: each API's own error text
for a prompt that is too long, a success whose reported input exceeds the window (some servers
accept it silently), and a stream that ended empty while the request's estimated size exceeded
the window (llama-cpp-python's server answers such a streamed request with HTTP 200 and no body).

:func:`context_window` is a model's window as piagent knows it: the declared one, or the smaller
one a server stated in an overflow error (:func:`learn_context_window`): a local server's model
is declared with a guess (``custom_model``'s 128,000) while the server runs with its own.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Optional

from .types import Model

__all__ = ["OVERFLOW_PATTERNS", "context_window", "is_context_overflow", "learn_context_window"]

#: What each API says when the prompt exceeds the context window (case-insensitive searches).
OVERFLOW_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"prompt (?:is )?too long",  # Anthropic: "prompt is too long: 213462 tokens > 200000 maximum"
        r"request_too_large",  # Anthropic, a request over its byte limit (HTTP 413)
        r"input is too long for requested model",  # Amazon Bedrock
        r"exceeds the context window",  # OpenAI: "Your input exceeds the context window of this model"
        r"maximum context length is \d+ tokens",  # OpenAI chat completions, OpenRouter
        r"exceeds (?:the )?(?:model'?s )?maximum context length",  # OpenAI-compatible proxies
        r"context[_ ]length[_ ]exceeded",  # OpenAI's error code, and generic servers
        r"context window exceeded",  # LiteLLM
        r"input token count.*exceeds the maximum",  # Gemini: "The input token count (N) exceeds the maximum..."
        r"maximum prompt length is \d+",  # xAI
        r"reduce the length of the messages",  # Groq
        r"exceeds the available context size",  # llama.cpp's server (exceed_context_size_error)
        r"exceed context window of \d+",  # llama-cpp-python: "Requested tokens (N) exceed context window of M"
        r"greater than the context length",  # LM Studio
        r"too large for model with \d+ maximum context length",  # Mistral
        r"is longer than the model'?s context length",  # Together AI
        r"prompt too long; exceeded (?:max )?context length",  # Ollama
        r"token limit exceeded",
        r"^HTTP 413\b",  # a request too large for the server, whatever its text says
    )
)

#: Failures that may mention tokens but are not an overflow: rate limits above all.
NOT_OVERFLOW = re.compile(r"rate limit|too many requests|throttl", re.IGNORECASE)

#: Where an overflow error states the window (the first group), for :func:`learn_context_window`.
STATED_WINDOW_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"tokens > (\d+) maximum",  # Anthropic
        r"maximum context length is (\d+) tokens",  # OpenAI, llama-cpp-python's server, OpenRouter
        r"exceed context window of (\d+)",  # llama-cpp-python (embedded)
        r"too large for model with (\d+) maximum context length",  # Mistral
        r"maximum prompt length is (\d+)",  # xAI
    )
)

#: How piagent's providers report a stream that stopped before its end.
STREAM_ENDED_EARLY = "The stream ended before the response was complete"


def is_context_overflow(message: Any, context_window: int = 0, request_tokens: Optional[int] = None) -> bool:
    """True if the assistant ``message`` says its request did not fit the context window.

    * An error whose text is one of :data:`OVERFLOW_PATTERNS` (and not a rate limit).
    * With ``context_window``: a finished answer (``stop``) whose reported input, cached tokens
      included, exceeds it (a server that accepted the overflow silently), or an answer cut by
      the output limit with no output and an input filling the window.
    * With ``context_window`` and ``request_tokens`` (the request's estimated size): a stream that
      ended early with no content while the request exceeded the window (llama-cpp-python's
      server, which answers HTTP 200 with an empty body).
    """
    stop_reason = getattr(message, "stop_reason", None)
    error = getattr(message, "error_message", None) or ""
    if stop_reason == "error" and error and not NOT_OVERFLOW.search(error):
        if any(pattern.search(error) for pattern in OVERFLOW_PATTERNS):
            return True
        empty = not any(_has_content(block) for block in getattr(message, "content", ()) or ())
        if STREAM_ENDED_EARLY in error and empty and context_window and request_tokens is not None:
            return request_tokens > context_window
    usage = getattr(message, "usage", None)
    if not context_window or usage is None:
        return False
    prompt = usage.input + usage.cache_read
    if stop_reason == "stop":
        return prompt > context_window
    return stop_reason == "length" and usage.output == 0 and prompt >= context_window * 0.99


def _has_content(block: Any) -> bool:
    kind = getattr(block, "type", None)
    if kind == "text":
        return bool(block.text)
    if kind == "thinking":
        return bool(block.thinking)
    return kind == "toolCall"


#: Windows stated by servers, by model (api, provider, base_url, id): one entry per model a
#: process talks to whose server refused a request as too long.
_stated: dict[tuple[str, str, str, str], int] = {}
_stated_lock = threading.Lock()


def _key(model: Model) -> tuple[str, str, str, str]:
    return (model.api, model.provider, model.base_url, model.id)


def context_window(model: Model) -> int:
    """``model``'s context window: its ``context_window``, or the smaller one its server stated
    in an overflow error seen in this process (0: unknown)."""
    with _stated_lock:
        stated = _stated.get(_key(model))
    declared = model.context_window
    return stated if stated is not None and (declared <= 0 or stated < declared) else declared


def learn_context_window(model: Model, message: Any) -> bool:
    """Remember the window that the overflow error of ``message`` states for ``model`` (every
    later :func:`context_window` of that model in this process), when it is smaller than the
    window known so far; True if it was."""
    error = getattr(message, "error_message", None) or ""
    found = next(filter(None, (pattern.search(error) for pattern in STATED_WINDOW_PATTERNS)), None)
    if found is None:
        return False
    stated, known = int(found.group(1)), context_window(model)
    if stated <= 0 or 0 < known <= stated:
        return False
    with _stated_lock:
        _stated[_key(model)] = stated
    return True
