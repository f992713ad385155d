"""Abort at every moment of a run, and Ctrl-C on the main thread.

Whatever is running when ``abort()`` comes (the HTTP connect, the stream, a parallel tool
batch, a hook, a listener), the run ends, the state is consistent, no thread is left behind
and the next prompt works. Cooperative tools stop as soon as they see the signal: the run
ends after the tools observed it, and well within a bound that cannot flake.
"""

from __future__ import annotations

import os
import select
import signal as signals
import threading
import time
from typing import Any, Callable, Optional

import pytest

from piagent import Agent, AgentTool, AgentToolResult, BeforeToolCallResult
from piagent.abort import AbortSignal
from piagent.ai import Context, StreamOptions, TextContent, UserMessage, stream
from piagent.testing import faux_message, faux_tool_call
from tests.reliability.conftest import leftover_threads, threads_now
from tests.reliability.wires import Wire
from tests.support.scripted_server import STALL, ScriptedServer, Wait

pytestmark = pytest.mark.timeout(20)

KEY = "sk-abort-0123456789abcdef"
WAIT = 5.0  # bound of every wait; never reached when the code is right
GENEROUS = 5.0  # bound on "the run ended promptly": the measured latency is ~1 ms
EMPTY = {"type": "object", "properties": {}}


def assert_settled(agent: Agent, stop_reason: str) -> None:
    state = agent.state
    assert state.is_streaming is False and agent.signal is None
    assert state.pending_tool_calls == frozenset() and state.streaming_message is None
    assert state.messages[-1].role == "assistant" and state.messages[-1].stop_reason == stop_reason


def real_agent(server: ScriptedServer, wire: Wire, **options: Any) -> Agent:
    return Agent(model=wire.model(server.url), get_api_key=lambda provider: KEY, max_retry_delay_ms=20, **options)


# --------------------------------------------------------------------------- the model call


def test_abort_while_the_server_holds_the_headers(server, wire):
    before = threads_now()
    agent = real_agent(server, wire)
    reply = server.reply(wire.text("never"), before_headers=STALL)
    future = agent.prompt("hi", wait=False)
    assert reply.received.wait(WAIT)
    agent.abort()
    result = future.result(timeout=WAIT)
    assert (result.stop_reason, result.error_message) == ("aborted", "Request was aborted")
    assert_settled(agent, "aborted")
    assert leftover_threads(before) == []  # the server still holds the headers
    server.reply(wire.text("Back."))
    assert agent.prompt("again").text == "Back."
    assert wire.history(server.requests[-1].json) == ["user:hi", "user:again"]


def test_abort_while_the_answer_streams_keeps_the_partial(server, wire):
    before = threads_now()
    agent = real_agent(server, wire)
    gate = threading.Event()
    server.reply(wire.head() + [Wait(gate)] + wire.tail())
    streamed = threading.Event()
    agent.subscribe(
        lambda e: e.type == "message_update" and e.assistant_message_event.type == "text_delta" and streamed.set()
    )
    future = agent.prompt("hi", wait=False)
    try:
        assert streamed.wait(WAIT)
        agent.abort()
        result = future.result(timeout=WAIT)
    finally:
        gate.set()
    assert (result.stop_reason, result.text) == ("aborted", "Hel")
    assert_settled(agent, "aborted")
    assert leftover_threads(before) == []
    server.reply(wire.text("Back."))
    assert agent.continue_().text == "Back."  # a retry of the aborted call
    assert wire.history(server.requests[-1].json) == ["user:hi"]


# --------------------------------------------------------------------------- tools, hooks, listeners


