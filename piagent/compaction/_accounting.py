"""Token accounting of a transcript, as pi does it: the last response's reported usage, plus an
estimate for every message after it (docs/compaction.md#token-accounting)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ..ai.tokens import estimate_tokens, reported_context_tokens
from ._summary import is_summary

__all__ = ["ContextEstimate", "estimate_context_tokens"]


@dataclass
class ContextEstimate:
    """``tokens`` = ``usage_tokens`` (reported by the response at ``usage_index``) + ``trailing_tokens``
    (estimated for the messages after it); without a usable response, all of it is estimated."""

    tokens: int
    usage_tokens: int
    trailing_tokens: int
    usage_index: Optional[int]


def _usable_usage(message: Any, compacted_at: int) -> int:
    """The context size a good answer reported, 0 when it has none to trust (failed, empty, or
    given before the last compaction: its usage counts messages the summary replaced)."""
    if getattr(message, "role", None) != "assistant" or message.stop_reason in ("error", "aborted"):
        return 0
    if message.timestamp <= compacted_at:
        return 0
    return reported_context_tokens(message.usage)


def _compacted_at(messages: Sequence[Any]) -> int:
    """The timestamp of the transcript's compaction summary (it leads the transcript), else -1."""
    for message in messages[:2]:  # after at most the replayed system message
        if is_summary(message):
            return int(getattr(message, "timestamp", 0) or 0)
    return -1


def estimate_context_tokens(messages: Sequence[Any]) -> ContextEstimate:
    """The transcript's context size: walks back from the end to the last usable usage, so a
    turn costs the messages added since the last answer, not the whole transcript."""
    compacted_at = _compacted_at(messages)
    trailing = 0
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        reported = _usable_usage(message, compacted_at)
        if reported:
            return ContextEstimate(reported + trailing, reported, trailing, index)
        trailing += estimate_tokens(message)
    return ContextEstimate(trailing, 0, trailing, None)
