"""Tool batches (docs/loop.md#tool-batches): parallel and sequential execution with real threads.

Every batch here runs inside the real loop (``run_agent_loop`` on the test thread, which is
therefore the run thread). Ordering is forced with ``threading.Event``s, never with sleeps.
"""

from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Optional

import pytest

from piagent import (
    AbortController,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    BeforeToolCallResult,
    TextContent,
    run_agent_loop,
)
from piagent.executors import abandoned_tool_threads
from piagent.executors._common import BatchContext, Notifications, Prepared, collect
from piagent.types import DEFAULT_ABORT_GRACE, DEFAULT_MAX_TOOL_CALLS, DEFAULT_MAX_WORKERS
from tests.support.agent_support import text_of
from tests.support.loop import (
    ECHO_SCHEMA,
    MODEL,
    WAIT,
    ScriptedStream,
    assistant,
    call,
    config,
    echo_tool,
    of_type,
    short,
    user,
)

MODES = ["parallel", "sequential"]


def tool(name: str, execute: Callable[[str, Any, Any, Any], Any], **options: Any) -> AgentTool:
    return AgentTool(name, name, ECHO_SCHEMA, execute, **options)


def text_result(text: str, **fields: Any) -> AgentToolResult:
    return AgentToolResult([TextContent(text)], **fields)


def _then_done(context: Any, options: Any) -> Any:
    """The model's answer after the batch: aborted if the run was aborted, as a provider would."""
    if options.signal.aborted:
        return assistant("", stop_reason="aborted", error_message="Request was aborted")
    return assistant("done")


class Batch:
    """One assistant message with ``calls``, run through the loop; records everything."""

    def __init__(
        self,
        calls: list[Any],
        tools: list[AgentTool],
        on_event: Optional[Callable[[Any], None]] = None,
        controller: Optional[AbortController] = None,
        **cfg: Any,
    ) -> None:
        self.events: list[Any] = []
        self.event_threads: list[int] = []
        self.controller = controller or AbortController()
        self.stream_fn = ScriptedStream([assistant(calls), _then_done])

        def emit(event: Any) -> None:
            self.events.append(event)
            self.event_threads.append(threading.get_ident())
            if on_event is not None:
                on_event(event)

        self.result = run_agent_loop(
            [user("go")],
            AgentContext("", [], tools),
            AgentLoopConfig(model=MODEL, **cfg),
            emit,
            self.controller.signal,
            self.stream_fn,
        )

    def ids(self, kind: str) -> list[str]:
        return [e.tool_call_id for e in of_type(self.events, kind)]

    def ends(self) -> list[Any]:
        return of_type(self.events, "tool_execution_end")

    @property
    def result_ids(self) -> list[str]:
        return [m.tool_call_id for m in self.result if m.role == "toolResult"]

    @property
    def short(self) -> list[str]:
        return short(self.events)


