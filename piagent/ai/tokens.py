"""Token counts without a tokenizer: what a response reported, and an estimate for the rest.

The estimate is pi's: a quarter of the characters a message carries (text, thinking, a tool
call's name and JSON arguments; an image counts as 4,800 characters), rounded up. It errs on
the high side for English and code, which is the safe side for deciding whether a request fits.
"""

from __future__ import annotations

import json
from typing import Any

from .types import Usage

__all__ = ["IMAGE_CHARS", "estimate_tokens", "reported_context_tokens"]

#: The characters an image counts for in :func:`estimate_tokens`.
IMAGE_CHARS = 4800


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    chars = 0
    for block in content or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            chars += len(block.text)
        elif kind == "thinking":
            chars += len(block.thinking)
        elif kind == "toolCall":
            chars += len(block.name) + len(json.dumps(block.arguments, ensure_ascii=False, default=str))
        elif kind == "image":
            chars += IMAGE_CHARS
    return chars


def estimate_tokens(message: Any) -> int:
    """The estimated tokens of one message: ``ceil(characters / 4)`` of what it gives the model.

    A system message counts its content and sections; a message of a role the model never
    sees as such (a session's ``compactionSummary``, ``custom``...) counts its ``summary`` or
    ``content`` when it has one.
    """
    content = getattr(message, "content", None)
    chars = _content_chars(content) if content is not None else 0
    sections = getattr(message, "sections", None)
    if isinstance(sections, dict):
        chars += sum(len(text) for text in sections.values() if isinstance(text, str))
    data = getattr(message, "data", None)  # a session's stored message: pi's dict
    if content is None and isinstance(data, dict):
        summary = data.get("summary")
        chars += len(summary) if isinstance(summary, str) else _content_chars(data.get("content"))
    return -(-chars // 4)


def reported_context_tokens(usage: Usage) -> int:
    """The context size a response's usage reports: its total, else the sum of its counts."""
    return usage.total_tokens or usage.input + usage.output + usage.cache_read + usage.cache_write
