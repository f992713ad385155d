"""Compacting a transcript: plan what to summarise, ask for the summary, build the transcript
that replaces it (docs/compaction.md#what-a-compaction-does)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from ..ai.tokens import estimate_tokens
from ..ai.transcript import current_system_message, is_system_message
from ..ai.types import Model, Usage
from ._accounting import estimate_context_tokens
from ._cut import find_cut
from ._settings import Compaction, CompactionResult
from ._summary import CompactionSummary, Summarizer, is_summary, summarize, summary_text

__all__ = ["CompactionPlan", "plan_compaction", "run_compaction"]

#: What the summary of a split turn puts between the history and the turn's beginning.
SPLIT_TURN_HEADING = "\n\n---\n\n**The turn in progress, from its beginning:**\n\n"
#: The characters of the summary prompt besides the conversation (the bound keeps room for them).
PROMPT_ROOM_CHARS = 4000


@dataclass
class CompactionPlan:
    """What a compaction will do: summarise ``history`` (updating ``previous``) and, for a split
    turn, ``turn_prefix``; keep ``messages[first_kept:]``."""

    messages: Sequence[Any]
    first_kept: int
    history: list[Any]
    turn_prefix: list[Any]
    previous: Optional[str]
    tokens_before: int
    max_chars: int


def _llm_visible(messages: Sequence[Any]) -> list[Any]:
    return [message for message in messages if not is_system_message(message)]


def plan_compaction(messages: Sequence[Any], settings: Compaction, context_window: int) -> Optional[CompactionPlan]:
    """The plan for ``messages``, or None when there is nothing to summarise (everything after
    the last summary fits in what is kept)."""
    last_summary = next((i for i in range(len(messages) - 1, -1, -1) if is_summary(messages[i])), -1)
    start = last_summary + 1
    previous = summary_text(messages[last_summary]) if last_summary >= 0 else None
    reserve, keep = settings.limits(context_window) if context_window > 0 else (0, settings.keep_recent_tokens)
    cut = find_cut(messages, start, keep)
    history = _llm_visible(messages[start : cut.turn_start if cut.split else cut.first_kept])
    prefix = _llm_visible(messages[cut.turn_start : cut.first_kept]) if cut.split else []
    if not history and not prefix:
        return None
    max_chars = max(PROMPT_ROOM_CHARS, (context_window - reserve) * 4 - PROMPT_ROOM_CHARS) if context_window else 0
    tokens_before = estimate_context_tokens(messages).tokens
    return CompactionPlan(messages, cut.first_kept, history, prefix, previous, tokens_before, max_chars)


def run_compaction(
    plan: CompactionPlan, model: Model, summarizer: Summarizer, instructions: Optional[str] = None
) -> CompactionResult:
    """Summarise as ``plan`` says with ``model``; the result's ``messages`` are the new transcript:
    the current system message (when the transcript has some), the summary, the kept messages.
    Raises :class:`~piagent.exceptions.CompactionError` when a summary request failed."""
    usage = Usage()
    summary = plan.previous or "No earlier history."
    if plan.history:
        summary, spent = summarize(
            plan.history, model, summarizer, previous=plan.previous, instructions=instructions, max_chars=plan.max_chars
        )
        usage.add(spent)
    if plan.turn_prefix:
        prefix, spent = summarize(
            plan.turn_prefix, model, summarizer, turn_prefix=True, instructions=instructions, max_chars=plan.max_chars
        )
        usage.add(spent)
        summary += SPLIT_TURN_HEADING + prefix
    head = current_system_message(plan.messages)
    messages = [*([head] if head is not None else []), CompactionSummary.of(summary, plan.tokens_before)]
    messages += _llm_visible(plan.messages[plan.first_kept :])
    tokens_after = sum(estimate_tokens(message) for message in messages)
    return CompactionResult(
        summary, plan.first_kept, plan.tokens_before, tokens_after, usage, bool(plan.turn_prefix), messages
    )