class Log:
    """A thread-safe list of strings."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._lock = threading.Lock()

    def add(self, item: str) -> None:
        with self._lock:
            self.items.append(item)


# =========================================================================== parallel ordering


def test_no_tool_starts_before_every_before_tool_call_returned() -> None:
    log = Log()
    tool_started = threading.Event()

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        tool_started.set()
        log.add(f"exec:{tid}")
        return text_result("ok")

    def before(ctx: Any, signal: Any) -> None:
        if ctx.tool_call.id == "tool-3":
            # A tool started early would show up here; give it every chance to.
            log.add(f"tool started during preflight: {tool_started.wait(0.1)}")
        log.add(f"before:{ctx.tool_call.id}")

    calls = [call(f"tool-{n}", value=str(n)) for n in (1, 2, 3)]
    Batch(calls, [tool("echo", execute)], before_tool_call=before)
    assert log.items[:4] == ["before:tool-1", "before:tool-2", "tool started during preflight: False", "before:tool-3"]
    assert sorted(log.items[4:]) == ["exec:tool-1", "exec:tool-2", "exec:tool-3"]


def test_tool_execution_end_follows_completion_order_while_results_follow_call_order() -> None:
    ended = {n: threading.Event() for n in (1, 2, 3)}

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        waits_for = {"tool-1": 3, "tool-2": 1, "tool-3": None}[tid]  # completion order: 3, 1, 2
        if waits_for is not None:
            assert ended[waits_for].wait(WAIT)
        return text_result(f"result of {tid}")

    def on_event(event: Any) -> None:
        if event.type == "tool_execution_end":
            ended[int(event.tool_call_id[-1])].set()

    calls = [call(f"tool-{n}", value=str(n)) for n in (1, 2, 3)]
    batch = Batch(calls, [tool("echo", execute)], on_event)
    assert batch.ids("tool_execution_end") == ["tool-3", "tool-1", "tool-2"]
    result_message_ends = [
        e.message.tool_call_id for e in of_type(batch.events, "message_end") if e.message.role == "toolResult"
    ]
    assert result_message_ends == ["tool-1", "tool-2", "tool-3"]
    turn_end = of_type(batch.events, "turn_end")[0]
    assert [m.tool_call_id for m in turn_end.tool_results] == ["tool-1", "tool-2", "tool-3"]
    assert batch.result_ids == ["tool-1", "tool-2", "tool-3"]
    next_context = batch.stream_fn.requests[1].context.messages
    assert [getattr(m, "tool_call_id", m.role) for m in next_context] == [
        "user",
        "assistant",
        "tool-1",
        "tool-2",
        "tool-3",
    ]
    assert [m.content[0].text for m in turn_end.tool_results] == [
        "result of tool-1",
        "result of tool-2",
        "result of tool-3",
    ]


def test_immediate_preflight_failures_are_reported_during_preflight() -> None:
    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return text_result("ok")

    def before(ctx: Any, signal: Any) -> Any:
        return BeforeToolCallResult(block=True, reason="no") if ctx.tool_call.id == "tool-4" else None

    calls = [
        call("tool-1", value="a"),
        call("tool-2", "missing", value="b"),
        call("tool-3", value=["x"]),  # invalid: a list is no string
        call("tool-4", value="d"),  # blocked
        call("tool-5", value="e"),
    ]
    batch = Batch(calls, [tool("echo", execute)], before_tool_call=before)
    tool_events = [s for s in batch.short if s.startswith(("tes", "tee"))]
    assert tool_events[:8] == [
        "tes(tool-1)",
        "tes(tool-2)",
        "tee(tool-2)",
        "tes(tool-3)",
        "tee(tool-3)",
        "tes(tool-4)",
        "tee(tool-4)",
        "tes(tool-5)",
    ]
    assert sorted(tool_events[8:]) == ["tee(tool-1)", "tee(tool-5)"]
    assert [e.is_error for e in batch.ends()[:3]] == [True, True, True]
    assert batch.result_ids == ["tool-1", "tool-2", "tool-3", "tool-4", "tool-5"]


# =========================================================================== updates and threads


def test_updates_from_worker_threads_are_delivered_on_the_run_thread_before_their_end() -> None:
    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        on_update(text_result(f"{tid} 1/3"))
        helper = threading.Thread(target=on_update, args=(text_result(f"{tid} 2/3"),))
        helper.start()  # a thread the tool itself spawned
        helper.join(WAIT)
        on_update(text_result(f"{tid} 3/3"))
        return text_result("ok")

    calls = [call(f"tool-{n}", value=str(n)) for n in (1, 2, 3)]
    batch = Batch(calls, [tool("echo", execute)])
    assert set(batch.event_threads) == {threading.get_ident()}
    sequence = batch.short
    for tid in ("tool-1", "tool-2", "tool-3"):
        updates = [
            e.partial_result.content[0].text
            for e in of_type(batch.events, "tool_execution_update")
            if e.tool_call_id == tid
        ]
        assert updates == [f"{tid} 1/3", f"{tid} 2/3", f"{tid} 3/3"]
        last_update = max(i for i, s in enumerate(sequence) if s == f"teu({tid})")
        assert last_update < sequence.index(f"tee({tid})")
    for update in of_type(batch.events, "tool_execution_update"):
        assert update.args == {"value": update.tool_call_id[-1]}


def test_late_updates_after_a_parallel_tool_settled_are_dropped() -> None:
    captured: list[Any] = []
    release_slow = threading.Event()
    late_done = threading.Event()

    def settled(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        captured.append(on_update)
        on_update(text_result("while running"))
        return text_result("settled")

    def slow(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        assert release_slow.wait(WAIT)
        return text_result("slow")

    def on_event(event: Any) -> None:
        if event.type == "tool_execution_end" and event.tool_call_id == "tool-1":
            worker = threading.Thread(target=lambda: (captured[0](text_result("late from a thread")), late_done.set()))
            worker.start()
            worker.join(WAIT)
            captured[0](text_result("late from the run thread"))
            release_slow.set()

    batch = Batch(
        [call("tool-1", "settled", value="a"), call("tool-2", "slow", value="b")],
        [tool("settled", settled), tool("slow", slow)],
        on_event,
    )
    assert late_done.is_set()
    assert [e.partial_result.content[0].text for e in of_type(batch.events, "tool_execution_update")] == [
        "while running"
    ]
    count = len(batch.events)
    captured[0](text_result("after the run"))  # no event, no error
    assert len(batch.events) == count


def test_late_updates_after_a_sequential_tool_settled_are_dropped() -> None:
    captured: list[Any] = []

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        captured.append(on_update)
        return text_result("ok")

    def on_event(event: Any) -> None:
        if event.type == "tool_execution_end":
            captured[0](text_result("late"))

    batch = Batch([call("tool-1", value="a")], [tool("echo", execute)], on_event, tool_execution="sequential")
    captured[0](text_result("after the run"))
    assert of_type(batch.events, "tool_execution_update") == []


def test_a_user_supplied_executor_runs_the_parallel_calls() -> None:
    class CountingExecutor(Executor):
        def __init__(self) -> None:
            self.pool = ThreadPoolExecutor(4, thread_name_prefix="user-pool")
            self.submitted = 0

        def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[Any]:
            self.submitted += 1
            return self.pool.submit(fn, *args, **kwargs)

    executor = CountingExecutor()
    names = Log()

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        names.add(threading.current_thread().name)
        return text_result("ok")

    try:
        batch = Batch([call(f"tool-{n}", value="x") for n in (1, 2, 3)], [tool("echo", execute)], executor=executor)
        assert executor.submitted == 3
        assert len(names.items) == 3 and all(name.startswith("user-pool") for name in names.items)
        assert batch.result_ids == ["tool-1", "tool-2", "tool-3"]
        assert executor.pool.submit(lambda: 42).result(WAIT) == 42  # not shut down by the batch
    finally:
        executor.pool.shutdown()


def test_the_default_pool_runs_every_call_of_a_batch_at_once() -> None:
    everyone = threading.Barrier(5)

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        everyone.wait(WAIT)  # raises BrokenBarrierError unless all five run concurrently
        return text_result("ok")

    batch = Batch([call(f"tool-{n}", value="x") for n in range(1, 6)], [tool("echo", execute)])
    assert [e.is_error for e in batch.ends()] == [False] * 5


def test_max_workers_caps_how_many_calls_run_at_once() -> None:
    lock = threading.Lock()
    running = {"now": 0, "max": 0}
    pairs = threading.Barrier(2)

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        with lock:
            running["now"] += 1
            running["max"] = max(running["max"], running["now"])
        pairs.wait(WAIT)  # two must be able to run together
        with lock:
            running["now"] -= 1
        return text_result("ok")

    batch = Batch([call(f"tool-{n}", value="x") for n in range(1, 7)], [tool("echo", execute)], max_workers=2)
    assert running["max"] == 2
    assert [e.is_error for e in batch.ends()] == [False] * 6
    assert batch.result_ids == [f"tool-{n}" for n in range(1, 7)]


def test_a_timed_out_call_frees_its_place_under_the_cap() -> None:
    """The cap counts calls piagent waits for: one abandoned after its timeout no longer counts,
    so the next call starts although the abandoned thread still runs."""
    release = threading.Event()

    def ignores_its_signal(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        release.wait(WAIT)
        return text_result("late")

    def quick(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        return text_result("quick")

    tools = [tool("stuck", ignores_its_signal, timeout=0.2), tool("quick", quick)]
    try:
        batch = Batch([call("tool-1", "stuck", value="a"), call("tool-2", "quick", value="b")], tools, max_workers=1)
    finally:
        release.set()
    assert [(e.tool_call_id, e.is_error) for e in batch.ends()] == [("tool-1", True), ("tool-2", False)]


def test_a_batch_runs_at_most_the_default_number_of_calls_at_once() -> None:
    lock = threading.Lock()
    running = {"now": 0, "max": 0}
    full = threading.Barrier(DEFAULT_MAX_WORKERS)

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        with lock:
            running["now"] += 1
            running["max"] = max(running["max"], running["now"])
        full.wait(WAIT)  # the first DEFAULT_MAX_WORKERS run together
        with lock:
            running["now"] -= 1
        return text_result("ok")

    calls = [call(f"tool-{n}", value="x") for n in range(3 * DEFAULT_MAX_WORKERS)]
    batch = Batch(calls, [tool("echo", execute)])
    assert DEFAULT_MAX_WORKERS == 16 and running["max"] == DEFAULT_MAX_WORKERS
    assert [e.is_error for e in batch.ends()] == [False] * len(calls)


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST_ID", default="unset")


@pytest.mark.parametrize("mode", MODES)
def test_contextvars_are_copied_into_tool_threads(mode: str) -> None:
    seen = Log()

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        seen.add(REQUEST_ID.get())
        REQUEST_ID.set(f"changed by {tid}")
        return text_result("ok")

    token = REQUEST_ID.set("request-42")
    try:
        Batch([call("tool-1", value="x"), call("tool-2", value="y")], [tool("echo", execute)], tool_execution=mode)
        assert seen.items == ["request-42", "request-42"]
        if mode == "parallel":
            assert REQUEST_ID.get() == "request-42"  # a worker's change stays in its copy
    finally:
        REQUEST_ID.reset(token)


def test_contextvars_reach_a_user_supplied_executor() -> None:
    seen = Log()

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        seen.add(REQUEST_ID.get())
        return text_result("ok")

    token = REQUEST_ID.set("request-7")
    with ThreadPoolExecutor(2) as pool:
        try:
            Batch([call("tool-1", value="x"), call("tool-2", value="y")], [tool("echo", execute)], executor=pool)
        finally:
            REQUEST_ID.reset(token)
    assert seen.items == ["request-7", "request-7"]


SEQUENTIAL_TOOL_EVENTS = ["tes(tool-1)", "tee(tool-1)", "tes(tool-2)", "tee(tool-2)"]
TWO_CALLS_WITH_TWO_UPDATES_EACH = [f"{kind}(tool-{n})" for n in (1, 2) for kind in ("tes", "teu", "teu", "tee")]


def test_sequential_mode_runs_tools_one_at_a_time_on_workers_and_listeners_on_the_run_thread() -> None:
    threads: list[int] = []
    order = Log()
    events: list[Any] = []

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        order.add(f"enter {tid}")
        threads.append(threading.get_ident())
        on_update(text_result(f"{tid} progress"))
        helper = threading.Thread(target=on_update, args=(text_result(f"{tid} from a helper"),))
        helper.start()
        helper.join(WAIT)
        order.add(f"leave {tid}")
        return text_result("ok")

    batch = Batch(
        [call("tool-1", value="a"), call("tool-2", value="b")],
        [tool("echo", execute)],
        events.append,
        tool_execution="sequential",
    )
    assert len(threads) == 2 and threading.get_ident() not in threads
    assert order.items == ["enter tool-1", "leave tool-1", "enter tool-2", "leave tool-2"]
    assert set(batch.event_threads) == {threading.get_ident()}
    tool_events = [s for s in batch.short if s.startswith(("tes", "teu", "tee"))]
    assert tool_events == TWO_CALLS_WITH_TWO_UPDATES_EACH


def test_an_on_run_thread_tool_runs_on_the_run_thread_and_dispatches_its_updates_at_once() -> None:
    threads: list[int] = []
    delivered_before_return: list[bool] = []
    events: list[Any] = []

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        threads.append(threading.get_ident())
        count = len(events)
        on_update(text_result(f"{tid} progress"))
        delivered_before_return.append(len(events) == count + 1 and events[-1].type == "tool_execution_update")
        helper = threading.Thread(target=on_update, args=(text_result(f"{tid} from a helper"),))
        helper.start()
        helper.join(WAIT)
        return text_result("ok")

    batch = Batch(
        [call("tool-1", value="a"), call("tool-2", value="b")],
        [tool("echo", execute, on_run_thread=True)],
        events.append,
    )
    assert threads == [threading.get_ident()] * 2
    assert delivered_before_return == [True, True]
    assert set(batch.event_threads) == {threading.get_ident()}
    tool_events = [s for s in batch.short if s.startswith(("tes", "teu", "tee"))]
    assert tool_events == TWO_CALLS_WITH_TWO_UPDATES_EACH


def test_one_sequential_tool_makes_the_whole_batch_sequential_on_workers() -> None:
    threads = Log()
    order = Log()

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        order.add(f"enter {tid}")
        threads.add(str(threading.get_ident()))
        order.add(f"leave {tid}")
        return text_result("ok")

    tools = [tool("free", execute, execution_mode="parallel"), tool("strict", execute, execution_mode="sequential")]
    calls = [call("tool-1", "free", value="a"), call("tool-2", "free", value="b"), call("tool-3", "strict", value="c")]
    batch = Batch(calls, tools)
    assert [s for s in batch.short if s.startswith(("tes", "tee"))] == SEQUENTIAL_TOOL_EVENTS + [
        "tes(tool-3)",
        "tee(tool-3)",
    ]
    assert order.items == [f"{step} tool-{n}" for n in (1, 2, 3) for step in ("enter", "leave")]
    assert len(threads.items) == 3 and str(threading.get_ident()) not in threads.items


def test_one_on_run_thread_tool_makes_the_batch_sequential_and_only_it_runs_on_the_run_thread() -> None:
    threads = Log()

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        threads.add(f"{tid} {threading.get_ident() == run_thread}")
        return text_result("ok")

    run_thread = threading.get_ident()
    tools = [tool("free", execute), tool("bound", execute, on_run_thread=True)]
    calls = [call("tool-1", "free", value="a"), call("tool-2", "bound", value="b"), call("tool-3", "free", value="c")]
    batch = Batch(calls, tools)
    assert [s for s in batch.short if s.startswith(("tes", "tee"))] == SEQUENTIAL_TOOL_EVENTS + [
        "tes(tool-3)",
        "tee(tool-3)",
    ]
    assert threads.items == ["tool-1 False", "tool-2 True", "tool-3 False"]


def test_a_parallel_tool_cannot_override_a_sequential_config() -> None:
    batch = Batch(
        [call("tool-1", value="a"), call("tool-2", value="b")],
        [tool("echo", lambda *a: text_result("ok"), execution_mode="parallel")],
        tool_execution="sequential",
    )
    # a sequential batch ends each call before it starts the next (a parallel one starts them all first)
    assert [s for s in batch.short if s.startswith(("tes", "tee"))] == SEQUENTIAL_TOOL_EVENTS


def test_unknown_tools_do_not_make_a_batch_sequential() -> None:
    threads = Log()

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        threads.add(str(threading.get_ident()))
        return text_result("ok")

    Batch([call("tool-1", "sequential-looking", value="a"), call("tool-2", value="b")], [tool("echo", execute)])
    assert threads.items and threads.items[0] != str(threading.get_ident())


# =========================================================================== abort


@pytest.mark.parametrize("mode", MODES)
def test_abort_during_preflight_answers_every_later_call_as_aborted_without_its_hooks(mode: str) -> None:
    """pi 1.6 (#9986): once aborted, a call skips preflight and the hooks but still gets its
    events and an "Operation aborted" result, so no call is left without one."""
    controller = AbortController()
    executed, hooked = Log(), Log()

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        executed.add(tid)
        return text_result("ok")

    def before(ctx: Any, signal: Any) -> None:
        hooked.add(ctx.tool_call.id)
        if ctx.tool_call.id == "tool-2":
            controller.abort("stop")

    calls = [call(f"tool-{n}", value="x") for n in (1, 2, 3)] + [call("tool-4", "missing")]
    after = Log()
    batch = Batch(
        calls,
        [tool("echo", execute)],
        controller=controller,
        before_tool_call=before,
        after_tool_call=lambda ctx, signal: after.add(ctx.tool_call.id),
        tool_execution=mode,
    )
    assert after.items == executed.items  # a call that did not run meets no after_tool_call either
    assert batch.ids("tool_execution_start") == ["tool-1", "tool-2", "tool-3", "tool-4"]
    assert hooked.items == ["tool-1", "tool-2"]
    # sequential: tool-1 ran before the abort; parallel: calls start once the preflights are done,
    # by then the run is aborted and tool-1 ends as aborted without running (pi 0.87)
    assert executed.items == (["tool-1"] if mode == "sequential" else [])
    assert batch.result_ids == ["tool-1", "tool-2", "tool-3", "tool-4"]
    aborted = [e for e in batch.ends() if mode == "parallel" or e.tool_call_id != "tool-1"]
    assert {(e.is_error, e.result.content[0].text) for e in aborted} == {(True, "Operation aborted")}
    assert batch.result[-1].stop_reason == "aborted"  # the next model call saw the abort


def test_abort_while_a_sequential_tool_runs_answers_the_remaining_calls_as_aborted() -> None:
    controller = AbortController()
    executed = Log()

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        executed.add(tid)
        controller.abort()
        return text_result("ok")

    batch = Batch(
        [call("tool-1", value="a"), call("tool-2", value="b")],
        [tool("echo", execute)],
        controller=controller,
        tool_execution="sequential",
    )
    assert executed.items == ["tool-1"]
    assert batch.ids("tool_execution_start") == ["tool-1", "tool-2"]
    assert batch.result_ids == ["tool-1", "tool-2"]
    assert [(e.is_error, e.result.content[0].text) for e in batch.ends()] == [
        (False, "ok"),
        (True, "Operation aborted"),
    ]


@pytest.mark.parametrize("mode", MODES)
def test_an_abort_reaches_the_signal_of_every_running_tool(mode: str) -> None:
    controller = AbortController()
    started = threading.Event()

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        if mode == "sequential":
            controller.abort("user stop")  # the run thread cannot abort from outside while it runs the tool
        else:
            started.set()
        if not signal.wait(WAIT):
            raise AssertionError("the tool's signal was never aborted")
        raise RuntimeError(f"cancelled: {signal.reason}")

    def on_event(event: Any) -> None:
        if event.type == "tool_execution_start" and mode == "parallel":
            threading.Thread(target=lambda: (started.wait(WAIT), controller.abort("user stop"))).start()

    batch = Batch(
        [call("tool-1", value="a")], [tool("echo", execute)], on_event, controller=controller, tool_execution=mode
    )
    [end] = batch.ends()
    assert (end.is_error, end.result.content[0].text) == (True, "cancelled: user stop")


# =========================================================================== terminate and overrides


def _returning(**by_id: AgentToolResult) -> AgentTool:
    return tool("echo", lambda tid, args, signal, on_update: by_id[tid])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "terminates, expected_calls",
    [((True, True), 1), ((True, False), 2), ((False, False), 2)],
)
def test_a_batch_terminates_only_when_every_result_says_so(mode: str, terminates: Any, expected_calls: int) -> None:
    results = {f"tool-{n}": text_result("r", terminate=t) for n, t in zip((1, 2), terminates)}
    batch = Batch([call("tool-1", value="a"), call("tool-2", value="b")], [_returning(**results)], tool_execution=mode)
    assert batch.stream_fn.calls == expected_calls


def test_an_immediate_error_prevents_termination() -> None:
    batch = Batch(
        [call("tool-1", value="a"), call("tool-2", "missing", value="b")],
        [_returning(**{"tool-1": text_result("r", terminate=True)})],
    )
    assert batch.stream_fn.calls == 2


def test_a_blocked_call_with_terminate_counts_as_terminating() -> None:
    def before(ctx, s):
        return (
            BeforeToolCallResult(block=True, reason="done here", terminate=True)
            if ctx.tool_call.id == "tool-2"
            else None
        )

    batch = Batch(
        [call("tool-1", value="a"), call("tool-2", value="b")],
        [_returning(**{"tool-1": text_result("r", terminate=True)})],
        before_tool_call=before,
    )
    assert batch.stream_fn.calls == 1
    assert [(e.tool_call_id, e.is_error) for e in batch.ends()] == [("tool-2", True), ("tool-1", False)]


def test_terminate_is_not_copied_into_the_tool_result_message() -> None:
    batch = Batch(
        [call("tool-1", value="a")], [_returning(**{"tool-1": text_result("r", details={"k": 1}, terminate=True)})]
    )
    message = batch.result[2]
    assert "terminate" not in message.to_dict()
    assert message.details == {"k": 1}


@dataclass
class RichResult(AgentToolResult):
    """A result carrying a field the override does not know about."""

    extra: str = ""


def test_after_tool_call_override_replaces_only_the_fields_it_sets() -> None:
    original = RichResult([TextContent("original")], {"kept": True}, False, extra="still here")

    def after(ctx: Any, signal: Any) -> AfterToolCallResult:
        return AfterToolCallResult(content=[TextContent("replaced")])

    batch = Batch([call("tool-1", value="a")], [_returning(**{"tool-1": original})], after_tool_call=after)
    [end] = batch.ends()
    assert isinstance(end.result, RichResult) and end.result.extra == "still here"
    assert [b.text for b in end.result.content] == ["replaced"]
    assert (end.result.details, end.result.terminate, end.is_error) == ({"kept": True}, False, False)
    assert original.content[0].text == "original"  # the tool's own object is left alone


def test_after_tool_call_override_of_details_keeps_the_content() -> None:
    def after(ctx, s):
        return AfterToolCallResult(details={"new": 1})

    batch = Batch(
        [call("tool-1", value="a")],
        [_returning(**{"tool-1": text_result("kept", details={"old": 1})})],
        after_tool_call=after,
    )
    assert (batch.ends()[0].result.content[0].text, batch.ends()[0].result.details) == ("kept", {"new": 1})
    assert batch.result[2].details == {"new": 1}


def test_after_tool_call_sees_the_error_outcome_and_can_clear_it() -> None:
    seen: list[Any] = []

    def fail(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        raise RuntimeError("boom")

    def after(ctx: Any, signal: Any) -> AfterToolCallResult:
        seen.append((ctx.is_error, ctx.result.content[0].text, threading.get_ident()))
        return AfterToolCallResult(content=[TextContent("recovered")], is_error=False)

    batch = Batch([call("tool-1", value="a")], [tool("echo", fail)], after_tool_call=after)
    assert seen == [(True, "boom", threading.get_ident())]
    assert (batch.ends()[0].is_error, batch.result[2].is_error, batch.result[2].content[0].text) == (
        False,
        False,
        "recovered",
    )


def test_a_raising_after_tool_call_fails_only_its_own_call() -> None:
    def after(ctx: Any, signal: Any) -> None:
        if ctx.tool_call.id == "tool-2":
            raise ValueError("hook broke")

    batch = Batch([call(f"tool-{n}", value="x") for n in (1, 2, 3)], [echo_tool()], after_tool_call=after)
    by_id = {m.tool_call_id: m for m in batch.result if m.role == "toolResult"}
    assert (by_id["tool-2"].is_error, by_id["tool-2"].content[0].text) == (True, "hook broke")
    assert by_id["tool-1"].is_error is False and by_id["tool-3"].is_error is False
    assert batch.stream_fn.calls == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "returned, type_name", [("a plain string", "str"), ({"content": []}, "dict"), (None, "NoneType")]
)
def test_a_tool_returning_something_else_than_a_tool_result_is_a_clear_error(
    mode: str, returned: Any, type_name: str
) -> None:
    batch = Batch([call("tool-1", value="a")], [tool("echo", lambda *a: returned)], tool_execution=mode)
    [end] = batch.ends()
    assert end.is_error is True
    assert end.result.content[0].text == f"Tool echo returned {type_name}, expected AgentToolResult"
    assert batch.stream_fn.calls == 2  # the run goes on


# the SystemExit goes on up its worker thread after being reported, as it should
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("timeout", [None, WAIT])
def test_a_worker_tool_raising_a_base_exception_is_an_error_not_a_hang(mode: str, timeout: Any) -> None:
    def leave(*args: Any) -> AgentToolResult:
        raise SystemExit("tool called sys.exit")

    batch = Batch(
        [call("tool-1", value="a"), call("tool-2", value="b")],
        [tool("echo", leave, timeout=timeout)],
        tool_execution=mode,
    )
    assert [(e.is_error, e.result.content[0].text) for e in batch.ends()] == [(True, "tool called sys.exit")] * 2
    assert batch.stream_fn.calls == 2


def test_a_base_exception_from_an_on_run_thread_tool_propagates() -> None:
    def interrupted(*args: Any) -> AgentToolResult:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Batch([call("tool-1", value="a")], [tool("echo", interrupted, on_run_thread=True)])


def test_a_tool_result_with_no_content_becomes_an_empty_list() -> None:
    batch = Batch([call("tool-1", value="a")], [tool("echo", lambda *a: AgentToolResult(None))])  # type: ignore[arg-type]
    assert batch.result[2].content == [] and batch.result[2].is_error is False


# =========================================================================== timeouts


class Stubborn:
    """A tool that ignores its signal and blocks until the test releases it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.signals: list[Any] = []
        self.threads: list[threading.Thread] = []
        self.captured: list[Any] = []
        self.returning = threading.Event()

    def execute(self, tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        self.signals.append(signal)
        self.threads.append(threading.current_thread())
        self.captured.append(on_update)
        self.started.set()
        self.release.wait(WAIT)
        on_update(text_result("too late"))
        self.returning.set()
        return text_result("finished after all")

    def finish(self) -> None:
        """Release the call and wait until it returns (its thread is a reused worker that
        stays alive, idle, afterwards: joining it would wait for its idle timeout)."""
        self.release.set()
        assert self.returning.wait(WAIT)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("where", ["tool", "config"])
def test_a_tool_past_its_timeout_is_reported_timed_out_and_left_running(mode: str, where: str) -> None:
    stubborn = Stubborn()
    tools = [
        tool("stubborn", stubborn.execute, timeout=0.05 if where == "tool" else None),
        tool("quick", lambda *a: text_result("quick done")),
    ]
    cfg = {"tool_timeout": 0.05} if where == "config" else {}
    before = abandoned_tool_threads()
    try:
        batch = Batch(
            [call("tool-1", "stubborn", value="a"), call("tool-2", "quick", value="b")],
            tools,
            tool_execution=mode,
            **cfg,
        )
        by_id = {e.tool_call_id: e for e in batch.ends()}
        assert by_id["tool-1"].is_error is True
        assert "timed out" in by_id["tool-1"].result.content[0].text
        assert (by_id["tool-2"].is_error, by_id["tool-2"].result.content[0].text) == (False, "quick done")
        assert stubborn.signals[0].aborted  # its own signal...
        assert not batch.controller.signal.aborted  # ...not the run's
        assert stubborn.threads[0].is_alive() and stubborn.threads[0].ident != threading.get_ident()
        assert abandoned_tool_threads() == before + 1
        assert batch.stream_fn.calls == 2 and batch.result[-1].text == "done"  # the run went on
        assert batch.result_ids == ["tool-1", "tool-2"]
        count = len(batch.events)
    finally:
        stubborn.finish()
    assert len(batch.events) == count  # its late update and result are dropped
    assert of_type(batch.events, "tool_execution_update") == []


def test_a_tool_within_its_timeout_is_not_abandoned() -> None:
    before = abandoned_tool_threads()
    batch = Batch([call("tool-1", value="a")], [echo_tool(timeout=WAIT)], tool_execution="sequential")
    assert [e.is_error for e in batch.ends()] == [False]
    assert abandoned_tool_threads() == before


_NEVER_RETURNING_TOOL_SCRIPT = """
import threading
from piagent import AgentContext, AgentTool, AgentToolResult, UserMessage, run_agent_loop
from tests.support.loop import ScriptedStream, assistant, call, config

forever = threading.Event()  # never set: the tool ignores its signal and never returns

def stuck(tool_call_id, args, signal, on_update):
    forever.wait()
    return AgentToolResult()

tool = AgentTool("stuck", "never returns", {"type": "object", "properties": {}}, stuck, timeout=0.05)
stream = ScriptedStream([assistant([call("a", "stuck"), call("b", "stuck")]), assistant("done")])
run_agent_loop([UserMessage("go")], AgentContext("", [], [tool]), config(), lambda event: None, None, stream)
print("finished")
"""


def test_a_timed_out_parallel_call_does_not_keep_the_interpreter_alive() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", _NEVER_RETURNING_TOOL_SCRIPT], cwd=root, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "finished"


def _settle_from(threads: int, job: Prepared) -> list[bool]:
    """``job.settle()`` from ``threads`` threads released at once; what each got."""
    start = threading.Barrier(threads)
    wins: list[bool] = []

    def settle() -> None:
        start.wait(WAIT)
        wins.append(job.settle())

    workers = [threading.Thread(target=settle) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(WAIT)
    return wins


def test_settling_a_call_is_one_locked_decision_across_threads() -> None:
    """The worker (the call returned) and the run thread (its deadline passed) may both try to
    settle a call at once: exactly one of them wins."""
    for _ in range(50):
        job = Prepared(0, call("tool-1"), echo_tool(), {})
        assert sorted(_settle_from(8, job)) == [False] * 7 + [True] and job.settled


def test_a_call_that_settled_as_its_deadline_passed_keeps_its_own_outcome() -> None:
    """The worker settled the call (its Done is queued) when the run thread sees the deadline
    pass: the call's real result wins, nothing is counted as abandoned."""
    events: list[Any] = []
    batch = BatchContext(
        AgentContext("", [], []), assistant([call("tool-1")]), config(), AbortController().signal, events.append
    )
    job = Prepared(0, call("tool-1"), echo_tool(), {}, timeout=0.01, deadline=time.monotonic() - 1)
    notes = Notifications()
    notes._settle(job, text_result("the real result"), False)  # what the worker does as the call returns
    before = abandoned_tool_threads()
    finished: dict[int, Any] = {}
    collect(batch, notes, {0: job}, finished)
    assert finished[0].result.content[0].text == "the real result" and finished[0].is_error is False
    assert abandoned_tool_threads() == before
    assert [event.type for event in events] == ["tool_execution_end"]


# --------------------------------------------------------------------------- bounds against a careless model


def test_calls_past_max_tool_calls_get_error_results_and_never_run() -> None:
    ran = Log()

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        ran.add(tid)
        return text_result("ok")

    calls = [call(f"tool-{n}", value="x") for n in range(1, 6)]
    batch = Batch(calls, [tool("echo", execute)], max_tool_calls=3)
    assert sorted(ran.items) == ["tool-1", "tool-2", "tool-3"]
    assert batch.result_ids == [f"tool-{n}" for n in range(1, 6)]
    assert [e.is_error for e in batch.ends()] == [False, False, False, True, True]
    assert text_of(batch.ends()[-1].result) == (
        'Tool call "echo" was not executed: the response made 5 tool calls, more than the 3 one response may '
        "make (max_tool_calls). Make fewer calls at once."
    )


def test_the_default_call_limit_answers_a_flood_of_calls_without_running_them_all() -> None:
    ran = Log()

    def execute(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        ran.add(tid)
        return text_result("ok")

    calls = [call(f"tool-{n}", value="x") for n in range(300)]
    batch = Batch(calls, [tool("echo", execute)])
    assert len(ran.items) == DEFAULT_MAX_TOOL_CALLS == 128
    assert len(batch.result_ids) == 300 and sum(e.is_error for e in batch.ends()) == 300 - 128


@pytest.mark.parametrize("timeout", [None, WAIT])
@pytest.mark.parametrize("mode", MODES)
def test_after_an_abort_a_call_that_ignores_it_is_abandoned_after_the_grace_period(mode: str, timeout: Any) -> None:
    started, release = threading.Event(), threading.Event()
    before = abandoned_tool_threads()

    def ignores_its_signal(tid: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        started.set()
        release.wait(WAIT)  # a tool that never looks at its signal
        return text_result("finished anyway")

    controller = AbortController()
    threading.Thread(target=lambda: started.wait(WAIT) and controller.abort()).start()
    try:
        # sequential calls run on a worker, like parallel ones, and can be abandoned
        batch = Batch(
            [call("tool-1", "slow", value="a"), call("tool-2", "slow", value="b")],
            [tool("slow", ignores_its_signal, timeout=timeout)],
            controller=controller,
            tool_execution=mode,
            abort_grace=0.2,
        )
    finally:
        release.set()
    ends = batch.ends()
    assert [(e.tool_call_id, e.is_error) for e in ends][0] == ("tool-1", True)
    assert text_of(ends[0].result) == "Tool slow was aborted: it did not stop within the abort grace period of 0.2 s"
    # parallel: both calls were running and both are abandoned; sequential: the second never starts
    assert abandoned_tool_threads() == before + (2 if mode == "parallel" else 1)
    assert all(e.is_error for e in ends) and "finished anyway" not in str([text_of(e.result) for e in ends])


def test_after_an_abort_a_call_on_the_run_thread_is_waited_for() -> None:
    stubborn = Stubborn()
    before = abandoned_tool_threads()

    def abort_then_release() -> None:
        stubborn.started.wait(WAIT)
        controller.abort()
        stubborn.release.set()  # with a grace of 0, a call that could be abandoned would be abandoned at once

    controller = AbortController()
    threading.Thread(target=abort_then_release).start()
    try:
        batch = Batch(
            [call("tool-1", "bound", value="a"), call("tool-2", "bound", value="b")],
            [tool("bound", stubborn.execute, on_run_thread=True)],
            controller=controller,
            abort_grace=0,
        )
    finally:
        stubborn.release.set()
    assert [(e.tool_call_id, e.is_error, text_of(e.result)) for e in batch.ends()] == [
        ("tool-1", False, "finished after all"),
        ("tool-2", True, "Operation aborted"),  # not run, still answered (pi 1.6)
    ]
    assert stubborn.threads == [threading.current_thread()]
    assert abandoned_tool_threads() == before


def test_the_default_abort_grace_is_one_second() -> None:
    assert DEFAULT_ABORT_GRACE == 1.0