def cooperative_tool(name: str, observed: dict[str, float], started: threading.Barrier) -> AgentTool:
    """Waits for its signal, records when it saw it, then raises as a cancelled tool should."""

    def execute(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        started.wait(WAIT)
        if not signal.wait(WAIT):
            return AgentToolResult([TextContent("not aborted")])
        observed[name] = time.monotonic()
        signal.throw_if_aborted()
        return AgentToolResult([TextContent("unreachable")])

    return AgentTool(name, "waits for abort", EMPTY, execute)


def test_abort_during_a_parallel_tool_batch_ends_the_run_right_after_the_tools_stop(faux):
    before = threads_now()
    observed: dict[str, float] = {}
    started = threading.Barrier(4)  # three tools and the test
    tools = [cooperative_tool(name, observed, started) for name in ("a", "b", "c")]
    faux.set_responses([faux_message([faux_tool_call(t.name, {}) for t in tools]), faux_message("unused")])
    agent = Agent(model=faux.get_model(), tools=tools)
    ended: list[float] = []
    agent.subscribe(lambda e: e.type == "agent_end" and ended.append(time.monotonic()))
    future = agent.prompt("go", wait=False)
    started.wait(WAIT)
    agent.abort("stop now")
    result = future.result(timeout=WAIT)

    assert sorted(observed) == ["a", "b", "c"]
    latency = ended[0] - max(observed.values())
    assert 0 <= latency < GENEROUS  # ended after every tool saw the signal (measured: ~0.5 ms)
    assert result.stop_reason == "aborted"
    results = [m for m in agent.state.messages if m.role == "toolResult"]
    assert [(m.tool_name, m.is_error, m.content[0].text) for m in results] == [
        ("a", True, "stop now"),
        ("b", True, "stop now"),
        ("c", True, "stop now"),
    ]
    assert_settled(agent, "aborted")
    assert leftover_threads(before) == []
    faux.set_responses([faux_message("next")])
    assert agent.prompt("again").text == "next"


def test_abort_during_a_before_tool_call_hook(faux):
    in_hook = threading.Event()
    ran: list[str] = []

    def hook(context: Any, signal: AbortSignal) -> Optional[BeforeToolCallResult]:
        in_hook.set()
        signal.wait(WAIT)
        return None

    tool = AgentTool("t", "", EMPTY, lambda *a: ran.append("t") or AgentToolResult([TextContent("ran")]))
    faux.set_responses([faux_message([faux_tool_call("t", {})]), faux_message("unused")])
    agent = Agent(model=faux.get_model(), tools=[tool], before_tool_call=hook)
    future = agent.prompt("go", wait=False)
    assert in_hook.wait(WAIT)
    agent.abort()
    result = future.result(timeout=WAIT)
    assert ran == []  # aborted in preflight: the tool never runs
    tool_result = [m for m in agent.state.messages if m.role == "toolResult"][0]
    assert (tool_result.is_error, tool_result.content[0].text) == (True, "Operation aborted")
    assert result.stop_reason == "aborted"
    assert_settled(agent, "aborted")
    faux.set_responses([faux_message("next")])
    assert agent.prompt("again").text == "next"


def test_abort_during_a_transform_context_hook(faux):
    in_hook = threading.Event()

    def transform(messages: list[Any], signal: AbortSignal) -> list[Any]:
        in_hook.set()
        signal.wait(WAIT)
        return messages

    faux.set_responses([faux_message("unused")])
    agent = Agent(model=faux.get_model(), transform_context=transform)
    future = agent.prompt("go", wait=False)
    assert in_hook.wait(WAIT)
    agent.abort()
    assert future.result(timeout=WAIT).stop_reason == "aborted"
    assert_settled(agent, "aborted")
    agent.transform_context = None
    faux.set_responses([faux_message("next")])
    assert agent.prompt("again").text == "next"


def test_abort_during_a_listener(faux):
    in_listener = threading.Event()

    def listener(event: Any, signal: AbortSignal) -> None:
        if event.type == "message_end" and event.message.role == "assistant" and event.message.stop_reason == "toolUse":
            in_listener.set()
            signal.wait(WAIT)

    ran: list[str] = []
    tool = AgentTool("t", "", EMPTY, lambda *a: ran.append("t") or AgentToolResult([TextContent("ran")]))
    faux.set_responses([faux_message([faux_tool_call("t", {})]), faux_message("unused")])
    agent = Agent(model=faux.get_model(), tools=[tool])
    unsubscribe = agent.subscribe(listener)
    future = agent.prompt("go", wait=False)
    assert in_listener.wait(WAIT)
    agent.abort()
    result = future.result(timeout=WAIT)
    assert ran == [] and result.stop_reason == "aborted"
    assert_settled(agent, "aborted")
    unsubscribe()
    faux.set_responses([faux_message("next")])
    assert agent.prompt("again").text == "next"


# --------------------------------------------------------------------------- Ctrl-C


def interrupt_main_when(event: threading.Event) -> threading.Thread:
    """SIGINT aimed at the main thread once ``event`` is set, as a terminal's Ctrl-C arrives."""
    main = threading.main_thread().ident
    assert main is not None
    thread = threading.Thread(target=lambda: event.wait(WAIT) and signals.pthread_kill(main, signals.SIGINT))
    thread.start()
    return thread


needs_main_thread = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread() or not hasattr(signals, "pthread_kill"),
    reason="needs the main thread and signal.pthread_kill",
)


