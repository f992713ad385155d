"""Parallel batches (docs/loop.md#rule-15): preflight every call in order, then run them all at once.

No call starts before every preflight (and so every ``before_tool_call``) finished.
``tool_execution_end`` follows completion order; result messages follow call order. Calls run
on the given ``concurrent.futures.Executor``; else each on a thread of its own, reused from
earlier batches when one is idle (:mod:`piagent._threads`); with ``max_workers`` below the
number of calls without a timeout, those run on a pool made for the batch (calls past the
cap wait for a free thread).
``contextvars`` are copied into every call.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, Callable, Optional

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
        if batch.signal.aborted:
            break
    if jobs:
        _run_jobs(batch, jobs, outcomes)
    ordered = [outcomes[index] for index in sorted(outcomes)]
    return ToolBatch(emit_result_messages(batch, ordered), batch_terminates(ordered))


def _run_jobs(batch: BatchContext, jobs: dict[int, Prepared], outcomes: dict[int, Outcome]) -> None:
    notes = Notifications()
    executor: Optional[Executor] = batch.config.executor
    submit: Callable[..., Any] = run_in_thread if executor is None else executor.submit
    # Without a user executor, max_workers below the batch size caps the calls without a
    # timeout on a pool made for the batch. A call with a timeout never waits for a thread
    # there (its deadline counts from its start): it runs on a reused daemon worker, like the
    # rest of an uncapped batch.
    own_pool: Optional[ThreadPoolExecutor] = None
    cap = batch.config.max_workers
    if executor is None and cap and cap < sum(1 for job in jobs.values() if job.timeout is None):
        own_pool = ThreadPoolExecutor(max(1, cap), thread_name_prefix="piagent-tool")
    links: list[tuple[Prepared, Callable[[], None]]] = []
    try:
        for job in jobs.values():
            links.append((job, link_signal(job, batch.signal)))
            start = own_pool.submit if own_pool is not None and job.timeout is None else submit
            start(contextvars.copy_context().run, notes.run, job)
        collect(batch, notes, jobs, outcomes)
    finally:
        for job, unlink in links:
            if job.settled:  # a call still running (the batch was interrupted) keeps hearing the run's abort
                unlink()
        if own_pool is not None:
            own_pool.shutdown(wait=False)
