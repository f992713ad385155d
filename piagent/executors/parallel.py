"""Parallel batches (spec §4.7): preflight every call in order, then run them all at once.

No call starts before every preflight (and so every ``before_tool_call``) finished.
``tool_execution_end`` follows completion order; result messages follow call order. Calls run
on the given ``concurrent.futures.Executor``, or on a pool made for the batch with one thread
per call (capped by ``max_workers``; a cap means calls past it wait for a free thread).
``contextvars`` are copied into every call.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Callable, Dict, List, Optional, Tuple

from ..ai.types import ToolCall
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
    start_thread,
)

__all__ = ["run_parallel"]


def run_parallel(batch: BatchContext, calls: List[ToolCall]) -> ToolBatch:
    outcomes: Dict[int, Outcome] = {}
    jobs: Dict[int, Prepared] = {}
    for index, call in enumerate(calls):
        emit_start(batch, call)
        prepared = prepare(batch, index, call)
        if isinstance(prepared, Outcome):
            outcomes[index] = prepared
            emit_end(batch, prepared)
        else:
            jobs[index] = prepared
        if batch.signal.aborted:
            break
    if jobs:
        _run_jobs(batch, jobs, outcomes)
    ordered = [outcomes[index] for index in sorted(outcomes)]
    return ToolBatch(emit_result_messages(batch, ordered), batch_terminates(ordered))


def _run_jobs(batch: BatchContext, jobs: Dict[int, Prepared], outcomes: Dict[int, Outcome]) -> None:
    notes = Notifications()
    executor: Optional[Executor] = batch.config.executor
    own_pool: Optional[ThreadPoolExecutor] = None
    # Without a user executor, a call with a timeout gets a daemon thread of its own: if it
    # times out and never returns, a pool thread would keep the interpreter from exiting.
    own_thread = executor is None
    pooled = sum(1 for job in jobs.values() if not (own_thread and job.timeout is not None))
    if executor is None and pooled:
        workers = min(pooled, batch.config.max_workers or pooled)
        own_pool = executor = ThreadPoolExecutor(workers, thread_name_prefix="piagent-tool")
    links: List[Tuple[Prepared, Callable[[], None]]] = []
    try:
        for job in jobs.values():
            links.append((job, link_signal(job, batch.signal)))
            if own_thread and job.timeout is not None:
                start_thread(notes, job)
            else:
                executor.submit(contextvars.copy_context().run, notes.run, job)  # type: ignore[union-attr]
        collect(batch, notes, jobs, outcomes)
    finally:
        for job, unlink in links:
            if job.settled:  # a call still running (the batch was interrupted) keeps hearing the run's abort
                unlink()
        if own_pool is not None:
            own_pool.shutdown(wait=False)
