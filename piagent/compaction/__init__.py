"""Compaction (docs/compaction.md): when a conversation outgrows the model's context window, its
older part is summarised by a model and replaced by the summary, pi's way.

``Agent(compaction=Compaction(...))`` (on by default; ``compaction=None`` turns it off) compacts
before a request that would not leave the reserve free, and after a request the provider refused
as too long (then sends it again, once); ``agent.compact()`` compacts on demand.
"""

from __future__ import annotations

from ._accounting import ContextEstimate, estimate_context_tokens
from ._compact import CompactionPlan, plan_compaction, run_compaction
from ._cut import Cut, find_cut
from ._settings import Compaction, CompactionResult
from ._summary import SUMMARY_PREFIX, SUMMARY_SUFFIX, CompactionSummary, is_summary, serialize_conversation

__all__ = [
    "SUMMARY_PREFIX",
    "SUMMARY_SUFFIX",
    "Compaction",
    "CompactionPlan",
    "CompactionResult",
    "CompactionSummary",
    "ContextEstimate",
    "Cut",
    "estimate_context_tokens",
    "find_cut",
    "is_summary",
    "plan_compaction",
    "run_compaction",
    "serialize_conversation",
]
