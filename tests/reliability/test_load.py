"""Load: a thousand turns in one run, sixteen threads feeding one agent, thirty-two agents at once.

The faux provider estimates usage by serialising the whole context on every call, which makes
a long run quadratic in the test double itself; the long runs here give the model a bounded
view (``transform_context`` keeps the last messages, as compaction would). The transcript in
``agent.state.messages`` still grows with every turn, which is what the memory check measures.
"""

from __future__ import annotations

import gc
import json
import threading
import tracemalloc
from collections import Counter
from typing import Any

import pytest

from piagent import Agent, AgentTool, AgentToolResult, UserMessage
from piagent.ai import Context, TextContent
from piagent.testing import faux_message, faux_tool_call
from tests.reliability.conftest import leftover_threads, threads_now

WAIT = 30.0
ECHO_SCHEMA = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}


def echo_tool() -> AgentTool:
    def execute(tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult([TextContent("echoed " + args["value"])])

    return AgentTool("echo", "Echo the value", ECHO_SCHEMA, execute)


def last_messages(messages: list[Any], signal: Any) -> list[Any]:
    return messages[-4:]


def transcript_bytes(messages: list[Any]) -> int:
    return len(json.dumps([m.to_dict() for m in messages]))


@pytest.mark.timeout(60)
def test_a_thousand_turn_run_grows_memory_only_with_its_transcript(faux):
    turns = 1000

    def respond(context: Context, options: Any, state: Any, model: Any) -> Any:
        state.requests.clear()  # the faux provider keeps every request for assertions; not here
        if state.call_count < turns:
            return faux_message([faux_tool_call("echo", {"value": f"v{state.call_count}"})])
        return faux_message("done")

    faux.set_responses([respond] * turns)
    agent = Agent(model=faux.get_model(), tools=[echo_tool()], transform_context=last_messages)
    marks: dict[int, tuple[int, int]] = {}
    ended = [0]

    def on_turn_end(event: Any) -> None:
        if event.type == "turn_end":
            ended[0] += 1
            if ended[0] in (200, turns):
                gc.collect()
                marks[ended[0]] = (tracemalloc.get_traced_memory()[0], transcript_bytes(agent.state.messages))

    agent.subscribe(on_turn_end)
    before = threads_now()
    tracemalloc.start()
    try:
        result = agent.prompt("go")
    finally:
        tracemalloc.stop()

    assert (result.text, ended[0], len(agent.state.messages)) == ("done", turns, 2 * turns)
    (memory_200, transcript_200), (memory_end, transcript_end) = marks[200], marks[turns]
    memory_growth, transcript_growth = memory_end - memory_200, transcript_end - transcript_200
    # measured on 3.9/3.11/3.13: the transcript's Python objects take 3.0-3.5x its JSON size;
    # keeping every event of the run as well measures 10-12x. Twice the baseline is the bound.
    assert memory_growth < 6 * transcript_growth, (memory_growth, transcript_growth)
    assert leftover_threads(before) == []  # tool calls ran on reused workers, now idle; nothing else is left


@pytest.mark.timeout(60)
def test_sixteen_threads_steering_and_following_up_are_each_delivered_once_in_order(faux):
    threads, per_thread = 16, 100
    producers_done = threading.Event()
    agent: Agent

    def respond(context: Context, options: Any, state: Any, model: Any) -> Any:
        state.requests.clear()
        # keep the run alive while producers are still feeding it
        while not producers_done.is_set() and not agent.has_queued_messages():
            producers_done.wait(0.002)
        return faux_message("ok")

    faux.set_responses([respond] * (threads * per_thread + 1))
    agent = Agent(model=faux.get_model(), transform_context=last_messages)
    start = threading.Barrier(threads + 1)

    def produce(index: int) -> None:
        send = agent.steer if index % 2 == 0 else agent.follow_up
        start.wait(WAIT)
        for k in range(per_thread):
            send(UserMessage(f"t{index}-{k}"))

    future = agent.prompt("go", wait=False)
    workers = [threading.Thread(target=produce, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    start.wait(WAIT)
    for worker in workers:
        worker.join(WAIT)
    producers_done.set()
    result = future.result(timeout=WAIT)

    assert result.stop_reason == "stop" and not agent.has_queued_messages()
    delivered = [m.content for m in agent.state.messages if m.role == "user"][1:]
    assert len(delivered) == threads * per_thread
    assert Counter(delivered) == Counter(f"t{i}-{k}" for i in range(threads) for k in range(per_thread))
    for i in range(threads):
        mine = [text for text in delivered if text.startswith(f"t{i}-")]
        assert mine == [f"t{i}-{k}" for k in range(per_thread)]  # per-thread FIFO
    # every injected message got its own model call (one-at-a-time), followed by its answer
    roles = [m.role for m in agent.state.messages]
    assert roles == ["user", "assistant"] * (threads * per_thread + 1)


@pytest.mark.timeout(60)
def test_thirty_two_agents_in_thirty_two_threads_keep_their_conversations_apart(faux):
    agents, prompts = 32, 5

    def respond(context: Context, options: Any, state: Any, model: Any) -> Any:
        state.requests.clear()
        last = context.messages[-1]
        if last.role == "user":  # call the tool with the prompt's text
            return faux_message([faux_tool_call("echo", {"value": last.content[0].text})])
        return faux_message("answer to " + last.content[0].text)

    faux.set_responses([respond] * (agents * prompts * 2))
    start = threading.Barrier(agents)
    transcripts: dict[int, list[str]] = {}
    failures: list[BaseException] = []
    before = threads_now()

    def converse(index: int) -> None:
        try:
            agent = Agent(model=faux.get_model(), tools=[echo_tool()])
            start.wait(WAIT)
            for k in range(prompts):
                agent.prompt(f"a{index}-p{k}")
            transcripts[index] = [
                m.content[0].text if m.role != "assistant" or m.text else "call" for m in agent.state.messages
            ]
        except BaseException as exc:  # reported below, never lost in a thread
            failures.append(exc)

    workers = [threading.Thread(target=converse, args=(i,)) for i in range(agents)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(WAIT)
    assert failures == []
    assert sorted(transcripts) == list(range(agents))
    for index, transcript in transcripts.items():
        expected: list[str] = []
        for k in range(prompts):
            text = f"a{index}-p{k}"
            expected += [text, "call", f"echoed {text}", f"answer to echoed {text}"]
        assert transcript == expected
    assert faux.state.call_count == agents * prompts * 2
    assert leftover_threads(before) == []
