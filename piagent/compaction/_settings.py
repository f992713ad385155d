"""``Compaction``: when an agent compacts its transcript, and ``CompactionResult``: what one did."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..ai.types import Model, Usage
from ..exceptions import InvalidTypeError, InvalidValueError

__all__ = ["Compaction", "CompactionResult"]


@dataclass(frozen=True)
class Compaction:
    """Compaction settings (docs/compaction.md): pi's defaults.

    Before a request whose context would exceed the model's window minus ``reserve_tokens``,
    the older part of the transcript is summarised and replaced by the summary; about
    ``keep_recent_tokens`` of the most recent messages are kept as they are. ``model`` writes
    the summaries (None: the agent's own). For a small window, each of the two numbers is at
    most a quarter of it (:meth:`limits`).
    """

    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000
    model: Optional[Model] = None

    def __post_init__(self) -> None:
        for name in ("reserve_tokens", "keep_recent_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidTypeError(f"Compaction.{name} must be an int, got {type(value).__name__}")
            if value < 0:
                raise InvalidValueError(f"Compaction.{name} must be >= 0, got {value}")
        if self.model is not None and not isinstance(self.model, Model):
            raise InvalidTypeError(f"Compaction.model must be a Model or None, got {type(self.model).__name__}")

    def limits(self, context_window: int) -> tuple[int, int]:
        """``(reserve, keep_recent)`` for a model of that window: each at most a quarter of it."""
        quarter = context_window // 4
        return min(self.reserve_tokens, quarter), min(self.keep_recent_tokens, quarter)

    def should_compact(self, context_tokens: int, context_window: int) -> bool:
        """True when ``context_tokens`` exceed the window minus the reserve (never for an unknown window)."""
        if context_window <= 0:
            return False
        reserve, _ = self.limits(context_window)
        return context_tokens > context_window - reserve


@dataclass
class CompactionResult:
    """One compaction: the ``summary``; ``first_kept_index``, the index in the transcript before
    it of the first message kept; the estimated context ``tokens_before`` and ``tokens_after``;
    ``split_turn`` when the cut fell inside a turn; ``usage``: what the summary requests cost
    (count it in budgets); ``messages``: the transcript after it."""

    summary: str
    first_kept_index: int
    tokens_before: int
    tokens_after: int
    usage: Usage = field(default_factory=Usage)
    split_turn: bool = False
    messages: list[Any] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "firstKeptIndex": self.first_kept_index,
            "tokensBefore": self.tokens_before,
            "estimatedTokensAfter": self.tokens_after,
            "usage": self.usage.to_dict(),
            "splitTurn": self.split_turn,
        }