def prompt_interrupted(agent: Agent, text: str) -> bool:
    try:
        agent.prompt(text)
    except KeyboardInterrupt:
        return True
    return False


@needs_main_thread
def test_ctrl_c_that_lands_just_before_a_blocking_read_is_still_seen_at_once(server, wire):
    """The race, made deterministic: SIGINT is handled while the main thread sits in a read.

    With SIGINT blocked on the main thread, the kernel delivers it to another thread: Python
    notes it for the main thread, but the main thread's blocked read is not interrupted, just
    as when the signal lands a moment before the read starts. It must still end at once.
    """
    agent = real_agent(server, wire)
    gate, streamed = threading.Event(), threading.Event()
    server.reply(wire.head() + [Wait(gate, timeout=4 * GENEROUS)] + wire.tail())
    agent.subscribe(
        lambda e: e.type == "message_update" and e.assistant_message_event.type == "text_delta" and streamed.set()
    )
    # created before SIGINT is blocked on the main thread, so this thread can receive it
    kill = threading.Thread(target=lambda: streamed.wait(WAIT) and os.kill(os.getpid(), signals.SIGINT))
    kill.start()
    signals.pthread_sigmask(signals.SIG_BLOCK, {signals.SIGINT})
    started = time.monotonic()
    try:
        assert prompt_interrupted(agent, "hi")
        assert time.monotonic() - started < GENEROUS  # not when the server sends again
    finally:
        signals.pthread_sigmask(signals.SIG_UNBLOCK, {signals.SIGINT})
        kill.join(WAIT)
        gate.set()
    assert_settled(agent, "aborted")  # the read ended by the shut socket is seen as the abort it is
    assert agent.state.messages[-1].text == "Hel"
    server.reply(wire.text("Back."))
    assert agent.prompt("again").text == "Back."


@needs_main_thread
@pytest.mark.parametrize("attempt", range(3))  # the race it guards against showed in 1 run of 3
def test_ctrl_c_while_the_answer_streams_leaves_the_agent_usable(server, wire, attempt):
    before = threads_now()
    agent = real_agent(server, wire)
    gate, streamed = threading.Event(), threading.Event()
    server.reply(wire.head() + [Wait(gate, timeout=2 * GENEROUS)] + wire.tail())
    agent.subscribe(
        lambda e: e.type == "message_update" and e.assistant_message_event.type == "text_delta" and streamed.set()
    )
    interrupter = interrupt_main_when(streamed)
    started = time.monotonic()
    try:
        assert prompt_interrupted(agent, "hi")
        # seen at once, not when the server sends again (measured: ~1 ms)
        assert time.monotonic() - started < GENEROUS
    finally:
        interrupter.join(WAIT)
        gate.set()
    assert_settled(agent, "aborted")  # ended as abort() ends it, its partial kept (docs/loop.md#rule-22)
    assert [m.role for m in agent.state.messages] == ["user", "assistant"] and agent.state.messages[-1].text == "Hel"
    assert leftover_threads(before) == []
    server.reply(wire.text("Back."))
    assert agent.continue_().text == "Back."
    assert wire.history(server.requests[-1].json) == ["user:hi"]


