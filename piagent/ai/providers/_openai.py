"""Pieces both OpenAI APIs (chat completions and responses) share."""

from __future__ import annotations

import re
from typing import Any, Optional

from ..capabilities import EFFORT_DEFAULT, Capabilities, capabilities_of, plan_thinking
from ..types import ImageContent, Model, StreamOptions, ToolResultMessage, Usage
from ._common import default_max_tokens, make_usage

__all__ = [
    "CONTENT_FILTER_MESSAGE",
    "TOOL_IMAGES_INTRO",
    "bearer_headers",
    "cache_fields",
    "data_uri",
    "is_openai_host",
    "openai_usage",
    "reasoning_effort",
    "safe_call_id",
    "tool_result_parts",
    "with_default_max_tokens",
]

#: Text before the images of tool results, sent in a user message (tool outputs are text only).
TOOL_IMAGES_INTRO = "Attached image(s) from tool result:"
#: The error of a response the provider stopped with its ``content_filter``.
CONTENT_FILTER_MESSAGE = "The provider stopped the response: its content filter flagged the output (content_filter)"

_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


def is_openai_host(base_url: str) -> bool:
    """True for OpenAI's own endpoint (features other servers lack: developer role, cache keys...)."""
    return "api.openai.com" in base_url


def bearer_headers(api_key: str) -> dict[str, str]:
    """``Authorization: Bearer <key>``, or nothing for keyless local servers."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def data_uri(image: ImageContent) -> str:
    return f"data:{image.mime_type};base64,{image.data}"


def reasoning_effort(model: Model, level: Optional[str]) -> tuple[Capabilities, bool, Optional[str]]:
    """``(capabilities, thinking on, effort to send)`` for piagent's ``level`` (None = off).

    The effort is one the model accepts (docs/models.md#thinking-levels); "off" is ``"none"``
    on models that take it, nothing where not sending an effort is off, and the lowest effort
    on models that always reason. A model declared by hand without capabilities takes
    ``low``/``medium``/``high`` when it reasons.
    """
    caps = capabilities_of(model, EFFORT_DEFAULT)
    thinking, effort = plan_thinking(caps, level)
    if not thinking and caps.thinking_off == "none":
        effort = "none"
    return caps, thinking, effort


def cache_fields(model: Model, caps: Capabilities, options: StreamOptions, api: str) -> dict[str, Any]:
    """``options.cache_retention`` as OpenAI's API ``api`` ("responses" or "chat") defines it
    (docs/models.md#prompt-caching): ``"long"`` is ``prompt_cache_options.ttl: "12h"`` on the
    Responses API of models with ``prompt_cache_options``, else ``prompt_cache_retention: "24h"``;
    ``"none"`` is ``prompt_cache_options.mode: "explicit"`` (no breakpoint, no caching) where the
    model has it. Only api.openai.com (``compat["supports_prompt_cache_retention"]`` says otherwise
    for a server that copies OpenAI): other servers get nothing."""
    if not (model.compat or {}).get("supports_prompt_cache_retention", is_openai_host(model.base_url)):
        return {}
    retention = options.cache_retention or "short"
    if retention == "none":
        return {"prompt_cache_options": {"mode": "explicit"}} if caps.prompt_cache_options else {}
    if retention == "long":
        if caps.prompt_cache_options and api == "responses":
            return {"prompt_cache_options": {"ttl": "12h"}}
        return {"prompt_cache_retention": "24h"}
    return {}


def safe_call_id(call_id: str, max_length: int) -> str:
    """A tool-call id made of ``[A-Za-z0-9_-]``, at most ``max_length`` long.

    A responses-API id ``call_x|fc_y`` keeps its ``call_x`` part.
    """
    head = call_id.split("|", 1)[0] or call_id
    return _UNSAFE_ID_CHARS.sub("_", head)[:max_length] or "call"


def tool_result_parts(message: ToolResultMessage) -> tuple[str, list[ImageContent]]:
    """The text a tool output carries (never empty) and the images to send after it."""
    images = [block for block in message.content if block.type == "image"]
    return message.text or ("(see attached image)" if images else "(no output)"), images


def with_default_max_tokens(model: Model, options: StreamOptions) -> StreamOptions:
    """``options`` with ``max_tokens`` defaulting to ``min(model.max_tokens, 32000)`` (``stream_simple``)."""
    if options.max_tokens:
        return options
    return StreamOptions.from_object(options, max_tokens=default_max_tokens(model))


def openai_usage(
    model: Model,
    prompt_tokens: Any,
    output_tokens: Any,
    cached: Any = 0,
    cache_written: Any = 0,
    reasoning: Any = 0,
) -> Usage:
    """A :class:`Usage` from counts where the prompt includes the tokens read from and written
    to the cache (OpenAI): ``input`` is the rest; ``reasoning`` is part of ``output``."""
    read, written = int(cached or 0), int(cache_written or 0)
    usage = make_usage(
        model,
        input=max(0, int(prompt_tokens or 0) - read - written),
        output=output_tokens,
        cache_read=read,
        cache_write=written,
    )
    usage.reasoning = int(reasoning or 0)
    return usage
