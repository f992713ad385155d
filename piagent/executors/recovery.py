"""Settling a resumed run's interrupted calls (docs/effects.md#recovery).

A call of the transcript's last batch without a result either never started (no intent was
recorded) or was running when its process died (an intent, no result). The former is left as
it is: providers answer it with "No result provided" and the model may call it again (a
session written without intents, by pi or an older piagent, is read the same way). The
latter is settled by ``recover_tool_call`` when it decides, else by its tool's ``replay``:
``"safe"`` runs it again, ``"never"`` gives it an error result saying its outcome is unknown.
A :class:`~piagent.events.ToolRecoveryEvent` reports each decision.
"""

from __future__ import annotations

from .._effects import RecoveryContext, RecoveryDecision, ToolIntent, interrupted_text
from ..ai.types import ToolCall, ToolResultMessage
from ..events import ToolRecoveryEvent
from ..types import AgentToolResult
from ._common import (
    BatchContext,
    Outcome,
    emit_end,
    emit_result_messages,
    emit_start,
    error_result,
    exception_message,
    find_tool,
)

__all__ = ["recover_interrupted"]


def recover_interrupted(batch: BatchContext, calls: list[ToolCall]) -> tuple[list[ToolResultMessage], list[ToolCall]]:
    """Settle ``calls`` (the last batch's calls without results) that have an intent: the result
    messages of those settled without running, and the calls to run again (in call order).

    ``batch.message`` is the assistant message that made them; the journal is the config's.
    """
    journal = batch.config.intent_journal
    intents = journal.intents() if journal is not None else {}
    settled: list[Outcome] = []
    rerun: list[ToolCall] = []
    resumable = getattr(journal, "resumable", None)
    waiting = [call.id for call in calls if call.id not in intents]
    cleared = resumable(waiting) if callable(resumable) and waiting else set()
    for call in calls:
        intent = intents.get(call.id)
        if intent is None:  # it never started: it runs now if it was cleared to (an approval kept for it)
            if call.id in cleared:
                batch.emit(ToolRecoveryEvent(call.id, call.name, "rerun", "approval", {}))
                rerun.append(call)
            continue
        decision, decided_by = _decide(batch, call, intent)
        batch.emit(ToolRecoveryEvent(call.id, call.name, decision.action, decided_by, intent.to_dict()))
        if decision.action == "rerun":
            rerun.append(call)
            continue
        emit_start(batch, call)
        outcome = _settled(call, decision)
        emit_end(batch, outcome)
        settled.append(outcome)
    return emit_result_messages(batch, settled), rerun


def _decide(batch: BatchContext, call: ToolCall, intent: ToolIntent) -> tuple[RecoveryDecision, str]:
    tool = find_tool(batch.context.tools, call.name)
    hook = batch.config.recover_tool_call
    if hook is not None:
        try:
            decision = hook(RecoveryContext(call, tool, intent, batch.context), batch.signal)
        except Exception as exc:
            reason = f"{interrupted_text(call.name)} (recover_tool_call raised: {exception_message(exc)})"
            return RecoveryDecision("fail", reason=reason), "hook"
        if decision is not None:
            if not isinstance(decision, RecoveryDecision) or decision.action not in ("rerun", "done", "fail"):
                reason = f"{interrupted_text(call.name)} (recover_tool_call returned {decision!r})"
                return RecoveryDecision("fail", reason=reason), "hook"
            return decision, "hook"
    if tool is not None and tool.replay == "safe":
        return RecoveryDecision("rerun"), "policy"
    return RecoveryDecision("fail", reason=interrupted_text(call.name)), "policy"


def _settled(call: ToolCall, decision: RecoveryDecision) -> Outcome:
    if decision.action == "done":
        result = decision.result if isinstance(decision.result, AgentToolResult) else AgentToolResult()
        return Outcome(call, result, result.is_error is True)
    return Outcome(call, error_result(decision.reason or interrupted_text(call.name)), True)