@needs_main_thread
def test_ctrl_c_while_waiting_for_headers_leaves_the_agent_usable(server, wire):
    before = threads_now()
    agent = real_agent(server, wire)
    reply = server.reply(wire.text("never"), before_headers=STALL)
    interrupter = interrupt_main_when(reply.received)
    started = time.monotonic()
    try:
        assert prompt_interrupted(agent, "hi")
        assert time.monotonic() - started < GENEROUS  # the server holds for 30 s
    finally:
        interrupter.join(WAIT)
    assert agent.state.is_streaming is False and agent.signal is None
    assert leftover_threads(before) == []  # the request's helper thread ended although the server still holds
    server.reply(wire.text("Back."))
    assert agent.prompt("again").text == "Back."


@needs_main_thread
def test_a_wakeup_fd_installed_before_gets_every_signal_of_a_streamed_answer_and_is_installed_again(server, wire):
    """The Ctrl-C watch takes the wakeup fd while the answer streams (an asyncio loop's, say):
    every signal byte written meanwhile reaches the fd it replaced, which is back afterwards."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    handled: list[int] = []
    previous_handler = signals.signal(signals.SIGUSR1, lambda number, frame: handled.append(number))
    previous_fd = signals.set_wakeup_fd(write_end)
    try:
        agent = real_agent(server, wire)
        sent = []

        def signal_once(event: Any) -> None:
            if event.type == "message_update" and not sent:
                sent.append(event)
                os.kill(os.getpid(), signals.SIGUSR1)

        agent.subscribe(signal_once)
        for text in ("One.", "Two."):  # a second call too: the watch is made once and kept
            sent.clear()
            server.reply(wire.text(text))
            assert agent.prompt("hi").text == text
            assert select.select([read_end], [], [], WAIT)[0] == [read_end]
            assert os.read(read_end, 16) == bytes([signals.SIGUSR1])
        assert signals.set_wakeup_fd(previous_fd) == write_end  # ours again, then the test's own
        assert handled == [signals.SIGUSR1, signals.SIGUSR1]
    finally:
        signals.set_wakeup_fd(previous_fd)
        signals.signal(signals.SIGUSR1, previous_handler)
        os.close(read_end)
        os.close(write_end)


def first_text_delta(events: Any) -> None:
    for event in events:
        if event.type == "text_delta":
            return


@needs_main_thread
def test_ctrl_c_is_seen_at_once_while_the_main_thread_reads_one_of_two_open_streams(server, wire):
    """Two pull-mode streams open on the main thread, read in turn: a Ctrl-C that lands while
    it waits on the first one opened still cuts that read at once (not only the latest's)."""
    gate = threading.Event()
    for _ in range(2):
        server.reply(wire.head() + [Wait(gate, timeout=4 * GENEROUS)] + wire.tail())
    context = Context("", [UserMessage("hi")])
    first = stream(wire.model(server.url), context, StreamOptions(api_key=KEY))
    second = stream(wire.model(server.url), context, StreamOptions(api_key=KEY))
    reading = threading.Event()
    kill = threading.Thread(target=lambda: reading.wait(WAIT) and os.kill(os.getpid(), signals.SIGINT))
    kill.start()
    signals.pthread_sigmask(signals.SIG_BLOCK, {signals.SIGINT})  # as in the test above: the read is not woken
    try:
        first_text_delta(first)
        first_text_delta(second)
        started = time.monotonic()
        reading.set()
        with pytest.raises(KeyboardInterrupt):
            for _ in first:
                pass
        assert time.monotonic() - started < GENEROUS  # not when the server sends again
    finally:
        signals.pthread_sigmask(signals.SIG_UNBLOCK, {signals.SIGINT})
        kill.join(WAIT)
        gate.set()
        first.close()
        second.close()


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def in_child(child: Callable[[], int]) -> int:
    """Fork; the child runs ``child`` and exits with its status (3 if it raised); the parent waits."""
    pid = os.fork()
    if pid == 0:
        status = 3
        try:
            status = child()
        finally:
            os._exit(status)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@needs_main_thread
@needs_fork
def test_a_child_forked_while_an_answer_streams_keeps_its_signals_to_itself(server, wire):
    """A process forked while the main thread reads an answer shares the watch's pipe: a SIGINT
    the child alone receives must not cut the parent's answer."""

    def child() -> int:
        signals.signal(signals.SIGINT, lambda number, frame: None)  # handled by Python: a wakeup byte
        os.kill(os.getpid(), signals.SIGINT)
        return 0

    agent = real_agent(server, wire)
    gate = threading.Event()
    server.reply(wire.head() + [Wait(gate)] + wire.tail())
    statuses: list[int] = []

    def fork_once(event: Any) -> None:
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta" and not statuses:
            statuses.append(in_child(child))
            gate.set()

    agent.subscribe(fork_once)
    try:
        result = agent.prompt("hi")
    finally:
        gate.set()
    assert statuses == [0]
    assert (result.stop_reason, result.text) == ("stop", "Hello")


@needs_main_thread
@needs_fork
def test_a_child_forked_after_an_answer_sees_ctrl_c_at_once_in_its_own_answers(server, wire):
    """The watch's thread is the parent's: a forked child gets one of its own for its answers."""
    server.reply(wire.text("One."))
    assert real_agent(server, wire).prompt("hi").text == "One."  # the watch is made in the parent
    gate = threading.Event()
    server.reply(wire.head() + [Wait(gate, timeout=2 * GENEROUS)] + wire.tail())

    def child() -> int:
        agent = real_agent(server, wire)
        streamed = threading.Event()
        agent.subscribe(
            lambda e: e.type == "message_update" and e.assistant_message_event.type == "text_delta" and streamed.set()
        )
        kill = threading.Thread(target=lambda: streamed.wait(WAIT) and os.kill(os.getpid(), signals.SIGINT))
        kill.start()
        signals.pthread_sigmask(signals.SIG_BLOCK, {signals.SIGINT})  # as above: the read is not woken
        started = time.monotonic()
        interrupted = prompt_interrupted(agent, "hi")
        return 0 if interrupted and time.monotonic() - started < GENEROUS else 1

    try:
        status = in_child(child)
    finally:
        gate.set()
    assert status == 0


@needs_main_thread
def test_ctrl_c_during_a_tool_batch_ends_the_run_as_an_abort_does(server, wire):
    before = threads_now()
    started, finished = threading.Event(), threading.Event()
    stopped: list[bool] = []

    def slow(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        started.set()
        stopped.append(signal.wait(WAIT))
        finished.set()
        return AgentToolResult([TextContent("late")])

    agent = real_agent(server, wire, tools=[AgentTool("echo", "", EMPTY, slow)])
    server.reply(wire.tool_call("call_1", "echo", {}))
    interrupter = interrupt_main_when(started)
    try:
        assert prompt_interrupted(agent, "hi")
    finally:
        interrupter.join(WAIT)
    assert_settled(agent, "aborted")
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "toolResult", "assistant"]
    result = agent.state.messages[2]
    assert (result.is_error, result.content[0].text) == (False, "late")  # the tool saw the abort and chose its result
    assert leftover_threads(before) == []
    assert finished.wait(WAIT) and stopped == [True]  # the tool saw the abort and ended
    server.reply(wire.text("Back."))
    assert agent.prompt("again").text == "Back."
    assert wire.history(server.requests[-1].json) == ["user:hi", "call:echo", "result:late", "user:again"]
