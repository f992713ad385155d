"""What both batch algorithms share: preflight, running one call, finalisation, results.

Threading: preflight and finalisation (and so every hook) run on the run thread. A call's
``execute`` runs wherever the algorithm puts it; everything it reports from another thread
(updates, the outcome) goes through a :class:`Notifications` queue that only the run thread
reads, so listeners never run on a worker. (A call of an ``on_run_thread`` tool, running on
the run thread itself, dispatches its updates at once.)
"""

from __future__ import annotations

import contextvars
import dataclasses
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from .. import instrumentation
from .._effects import intent_for, key_for, running_with_key
from .._interrupts import wait_slice
from ..abort import AbortController, AbortSignal
from ..ai.arguments_check import RejectedToolCall, argument_problem
from ..ai.types import AssistantMessage, ImageContent, TextContent, ToolCall, ToolResultMessage
from ..ai.validation import validate_tool_arguments
from ..events import (
    AgentEvent,
    MessageEndEvent,
    MessageStartEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
)
from ..types import (
    DEFAULT_ABORT_GRACE,
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
)

logger = logging.getLogger("piagent")

Emit = Callable[[AgentEvent], None]

_abandoned_lock = threading.Lock()
_abandoned = 0


def abandoned_tool_threads() -> int:
    """How many tool calls have timed out and been left to finish, since the process started.

    A cumulative count: a call that returns later (its worker thread then goes back to
    :mod:`piagent._threads`' idle workers) still counts.
    """
    return _abandoned


def error_result(message: str, terminate: bool = False) -> AgentToolResult:
    return AgentToolResult([TextContent(message)], {}, terminate)


