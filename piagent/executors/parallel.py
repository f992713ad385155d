"""Parallel batches (docs/loop.md#rule-15): preflight every call in order, then run them all at once.

No call starts before every preflight (and so every ``before_tool_call``) finished.
``tool_execution_end`` follows completion order; result messages follow call order. Calls run
on the given ``concurrent.futures.Executor``; else each on a thread of its own, reused from
earlier batches when one is idle (:mod:`piagent._threads`). At most ``max_workers`` calls
(default 16) run at once: the next starts when one finishes, times out or is abandoned after
an abort. ``contextvars`` are copied into every call.
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Any, Callable, Optional

from .._threads import run_in_thread
from ..ai.types import ToolCall
from ..types import DEFAULT_MAX_WORKERS
from ._common import (
    BatchContext,
    Dispatcher,
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

__all__ = ["run_parallel"]


def run_parallel(batch: BatchContext, calls: list[ToolCall]) -> ToolBatch:
    outcomes: dict[int, Outcome] = {}
    jobs: dict[int, Prepared] = {}
    for index, call in enumerate(calls):
        emit_start(batch, call)
        prepared = prepare(batch, index, call)
        if isinstance(prepared, Outcome):
            outcomes[index] = prepared
            emit_end(batch, prepared)
        else:
            jobs[index] = prepared
    for index, refused in record_intents(batch, list(jobs.values())).items():  # one write for the batch
        del jobs[index]
        outcomes[index] = refused
        emit_end(batch, refused)
    if jobs:
        _run_jobs(batch, jobs, outcomes)
    ordered = [outcomes[index] for index in sorted(outcomes)]
    return ToolBatch(emit_result_messages(batch, ordered), batch_terminates(ordered))


def _run_jobs(batch: BatchContext, jobs: dict[int, Prepared], outcomes: dict[int, Outcome]) -> None:
    notes = Notifications()
    executor: Optional[Executor] = batch.config.executor
    submit: Callable[..., Any] = run_in_thread if executor is None else executor.submit
    dispatcher = Dispatcher(submit, notes, batch.config.max_workers or DEFAULT_MAX_WORKERS)
    links: list[tuple[Prepared, Callable[[], None]]] = []
    try:
        for job in jobs.values():
            links.append((job, link_signal(job, batch.signal)))
            dispatcher.add(job)
        collect(batch, notes, jobs, outcomes, dispatcher)
    finally:
        for job, unlink in links:
            if job.settled:  # a call still running (the batch was interrupted) keeps hearing the run's abort
                unlink()
