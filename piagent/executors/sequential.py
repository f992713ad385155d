"""Sequential batches: one call at a time, in call order (docs/loop.md#rule-15).

Each call runs on a reused worker thread (:mod:`piagent._threads`) in a copy of the caller's
``contextvars`` context, while the run thread waits for it, delivers its updates and runs
the hooks: so a timeout or an abort (after ``abort_grace``) can leave it behind, as in a
parallel batch. A tool declared ``on_run_thread=True`` is the exception: it runs on the run
thread itself, so thread-locals and open transactions (Django, SQLAlchemy sessions) stay
valid inside it, and nothing can leave it behind (no timeout, and an abort waits for it).
"""

from __future__ import annotations

import contextvars
import threading

from .._threads import run_in_thread
from ..ai.types import ToolCall
from ..events import ToolExecutionUpdateEvent
from ..types import AgentToolResult
from ._common import (
    BatchContext,
    Notifications,
    Outcome,
    Prepared,
    ToolBatch,
    batch_terminates,
    collect,
    emit_end,
    emit_result_messages,
    emit_start,
    link_signal,
    prepare,
    record_intents,
)

__all__ = ["run_sequential"]


def run_sequential(batch: BatchContext, calls: list[ToolCall]) -> ToolBatch:
    """Run ``calls`` in source order; once the run is aborted, the calls left end as aborted."""
    outcomes: list[Outcome] = []
    messages = []
    for index, call in enumerate(calls):
        emit_start(batch, call)
        prepared = prepare(batch, index, call)
        if not isinstance(prepared, Outcome):
            prepared = record_intents(batch, [prepared]).get(index, prepared)
        if isinstance(prepared, Outcome):
            outcome = prepared
            emit_end(batch, outcome)
        else:
            outcome = _run_one(batch, prepared)
        outcomes.append(outcome)
        messages.extend(emit_result_messages(batch, [outcome]))
    return ToolBatch(messages, batch_terminates(outcomes))


def _run_one(batch: BatchContext, job: Prepared) -> Outcome:
    notes = Notifications()
    finished: dict[int, Outcome] = {}
    unlink = link_signal(job, batch.signal)
    try:
        if job.tool.on_run_thread:
            _run_inline(batch, notes, job)
        else:  # on a worker, so that the batch can go on when it times out or ignores an abort
            run_in_thread(contextvars.copy_context().run, notes.run, job)
        collect(batch, notes, {job.index: job}, finished)
    finally:
        if job.settled:  # a call still running (the batch was interrupted) keeps hearing the run's abort
            unlink()
    return finished[job.index]


def _run_inline(batch: BatchContext, notes: Notifications, job: Prepared) -> None:
    """Execute on the run thread; updates made on it are dispatched at once, others queued."""
    run_thread = threading.get_ident()
    queued = notes.on_update_for(job)

    def on_update(partial: AgentToolResult) -> None:
        if job.settled:
            return
        if threading.get_ident() != run_thread:
            queued(partial)
            return
        batch.emit(ToolExecutionUpdateEvent(job.call.id, job.call.name, job.call.arguments, partial, job.args))

    # A copy of the run thread's context, as a pool thread gets: the tool sees the caller's
    # contextvars, and what it sets does not leak into the loop or the next call.
    contextvars.copy_context().run(notes.run, job, on_update)
