"""Where to cut a transcript: keep about ``keep_recent_tokens`` of its end, never a tool result
without the call it answers (docs/compaction.md#the-cut)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..ai.tokens import estimate_tokens
from ..ai.transcript import is_system_message

__all__ = ["Cut", "find_cut"]


@dataclass
class Cut:
    """``first_kept``: the index of the first message kept. ``turn_start``: with ``split`` (the cut
    falls inside a turn), the index of the message that started that turn, else -1."""

    first_kept: int
    turn_start: int = -1
    split: bool = False


def _can_cut_at(message: Any) -> bool:
    role = getattr(message, "role", None)
    return role != "toolResult" and not is_system_message(message)


def _starts_turn(message: Any) -> bool:
    return _can_cut_at(message) and getattr(message, "role", None) != "assistant"


def find_cut(messages: Sequence[Any], start: int, keep_recent_tokens: int) -> Cut:
    """The cut in ``messages[start:]``: walking back from the end until ``keep_recent_tokens`` are
    counted, then at the nearest message at or after that point which may start the kept part (a
    user or assistant message: an assistant's tool results follow it; never a tool result).
    Everything fits: the cut is at the first such message (nothing to summarise)."""
    cut_points = [i for i in range(start, len(messages)) if _can_cut_at(messages[i])]
    if not cut_points:
        return Cut(start)
    cut = cut_points[0]
    counted = 0
    for index in range(len(messages) - 1, start - 1, -1):
        counted += estimate_tokens(messages[index])
        if counted >= keep_recent_tokens:
            cut = next((i for i in cut_points if i >= index), cut_points[-1])
            break
    if _starts_turn(messages[cut]):
        return Cut(cut)
    turn_start = next((i for i in range(cut, start - 1, -1) if _starts_turn(messages[i])), -1)
    return Cut(cut, turn_start, turn_start != -1)
