"""Parallel batches (spec §4.7): preflight every call in order, then run them all at once.

No call starts before every preflight (and so every ``before_tool_call``) finished.
``tool_execution_end`` follows completion order; result messages follow call order. Calls run
on the given ``concurrent.futures.Executor``; else each on a thread of its own, reused from
earlier batches when one is idle (:mod:`piagent._threads`); with ``max_workers`` below the
batch size, on a pool made for the batch (calls past the cap wait for a free thread).
``contextvars`` are copied into every call.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Tuple

from .._threads import run_in_thread
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
    # Without a user executor, a call with a timeout gets a daemon thread of its own, named for
    # its tool; the others run on reused worker threads (a capped pool if max_workers asks).
    own_thread = executor is None
    pooled = sum(1 for job in jobs.values() if not (own_thread and job.timeout is not None))
    submit: Callable[..., Any] = run_in_thread
    if executor is not None:
        submit = executor.submit
    elif batch.config.max_workers and batch.config.max_workers < pooled:
        own_pool = ThreadPoolExecutor(max(1, batch.config.max_workers), thread_name_prefix="piagent-tool")
        submit = own_pool.submit
    links: List[Tuple[Prepared, Callable[[], None]]] = []
    try:
        for job in jobs.values():
            links.append((job, link_signal(job, batch.signal)))
            if own_thread and job.timeout is not None:
                start_thread(notes, job)
            else:
                submit(contextvars.copy_context().run, notes.run, job)
        collect(batch, notes, jobs, outcomes)
    finally:
        for job, unlink in links:
            if job.settled:  # a call still running (the batch was interrupted) keeps hearing the run's abort
                unlink()
        if own_pool is not None:
            own_pool.shutdown(wait=False)