def exception_message(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


@dataclass
class Outcome:
    """A finished call: its result after overrides, whether it is an error, the validated
    arguments ``execute`` received (None for a call that never passed preflight) and how long
    ``execute`` took in milliseconds, on a monotonic clock (None when it did not run or was
    abandoned)."""

    call: ToolCall
    result: AgentToolResult
    is_error: bool
    args: Any = None
    duration_ms: Optional[int] = None


@dataclass
class Prepared:
    """A call that passed preflight and waits to be executed.

    It is *settled* once its outcome is decided: by the worker that ran it (it returned or
    raised) or by the run thread (it timed out), whichever comes first. :meth:`settle` is that
    decision, taken under a lock, so exactly one side wins.
    """

    index: int
    call: ToolCall
    tool: AgentTool
    args: Any
    timeout: Optional[float] = None
    controller: AbortController = field(default_factory=AbortController)
    deadline: Optional[float] = None
    key: str = ""
    _settled: bool = field(default=False, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def settled(self) -> bool:
        return self._settled

    def settle(self) -> bool:
        """Decide the outcome: True for the one caller that settles the call, False if it already was."""
        with self._lock:
            if self._settled:
                return False
            self._settled = True
            return True


@dataclass
class BatchContext:
    """What one batch needs from the loop."""

    context: AgentContext
    message: AssistantMessage
    config: AgentLoopConfig
    signal: AbortSignal
    emit: Emit


def find_tool(tools: list[AgentTool], name: str) -> Optional[AgentTool]:
    for tool in tools:
        if tool.name == name:
            return tool
    return None


def emit_start(batch: BatchContext, call: ToolCall) -> None:
    batch.emit(ToolExecutionStartEvent(call.id, call.name, call.arguments))


def emit_end(batch: BatchContext, outcome: Outcome) -> None:
    """Fix the outcome's result (its text bounded, see :func:`bounded`) and emit ``tool_execution_end``.

    Every outcome passes here once, before its result message is made.
    """
    outcome.result = bounded(outcome.result, batch.config.max_tool_result_chars)
    batch.emit(
        ToolExecutionEndEvent(
            outcome.call.id, outcome.call.name, outcome.result, outcome.is_error, outcome.args, outcome.duration_ms
        )
    )


def bounded(result: AgentToolResult, limit: Optional[int]) -> AgentToolResult:
    """``result`` with at most ``limit`` characters of text (the first ones), and a note saying
    what was cut; the same object when it fits. Images and ``details`` are kept as they are."""
    content = result.content or []
    total = sum(len(block.text) for block in content if isinstance(block, TextContent))
    if limit is None or total <= limit:
        return result
    budget = limit
    kept: list[Any] = []
    for block in content:
        if not isinstance(block, TextContent):
            kept.append(block)
        elif budget > 0:
            kept.append(TextContent(block.text[:budget], block.text_signature))
            budget -= min(budget, len(block.text))
    note = (
        f"\n\n[Output truncated: {total - limit:,} of {total:,} characters omitted (max_tool_result_chars={limit:,})]"
    )
    texts = [index for index, block in enumerate(kept) if isinstance(block, TextContent)]
    if texts:
        last = kept[texts[-1]]
        kept[texts[-1]] = TextContent(last.text + note, last.text_signature)
    else:
        kept.append(TextContent(note.lstrip()))
    return dataclasses.replace(result, content=kept)


def prepare(batch: BatchContext, index: int, call: ToolCall) -> Union[Outcome, Prepared]:
    """Preflight (docs/loop.md#rule-12): abort, lookup, prepare_arguments, validation, before_tool_call, abort.

    Once the run is aborted a call skips all of it, hooks included, and still gets its result
    (pi 1.6: no call is left without one).
    """
    if batch.signal.aborted:
        return Outcome(call, error_result("Operation aborted"), True)
    tool = find_tool(batch.context.tools, call.name)
    if tool is None:
        return Outcome(call, error_result(f"Tool {call.name} not found"), True)
    problem = call.problem if isinstance(call, RejectedToolCall) else argument_problem(call.arguments)
    if problem is not None:
        if not isinstance(call, RejectedToolCall):
            problem = f"its arguments {problem}"
        return Outcome(call, error_result(f"Tool {call.name} was not executed: {problem}"), True)
    try:
        target = call
        if tool.prepare_arguments is not None:
            prepared_args = tool.prepare_arguments(call.arguments)
            if prepared_args is not call.arguments:
                target = ToolCall(call.id, call.name, prepared_args, call.thought_signature)
        args = validate_tool_arguments(tool, target)
        hook = batch.config.before_tool_call
        decision = None
        if hook is not None:
            decision = hook(BeforeToolCallContext(batch.message, call, args, batch.context), batch.signal)
            if decision is not None and not isinstance(decision, BeforeToolCallResult):
                message = f"before_tool_call returned {type(decision).__name__}, expected BeforeToolCallResult or None"
                return Outcome(call, error_result(message), True)
        if batch.signal.aborted:  # an abort wins over a block
            return Outcome(call, error_result("Operation aborted"), True)
        if decision is not None and decision.block:
            reason = decision.reason or "Tool execution was blocked"
            return Outcome(call, error_result(reason, bool(decision.terminate)), True)
    except Exception as exc:
        return Outcome(call, error_result(exception_message(exc)), True)
    timeout = tool.timeout if tool.timeout is not None else batch.config.tool_timeout
    if tool.on_run_thread:  # nothing can leave a call on the run thread behind
        timeout = None
    return Prepared(index, call, tool, args, timeout, key=key_for(batch.config.intent_journal, call.id))


def record_intents(batch: BatchContext, jobs: list[Prepared]) -> dict[int, Outcome]:
    """Store the intents of ``jobs`` in one durable write before any of them runs (docs/effects.md).

    ``replay="safe"`` tools record none. Returns the outcomes of calls that must not run: every
    job's, as an error result, when the write failed; none otherwise.
    """
    journal = batch.config.intent_journal
    if journal is None:
        return {}
    intents = [intent_for(journal, job.call, job.tool.name, job.args) for job in jobs if job.tool.replay != "safe"]
    if not intents:
        return {}
    try:
        journal.record_intents(intents)
    except Exception as exc:
        problem = exception_message(exc)
        return {
            job.index: Outcome(
                job.call,
                error_result(f"Tool {job.call.name} was not executed: its intent could not be recorded ({problem})"),
                True,
                job.args,
            )
            for job in jobs
        }
    return {}


def finalize(
    batch: BatchContext, job: Prepared, result: AgentToolResult, is_error: bool, duration_ms: Optional[int] = None
) -> Outcome:
    """Apply ``after_tool_call`` (docs/loop.md#rule-14); a raising hook makes an error result."""
    hook = batch.config.after_tool_call
    if hook is not None:
        try:
            override = hook(
                AfterToolCallContext(batch.message, job.call, job.args, result, is_error, batch.context),
                batch.signal,
            )
        except Exception as exc:
            return Outcome(job.call, error_result(exception_message(exc)), True, job.args, duration_ms)
        if override is not None and not isinstance(override, AfterToolCallResult):
            message = f"after_tool_call returned {type(override).__name__}, expected AfterToolCallResult or None"
            return Outcome(job.call, error_result(message), True, job.args, duration_ms)
        if override is not None:
            problem = None if override.content is None else content_problem(override.content)
            if problem is not None:
                return Outcome(
                    job.call,
                    error_result(f"after_tool_call returned invalid content: {problem}"),
                    True,
                    job.args,
                    duration_ms,
                )
            result = _overridden(result, override)
            if override.is_error is not None:
                is_error = override.is_error
    return Outcome(job.call, result, is_error, job.args, duration_ms)


def _overridden(result: AgentToolResult, override: AfterToolCallResult) -> AgentToolResult:
    """pi's merge: each field set replaces the original; ``content`` without ``structured_content``
    drops the original structured content, which may no longer match it."""
    changes = {
        name: getattr(override, name)
        for name in ("content", "details", "terminate", "usage", "structured_content")
        if getattr(override, name) is not None
    }
    if override.content is not None and override.structured_content is None:
        changes["structured_content"] = None
    return dataclasses.replace(result, **changes) if changes else result


def result_message(outcome: Outcome) -> ToolResultMessage:
    """The transcript's record of a call; ``structured_content`` stays out (never sent to the model)."""
    return ToolResultMessage(
        tool_call_id=outcome.call.id,
        tool_name=outcome.call.name,
        content=list(outcome.result.content or []),
        details=outcome.result.details,
        is_error=outcome.is_error,
        usage=outcome.result.usage,
        duration_ms=outcome.duration_ms,
    )


def emit_result_messages(batch: BatchContext, outcomes: list[Outcome]) -> list[ToolResultMessage]:
    messages = []
    for outcome in outcomes:
        message = result_message(outcome)
        batch.emit(MessageStartEvent(message))
        batch.emit(MessageEndEvent(message))
        messages.append(message)
    return messages


@dataclass
class ToolBatch:
    """The result messages of a batch, in call order, and whether the batch asks to stop."""

    messages: list[ToolResultMessage]
    terminate: bool


def batch_terminates(outcomes: list[Outcome]) -> bool:
    """True iff there is an outcome and every one has ``terminate`` set (docs/loop.md#rule-16)."""
    return bool(outcomes) and all(o.result.terminate is True for o in outcomes)


# --------------------------------------------------------------------------- running calls


@dataclass(frozen=True)
class Started:
    """A call with a timeout started running: its deadline counts from now."""

    job: Prepared


@dataclass(frozen=True)
class Update:
    """A call reported a partial result."""

    job: Prepared
    partial: AgentToolResult


@dataclass(frozen=True)
class Done:
    """A call returned or raised: its outcome, before ``after_tool_call``, and how long it ran."""

    job: Prepared
    result: AgentToolResult
    is_error: bool
    duration_ms: Optional[int] = None


@dataclass(frozen=True)
class Wake:
    """The run was aborted: the run thread looks at its calls again."""


Note = Union[Started, Update, Done, Wake]


class Notifications:
    """The run thread's inbox for one batch: :class:`Started`, :class:`Update` and :class:`Done` notes.

    Updates a call posts before it returns always precede its ``Done``; updates posted after
    it settled are dropped (docs/loop.md#rule-13).
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Note] = queue.SimpleQueue()

    def on_update_for(self, job: Prepared) -> Callable[[AgentToolResult], None]:
        def on_update(partial: AgentToolResult) -> None:
            if not job.settled:
                self._queue.put(Update(job, partial))

        return on_update

    def run(self, job: Prepared, on_update: Optional[Callable[[AgentToolResult], None]] = None) -> None:
        """Execute ``job`` on the current thread and post its outcome.

        A call with a timeout posts ``started`` first: its deadline counts from there, not
        from submission (a user's executor may keep it waiting for a thread). A tool raising a
        BaseException (SystemExit, KeyboardInterrupt) is still reported as an error outcome,
        so the run thread never waits for it forever; the exception then goes on up.
        """
        if job.timeout is not None:
            job.deadline = time.monotonic() + job.timeout
            self._queue.put(Started(job))
        started = time.monotonic()
        try:
            result, is_error = execute(job, on_update or self.on_update_for(job))
        except BaseException as exc:
            self._settle(job, error_result(exception_message(exc)), True, elapsed_ms(started))
            raise
        self._settle(job, result, is_error, elapsed_ms(started))

    def _settle(
        self, job: Prepared, result: AgentToolResult, is_error: bool, duration_ms: Optional[int] = None
    ) -> None:
        if job.settle():  # else it timed out first: this outcome is not reported
            self._queue.put(Done(job, result, is_error, duration_ms))

    def wake(self) -> None:
        self._queue.put(Wake())

    def get(self, timeout: Optional[float]) -> Optional[Note]:
        """The next note, or None after ``timeout`` seconds (sooner on the main thread: a SIGINT
        landing just before a blocking wait is only seen when the wait ends, so the main thread
        waits in slices and Ctrl-C always interrupts a batch, docs/architecture.md#the-thread-contract)."""
        try:
            return self._queue.get(timeout=wait_slice(timeout))
        except queue.Empty:
            return None


def elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def execute(job: Prepared, on_update: Callable[[AgentToolResult], None]) -> tuple[AgentToolResult, bool]:
    """Call the tool; a raise (or a value that is not an AgentToolResult) is an error result, and
    so is a result with ``is_error=True`` (kept whole: its details and structured content too)."""
    run_tool = job.tool.execute
    observer = instrumentation.current()  # the seam: piagent/instrumentation.py
    if observer is not None:
        run_tool = observer.tool_call(run_tool, job.call)
    try:
        with running_with_key(job.key or job.call.id):
            result = run_tool(job.call.id, job.args, job.controller.signal, on_update)
    except Exception as exc:
        return error_result(exception_message(exc)), True
    if not isinstance(result, AgentToolResult):
        message = f"Tool {job.call.name} returned {type(result).__name__}, expected AgentToolResult"
        return error_result(message), True
    if result.content is None:
        result = dataclasses.replace(result, content=[])
    problem = content_problem(result.content)
    if problem is not None:
        return error_result(f"Tool {job.call.name} returned invalid content: {problem}"), True
    return result, result.is_error is True


def content_problem(content: Any) -> Optional[str]:
    """What is wrong with a tool result's ``content`` (None if it is a list of text/image blocks).

    Checked before the result enters the transcript: a malformed block there would break
    every later request, not just this one.
    """
    if not isinstance(content, list):
        return f"expected a list of TextContent/ImageContent blocks, got {type(content).__name__}"
    for block in content:
        if isinstance(block, TextContent) and isinstance(block.text, str):
            continue
        if isinstance(block, ImageContent) and isinstance(block.data, str) and isinstance(block.mime_type, str):
            continue
        return f"expected TextContent/ImageContent blocks, got {_describe(block)}"
    return None


def _describe(block: Any) -> str:
    if isinstance(block, TextContent):
        return f"TextContent with text of type {type(block.text).__name__}"
    if isinstance(block, ImageContent):
        return "ImageContent whose data or mime_type is not a str"
    return type(block).__name__


def link_signal(job: Prepared, signal: AbortSignal) -> Callable[[], None]:
    """Abort the call's own signal when the run's signal aborts; returns the unlinker."""
    return signal.add_listener(lambda: job.controller.abort(signal.reason))


def time_out(job: Prepared) -> tuple[AgentToolResult, bool]:
    """Give up on a call the run thread settled past its deadline: abort its signal, count and
    log the thread left behind."""
    job.controller.abort(TimeoutError(f"Tool {job.call.name} timed out after {job.timeout:g}s"))
    message = f"Tool {job.call.name} timed out after {job.timeout:g} seconds"
    return _abandon(job, message, f"timed out after {job.timeout:g}s")


def _abort_abandoned(job: Prepared, grace: float) -> tuple[AgentToolResult, bool]:
    """Give up on a call the run thread settled after it ignored an abort for ``grace`` seconds."""
    message = f"Tool {job.call.name} was aborted: it did not stop within the abort grace period of {grace:g} s"
    return _abandon(job, message, f"ignored the abort for {grace:g}s")


def _abandon(job: Prepared, message: str, why: str) -> tuple[AgentToolResult, bool]:
    """Stop waiting for a settled call: its thread is left to finish, counted and logged."""
    global _abandoned
    with _abandoned_lock:
        _abandoned += 1
        count = _abandoned
    logger.warning(
        "tool %s (call %s) %s; its thread is left to finish (%d left so far)", job.call.name, job.call.id, why, count
    )
    return error_result(message), True


class Dispatcher:
    """Starts a batch's calls, at most ``cap`` running at once: the next one starts when one
    finishes or is abandoned (an abandoned call's thread no longer counts)."""

    def __init__(self, submit: Callable[..., Any], notes: Notifications, cap: int) -> None:
        self._submit = submit
        self._notes = notes
        self._cap = max(1, cap)
        self._pending: list[Prepared] = []
        self._running: set[int] = set()

    def add(self, job: Prepared) -> None:
        self._pending.append(job)

    def fill(self) -> None:
        while self._pending and len(self._running) < self._cap:
            job = self._pending.pop(0)
            self._running.add(job.index)
            self._submit(contextvars.copy_context().run, self._notes.run, job)

    def left(self, job: Prepared) -> None:
        self._running.discard(job.index)
        self.fill()

    def drop_pending(self) -> list[Prepared]:
        """The calls not started yet, which now never will."""
        dropped, self._pending = self._pending, []
        return dropped


def collect(
    batch: BatchContext,
    notes: Notifications,
    jobs: dict[int, Prepared],
    finished: dict[int, Outcome],
    dispatcher: Optional[Dispatcher] = None,
) -> None:
    """On the run thread: deliver updates and finalise calls as they finish, until none is left.

    ``tool_execution_end`` is emitted in completion order; ``finished`` maps index -> outcome.
    Once the run is aborted (by the time the batch starts, too), calls not started yet end as
    aborted at once, and calls still
    running ``config.abort_grace`` seconds later are abandoned like timed-out ones.
    """
    waiting = dict(jobs)
    grace = DEFAULT_ABORT_GRACE if batch.config.abort_grace is None else batch.config.abort_grace
    abort_deadline: Optional[float] = None

    def leave(job: Prepared, result: AgentToolResult, is_error: bool, duration_ms: Optional[int] = None) -> None:
        del waiting[job.index]
        if dispatcher is not None:
            dispatcher.left(job)
        _finish(batch, job, result, is_error, duration_ms, finished)

    def drop(job: Prepared) -> None:
        """A call that never started: aborted, and no after_tool_call, as it did not run."""
        job.settle()
        del waiting[job.index]
        finished[job.index] = outcome = Outcome(job.call, error_result("Operation aborted"), True, job.args)
        emit_end(batch, outcome)

    unlink = batch.signal.add_listener(notes.wake)
    try:
        if dispatcher is not None and not batch.signal.aborted:  # else none starts: all end as aborted below
            dispatcher.fill()
        while waiting:
            if abort_deadline is None and batch.signal.aborted:
                abort_deadline = time.monotonic() + grace
                for job in dispatcher.drop_pending() if dispatcher is not None else []:
                    drop(job)
                continue
            deadlines = [job.deadline for job in waiting.values() if job.deadline is not None]
            if abort_deadline is not None:
                deadlines.append(abort_deadline)
            timeout = max(0.0, min(deadlines) - time.monotonic()) if deadlines else None
            note = notes.get(timeout)
            if note is None:
                now = time.monotonic()
                for job in list(waiting.values()):
                    # settle() fails when the call's Done is already on its way: that outcome is read next
                    if job.deadline is not None and job.deadline <= now and job.settle():
                        leave(job, *time_out(job))
                    elif abort_deadline is not None and abort_deadline <= now and job.settle():
                        leave(job, *_abort_abandoned(job, grace))
                continue
            if isinstance(note, Wake):
                continue  # the run was aborted: the next turn of the loop sees it
            job = note.job
            if job.index not in waiting:
                continue  # a call that already timed out
            if isinstance(note, Update):
                batch.emit(
                    ToolExecutionUpdateEvent(job.call.id, job.call.name, job.call.arguments, note.partial, job.args)
                )
            elif isinstance(note, Done):
                leave(job, note.result, note.is_error, note.duration_ms)
            # Started: nothing to do, its deadline now counts
    finally:
        unlink()


def _finish(
    batch: BatchContext,
    job: Prepared,
    result: AgentToolResult,
    is_error: bool,
    duration_ms: Optional[int],
    finished: dict[int, Outcome],
) -> None:
    outcome = finalize(batch, job, result, is_error, duration_ms)
    finished[job.index] = outcome
    emit_end(batch, outcome)
