"""The Agent's thread contract (docs/architecture.md#the-thread-contract): many threads,
re-entrant listeners, Ctrl-C, asyncio."""

from __future__ import annotations

import asyncio
import queue
import signal as signals
import threading
from collections import defaultdict
from typing import Any

import pytest

import piagent.agent as agent_module
from piagent import AbortSignal, Agent, AgentBusyError, AgentTool, AgentToolResult, AssistantMessage, TextContent
from piagent.testing import faux_message, faux_tool_call
from tests.support.agent_support import WAIT, ContendedLock, GatedStream, echo_tool, roles, text_of
from tests.support.loop import MODEL

EMPTY_SCHEMA = {"type": "object", "properties": {}}


def test_eight_threads_steering_fifty_messages_each_are_delivered_once_in_order(faux) -> None:
    threads_count, per_thread = 8, 50
    total = threads_count * per_thread
    # the model sees only the last two messages, so the faux provider's cost stays flat
    agent = Agent(model=faux.get_model(), tool_execution="sequential", convert_to_llm=lambda messages: messages[-2:])
    queue = agent.steering_queue
    delivered: list[str] = []
    agent.subscribe(
        lambda event: (
            delivered.append(text_of(event.message))
            if event.type == "message_end" and event.message.role == "user"
            else None
        )
    )

    def keep_going(context: Any, options: Any, state: Any, model: Any) -> AssistantMessage:
        if len(delivered) - 1 < total:  # the prompt is not a steering message
            return faux_message([faux_tool_call("wait_for_steering", {})])
        return faux_message("all delivered")

    def wait_for_steering(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        # Some message is not delivered yet, so one is queued or about to be: wait for a put().
        with queue.not_empty:
            assert queue.not_empty.wait_for(lambda: len(queue.queue) > 0, WAIT)
        return AgentToolResult([TextContent("more steering is queued")])

    agent.tools = [AgentTool("wait_for_steering", "", EMPTY_SCHEMA, wait_for_steering)]
    faux.set_responses([keep_going] * (total + 1))
    start = threading.Barrier(threads_count, timeout=WAIT)

    def producer(thread_index: int) -> None:
        start.wait()
        for n in range(per_thread):
            agent.steer(f"t{thread_index}-{n}")

    future = agent.prompt("collect the steering", wait=False)
    producers = [threading.Thread(target=producer, args=(i,)) for i in range(threads_count)]
    for thread in producers:
        thread.start()
    result = future.result(WAIT * 4)
    for thread in producers:
        thread.join(WAIT)

    assert delivered == [text_of(m) for m in result.messages if m.role == "user"]
    delivered = delivered[1:]
    assert result.text == "all delivered"
    assert len(delivered) == total and len(set(delivered)) == total  # each exactly once
    per_producer: dict[str, list[int]] = defaultdict(list)
    for text in delivered:
        producer_id, n = text.split("-")
        per_producer[producer_id].append(int(n))
    assert all(order == list(range(per_thread)) for order in per_producer.values())  # each thread's FIFO
    assert len(per_producer) == threads_count
    assert not agent.has_queued_messages()


def test_a_listener_may_steer_and_abort_while_prompt_raises_busy(faux) -> None:
    faux.set_responses([faux_message("a long answer " * 20), faux_message("answered the steering")])
    agent = Agent(model=faux.get_model())
    errors: list[BaseException] = []

    def listener(event: Any) -> None:
        if event.type == "message_update" and not errors:
            agent.steer("steered from a listener")
            try:
                agent.prompt("nested")
            except AgentBusyError as exc:
                errors.append(exc)
            try:
                agent.continue_()
            except AgentBusyError as exc:
                errors.append(exc)
            agent.abort()

    unsubscribe = agent.subscribe(listener)
    result = agent.prompt("go")
    assert [type(e) for e in errors] == [AgentBusyError, AgentBusyError]
    assert result.stop_reason == "aborted"
    assert agent.has_queued_messages()  # an aborted turn does not poll the queues
    unsubscribe()
    faux.set_responses([faux_message("answered the steering")])
    second = agent.prompt("again")
    assert [text_of(m) for m in second.messages if m.role == "user"] == ["again", "steered from a listener"]


def test_prompt_from_another_thread_during_a_run_raises_busy(faux) -> None:
    faux.set_responses([faux_message([faux_tool_call("gate", {})]), faux_message("done")])
    inside, release = threading.Event(), threading.Event()

    def gate(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        inside.set()
        release.wait(WAIT)
        return AgentToolResult([TextContent("through")])

    agent = Agent(model=faux.get_model(), tools=[AgentTool("gate", "", EMPTY_SCHEMA, gate)])
    runner = threading.Thread(target=agent.prompt, args=("first",))
    runner.start()
    assert inside.wait(WAIT)
    outcomes: list[Any] = []
    contenders = [threading.Thread(target=lambda: outcomes.append(_try_prompt(agent))) for _ in range(4)]
    for thread in contenders:
        thread.start()
    for thread in contenders:
        thread.join(WAIT)
    release.set()
    runner.join(WAIT)
    assert outcomes == [AgentBusyError] * 4
    assert roles(agent.state.messages) == ["user", "assistant", "toolResult", "assistant"]


def _try_prompt(agent: Agent) -> Any:
    try:
        agent.prompt("contender")
    except AgentBusyError:
        return AgentBusyError
    return "ran"


def test_two_agents_run_at_once_on_two_threads(faux) -> None:
    faux.set_responses([faux_message("from one"), faux_message("from two")])
    both_streaming = threading.Barrier(2, timeout=WAIT)
    listener_threads: dict[str, set] = defaultdict(set)
    results: dict[str, Any] = {}

    def make_agent(name: str) -> Agent:
        agent = Agent(model=faux.get_model())
        met = []

        def listener(event: Any) -> None:
            listener_threads[name].add(threading.get_ident())
            if event.type == "message_update" and not met:
                met.append(both_streaming.wait())  # only passes while the other run is streaming too

        agent.subscribe(listener)
        return agent

    agents = {"one": make_agent("one"), "two": make_agent("two")}
    caller_threads: dict[str, int] = {}

    def run(name: str) -> None:
        caller_threads[name] = threading.get_ident()
        results[name] = agents[name].prompt(f"hello {name}")

    threads = [threading.Thread(target=run, args=(name,)) for name in agents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert not both_streaming.broken
    assert sorted(r.text for r in results.values()) == ["from one", "from two"]
    for name in agents:
        assert listener_threads[name] == {caller_threads[name]}  # listeners run on the run thread
        assert roles(agents[name].state.messages) == ["user", "assistant"]


def test_prompt_from_inside_a_running_event_loop_works_unchanged(faux) -> None:
    faux.set_responses(
        [
            faux_message([faux_tool_call("echo", {"value": "a"}), faux_tool_call("echo", {"value": "b"})]),
            faux_message("done in a cell"),
            faux_message("awaited"),
        ]
    )
    agent = Agent(model=faux.get_model(), tools=[echo_tool()])

    async def jupyter_cell() -> Any:
        assert asyncio.get_running_loop() is not None
        first = agent.prompt("run in a cell")  # blocks this coroutine's thread; no loop is used
        second = await asyncio.wrap_future(agent.prompt("and without waiting", wait=False))
        return first, second

    first, second = asyncio.run(jupyter_cell())
    assert first.text == "done in a cell" and second.text == "awaited"
    assert [m.text for m in first.messages if m.role == "toolResult"] == ["echoed: a", "echoed: b"]


def test_keyboard_interrupt_from_a_listener_aborts_the_run_and_leaves_the_agent_usable(faux) -> None:
    faux.set_responses([faux_message([faux_tool_call("echo", {"value": "x"})]), faux_message("unused")])
    agent = Agent(model=faux.get_model(), tools=[echo_tool()])
    signals_seen: list[AbortSignal] = []

    def interrupt(event: Any, signal: AbortSignal) -> None:
        if event.type == "tool_execution_start":
            signals_seen.append(signal)
            raise KeyboardInterrupt

    unsubscribe = agent.subscribe(interrupt)
    with pytest.raises(KeyboardInterrupt):
        agent.prompt("go")
    assert signals_seen[0].aborted
    assert agent.state.is_streaming is False and agent.signal is None
    assert agent.state.pending_tool_calls == frozenset() and agent.state.streaming_message is None
    assert agent.wait_for_idle(timeout=0) is True
    unsubscribe()
    faux.set_responses([faux_message("usable again")])
    assert agent.prompt("next").text == "usable again"


def test_a_keyboard_interrupt_from_a_listener_ends_the_run_as_an_abort_then_propagates(faux) -> None:
    """docs/loop.md#rule-22: the streaming message ends aborted with its partial text, every
    listener gets the rest of the run's events, then ``prompt()`` raises the KeyboardInterrupt."""
    faux.set_responses([faux_message("Once upon a time " * 20)])
    agent = Agent(model=faux.get_model())
    raised_on: list[str] = []
    seen: list[str] = []
    ended: list[Any] = []

    def interrupt(event: Any) -> None:
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta" and not raised_on:
            raised_on.append(event.message.text)
            raise KeyboardInterrupt

    def record(event: Any) -> None:
        seen.append(event.type)
        if event.type == "message_end" and event.message.role == "assistant":
            ended.append(event.message)

    agent.subscribe(interrupt)
    agent.subscribe(record)
    with pytest.raises(KeyboardInterrupt):
        agent.prompt("story")
    assert [t for t in seen if t != "message_update"] == [
        *("agent_start", "turn_start", "message_start", "message_end"),
        *("message_start", "message_end", "turn_end", "agent_end"),
    ]
    assert seen.count("message_update") >= 2  # the event raised on reached the next listener too
    assert [(m.stop_reason, m.text) for m in ended] == [("aborted", raised_on[0])]
    assert agent.state.messages[-1] is ended[0] and agent.state.error_message == "Request was aborted"
    assert agent.state.is_streaming is False and agent.signal is None


def test_a_run_on_the_main_thread_takes_over_pythons_sigint_handler_only_and_puts_it_back(faux) -> None:
    """docs/loop.md#rule-22: Ctrl-C aborts the run through a handler installed for the run, over
    Python's own; a program's own handler stays installed and decides."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("needs the main thread")
    agent = Agent(model=faux.get_model())
    during: list[object] = []
    agent.subscribe(lambda event: event.type == "agent_start" and during.append(signals.getsignal(signals.SIGINT)))

    def own(number: int, frame: Any) -> None:
        pass

    previous = signals.signal(signals.SIGINT, signals.default_int_handler)
    try:
        for handler in (signals.default_int_handler, own):
            signals.signal(signals.SIGINT, handler)
            faux.set_responses([faux_message("done")])
            assert agent.prompt("go").text == "done"
            assert signals.getsignal(signals.SIGINT) is handler
    finally:
        signals.signal(signals.SIGINT, previous)
    assert during[0] is not signals.default_int_handler and callable(during[0])
    assert during[1] is own


@pytest.mark.parametrize("tool_execution", ["sequential", "parallel"])
def test_ctrl_c_on_the_main_thread_during_prompt_aborts_and_reraises(faux, tool_execution: str) -> None:
    if threading.current_thread() is not threading.main_thread() or not hasattr(signals, "pthread_kill"):
        pytest.skip("needs the main thread and signal.pthread_kill")
    started, saw_abort = threading.Event(), threading.Event()

    def waits_for_abort(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        started.set()
        # Short waits keep the main thread interruptible (on it, a SIGINT landing just before a
        # blocking wait is seen only when the wait ends); they are bounded by WAIT in total.
        for _ in range(int(WAIT / 0.05)):
            if signal.wait(0.05):
                saw_abort.set()
                break
        return AgentToolResult([TextContent("stopped")])

    faux.set_responses([faux_message([faux_tool_call("wait", {})]), faux_message("unused")])
    agent = Agent(
        model=faux.get_model(),
        tools=[AgentTool("wait", "", EMPTY_SCHEMA, waits_for_abort)],
        tool_execution=tool_execution,
    )
    main = threading.main_thread().ident
    # SIGINT aimed at the main thread, as a terminal's Ctrl-C reaches a Python program
    interrupter = threading.Thread(target=lambda: started.wait(WAIT) and signals.pthread_kill(main, signals.SIGINT))
    interrupter.start()
    with pytest.raises(KeyboardInterrupt):
        agent.prompt("go")
    interrupter.join(WAIT)
    assert agent.state.is_streaming is False and agent.signal is None
    if tool_execution == "parallel":
        assert saw_abort.wait(WAIT)  # the tool on its worker thread was told
    faux.set_responses([faux_message("usable again")])
    assert agent.prompt("next").text == "usable again"


def test_tool_threads_may_steer_and_abort(faux) -> None:
    faux.set_responses([faux_message([faux_tool_call("echo", {"value": "x"})]), faux_message("never")])
    agent: Agent

    def steer_then_abort(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> None:
        agent.steer("from a tool")
        agent.abort()

    agent = Agent(model=faux.get_model(), tools=[echo_tool(before=steer_then_abort)])
    result = agent.prompt("go")
    # the batch finishes, the steering message is injected, and the next model call is aborted
    assert [text_of(m) for m in result.messages if m.role == "user"] == ["go", "from a tool"]
    assert result.stop_reason == "aborted"


def test_ctrl_c_while_the_run_thread_starts_never_leaves_a_running_run_looking_idle(faux, monkeypatch) -> None:
    """A SIGINT reaching the main thread inside ``Thread.start()`` (the run thread already made)
    is raised once the thread has started: the run goes on, busy, until it is aborted."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signals, "pthread_kill"):
        pytest.skip("needs the main thread and signal.pthread_kill")
    release = threading.Event()

    def holds(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        signal.wait(WAIT)
        release.set()
        return AgentToolResult([TextContent("stopped")])

    faux.set_responses([faux_message([faux_tool_call("hold", {})]), faux_message("unused")])
    agent = Agent(model=faux.get_model(), tools=[AgentTool("hold", "", EMPTY_SCHEMA, holds)])
    start = threading.Thread.start

    def start_then_ctrl_c(thread: threading.Thread) -> None:
        start(thread)
        if thread.name == "piagent-run":  # the signal lands at the end of start(), the run thread made
            signals.pthread_kill(threading.main_thread().ident, signals.SIGINT)  # type: ignore[arg-type]

    monkeypatch.setattr(threading.Thread, "start", start_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        agent.prompt("go", wait=False)
    monkeypatch.undo()
    assert agent.state.is_streaming is True  # still the run's: not settled under it
    with pytest.raises(AgentBusyError):
        agent.prompt("again")
    agent.abort("Interrupted")
    assert release.wait(WAIT) and agent.wait_for_idle(WAIT)
    faux.set_responses([faux_message("usable again")])
    assert agent.prompt("next").text == "usable again"


def test_two_threads_making_the_steering_queue_at_once_share_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The queues are made at their first use (docs/architecture.md#memory): a second thread
    steering while the first one is making the queue waits for it and puts on the same queue."""
    agent = Agent()
    real_queue = agent_module.MessageQueue
    lock = ContendedLock(agent_module._QUEUES_LOCK, lambda: threading.current_thread() is second)

    def second_steer() -> None:
        agent.steer("second")
        lock.contended.set()  # done without waiting for the lock

    second = threading.Thread(target=second_steer)
    made: list[object] = []

    class QueueMadeWhileAnotherSteers(real_queue):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            made.append(self)
            if len(made) == 1:
                second.start()
                # an agent that makes its queue under its lock holds the second steer back there;
                # one that does not lets it make a queue of its own
                assert lock.contended.wait(WAIT)
            super().__init__()

    monkeypatch.setattr(agent_module, "MessageQueue", QueueMadeWhileAnotherSteers)
    monkeypatch.setattr(agent_module, "_QUEUES_LOCK", lock)
    agent.steer("first")
    second.join(WAIT)
    assert [text_of(m) for m in agent.steering_queue.drain()] in (["first", "second"], ["second", "first"])
    assert len(made) == 1 and agent.steering_queue is made[0]
    assert isinstance(agent.follow_up_queue, queue.Queue) and agent.follow_up_queue is agent.follow_up_queue


def test_a_run_settling_while_wait_for_idle_makes_its_event_wakes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """wait_for_idle() makes its Event only during a run (docs/architecture.md#memory): a run that
    settles while the Event is being made (it is let go there) still wakes the waiter."""
    stream = GatedStream()
    agent = Agent(model=MODEL, stream_fn=stream)
    future = agent.prompt("hi", wait=False)
    assert stream.started.wait(WAIT)
    waiter, real_event = threading.current_thread(), threading.Event
    lock = ContendedLock(agent._lock, lambda: threading.current_thread() is not waiter)
    future.add_done_callback(lambda _: lock.contended.set())
    calls: list[None] = []

    def event_while_settling() -> threading.Event:
        if threading.current_thread() is waiter and not calls:
            calls.append(None)
            stream.release.set()
            # an agent that makes the Event under its lock holds the run back there; one that
            # does not lets it settle first, and the Event made afterwards is never set
            assert lock.contended.wait(WAIT)
        return real_event()

    monkeypatch.setattr(agent, "_lock", lock)
    monkeypatch.setattr(agent_module.threading, "Event", event_while_settling)
    assert agent.wait_for_idle(WAIT) is True
    assert calls and future.result(WAIT).text == "released"


def test_a_session_whose_begin_run_reaches_the_queues_does_not_hang_the_run() -> None:
    """A session's begin_run() runs under the agent's lock; the queues it may make there have a lock of their own."""

    class QueueingSession:  # duck-typed: what an agent asks of a session, and a begin_run() that queues
        def attach(self, agent: Agent, **given: Any) -> None:
            self.agent = agent

        def begin_run(self) -> Any:
            self.agent.follow_up("left by another writer")
            return lambda: None

    stream = GatedStream()
    stream.release.set()
    agent = Agent(model=MODEL, stream_fn=stream, session=QueueingSession())
    future = agent.prompt("hi", wait=False)
    assert [text_of(m) for m in future.result(WAIT).messages if m.role == "user"][:1] == ["hi"]
