"""Pieces both OpenAI APIs (chat completions and responses) share."""

from __future__ import annotations

import re
from typing import Any, Optional

from ..types import ImageContent, Model, StreamOptions, ToolResultMessage
from ._common import default_max_tokens

__all__ = [
    "CONTENT_FILTER_MESSAGE",
    "TOOL_IMAGES_INTRO",
    "bearer_headers",
    "data_uri",
    "is_openai_host",
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


def reasoning_effort(model: Model, level: Optional[str]) -> Optional[str]:
    """The ``reasoning_effort`` for a level, or None when the model does not reason.

    ``xhigh`` becomes ``high`` unless ``model.compat["supports_xhigh"]``; ``minimal`` is kept
    for the GPT-5 family (or ``compat["supports_minimal"]``) and becomes ``low`` elsewhere.
    """
    if not level or not model.reasoning:
        return None
    compat: dict[str, Any] = model.compat or {}
    if level == "xhigh" and not compat.get("supports_xhigh", False):
        return "high"
    if level == "minimal" and not compat.get("supports_minimal", model.id.startswith("gpt-5")):
        return "low"
    return level


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
