"""The fault matrix through the ``Agent``: every fault ends the run as a readable message in the
transcript, loses nothing, and leaves the same agent ready for ``continue_()`` and the next prompt.

Each case runs over all four provider APIs against a real server on 127.0.0.1. The agent first
holds a tool conversation (so the history has a call and its result), then the fault hits the
next prompt; ``continue_()`` retries, and the request it sends must be the clean history: the
failed message is left out and every tool call still has its result (docs/llm.md#history-normalisation).
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable

import pytest

from piagent import Agent, AgentTool, AgentToolResult
from piagent.ai import TextContent
from tests.reliability.conftest import leftover_threads, threads_now
from tests.reliability.wires import Wire
from tests.support.scripted_server import RESET, STALL, ScriptedServer, Wait

pytestmark = pytest.mark.timeout(20)

KEY = "sk-agent-faults-0123456789abcdef"
JSON = {"Content-Type": "application/json"}


def echo_tool() -> AgentTool:
    def execute(tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult([TextContent(f"echo {args['text']}")])

    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return AgentTool("echo", "Echo the text back", schema, execute)


def make_agent(server: ScriptedServer, wire: Wire, timeout_ms: int = 5000) -> Agent:
    return Agent(
        model=wire.model(server.url),
        tools=[echo_tool()],
        get_api_key=lambda provider: KEY,
        max_retry_delay_ms=20,
        timeout_ms=timeout_ms,
    )


def first_exchange(server: ScriptedServer, wire: Wire, agent: Agent) -> list[Any]:
    server.reply(wire.tool_call("call_1", "echo", {"text": "one"}))
    server.reply(wire.text("Done."))
    result = agent.prompt("first")
    assert result.text == "Done." and result.stop_reason == "stop"
    return list(agent.state.messages)


HISTORY = ["user:first", "call:echo", "result:echo one", "assistant:Done."]


Script = Callable[[ScriptedServer, Wire, threading.Event], None]


@dataclasses.dataclass
class Fault:
    """``script(server, wire, streamed)`` queues the faulty replies; ``streamed`` is set once the
    agent has seen the partial content (a reset sent earlier could overtake unread data)."""

    name: str
    script: Script
    message: Callable[[str], bool]  # the error message the transcript must carry
    partial: str = ""  # text kept in the error message
    timeout_ms: int = 5000


def _times(n: int, status: int, **headers: str) -> Script:
    def script(server: ScriptedServer, wire: Wire, streamed: threading.Event) -> None:
        for _ in range(n):
            server.reply(
                [wire.error_body(status, "Slow down" if status == 429 else "Upstream trouble")],
                status,
                headers={**JSON, **headers},
            )

    return script


FAULTS = [
    Fault("429 exhausting the retries", _times(3, 429), lambda m: m == "HTTP 429: Slow down"),
    Fault(
        "429 asking to wait beyond max_retry_delay_ms",
        _times(1, 429, **{"Retry-After": "30"}),
        lambda m: m.startswith("HTTP 429: Slow down (the server asked to retry after 30s"),
    ),
    Fault("500 exhausting the retries", _times(3, 500), lambda m: m == "HTTP 500: Upstream trouble"),
    Fault("502 exhausting the retries", _times(3, 502), lambda m: m == "HTTP 502: Upstream trouble"),
    Fault("503 exhausting the retries", _times(3, 503), lambda m: m == "HTTP 503: Upstream trouble"),
    Fault(
        "reset before headers, every try",
        lambda s, w, e: [s.reply([], before_headers=RESET) for _ in range(3)],
        lambda m: m == "Connection error: [Errno 104] Connection reset by peer",
    ),
    Fault(
        "reset mid-stream",
        lambda s, w, e: s.reply(w.head() + [Wait(e), RESET]),
        lambda m: m == "Connection lost while streaming the response: [Errno 104] Connection reset by peer",
        "Hel",
    ),
    Fault(
        "server stops sending mid-stream",
        lambda s, w, e: s.reply(w.head() + [STALL]),
        lambda m: m == "Read timed out: the server stopped sending data (no stream event for 0.2 s)",
        "Hel",
        timeout_ms=200,
    ),
    Fault(
        "server never sends headers",
        lambda s, w, e: s.reply([], before_headers=STALL),
        lambda m: m == "Read timed out: the server stopped sending data",
        timeout_ms=200,
    ),
    Fault(
        "invalid JSON chunk",
        lambda s, w, e: s.reply(w.head() + [b"data: {oops\n\n"]),
        lambda m: m.startswith("Invalid JSON in stream event"),
        "Hel",
    ),
    Fault("empty 200 body", lambda s, w, e: s.reply([]), lambda m: m.startswith("The stream ended before")),
    Fault(
        "truncated before the terminal event",
        lambda s, w, e: s.reply(w.head()),
        lambda m: m.startswith("The stream ended before"),
        "Hel",
    ),
    Fault(
        "reset while a tool call streams",
        lambda s, w, e: s.reply(w.call_head() + [Wait(e), RESET]),
        lambda m: m.startswith("Connection lost while streaming the response"),
    ),
]


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
def test_a_fault_ends_the_run_in_the_transcript_and_the_agent_retries_and_goes_on(server, wire, fault):
    before_threads = threads_now()
    agent = make_agent(server, wire, fault.timeout_ms)
    history = first_exchange(server, wire, agent)

    streamed = threading.Event()
    agent.subscribe(
        lambda event: (
            event.type == "message_update"
            and event.assistant_message_event.type in ("text_delta", "toolcall_start")
            and streamed.set()
        )
    )
    fault.script(server, wire, streamed)
    failed = agent.prompt("second")
    assert failed.stop_reason == "error" and fault.message(failed.error_message), failed.error_message
    messages = agent.state.messages
    assert messages[: len(history)] == history and all(a is b for a, b in zip(messages, history))  # nothing lost
    assert [m.role for m in messages[len(history) :]] == ["user", "assistant"]
    error = messages[-1]
    assert (error.stop_reason, error.error_message, error.text) == ("error", failed.error_message, fault.partial)
    if "tool call" in fault.name:  # the half-streamed call is kept in the failed message, never run
        assert [(b.type, b.name) for b in error.content] == [("toolCall", "echo")]
    assert agent.state.error_message == failed.error_message
    assert agent.state.is_streaming is False and agent.state.pending_tool_calls == frozenset()

    sent = len(server.requests)
    server.reply(wire.text("Recovered."))
    retried = agent.continue_()
    assert retried.text == "Recovered." and retried.stop_reason == "stop"
    # the retry sends the clean history: the failed answer is left out, every call has its result
    assert wire.history(server.requests[sent].json) == HISTORY + ["user:second"]

    server.reply(wire.text("Third."))
    assert agent.prompt("third").text == "Third."
    assert wire.history(server.requests[-1].json) == HISTORY + ["user:second", "assistant:Recovered.", "user:third"]
    assert agent.state.error_message is None
    assert leftover_threads(before_threads) == []


def test_malformed_sse_lines_do_not_disturb_a_run(server, wire):
    agent = make_agent(server, wire)
    server.reply([b"not an SSE field\n", b"data\n", b": comment\n\n"] + wire.text("Fine."))
    result = agent.prompt("hi")
    assert (result.text, result.stop_reason) == ("Fine.", "stop")


def test_429_then_success_is_invisible_in_the_transcript(server, wire):
    agent = make_agent(server, wire)
    server.reply([wire.error_body(429, "Slow down")], 429, headers={**JSON, "Retry-After": "0"})
    server.reply([wire.error_body(503, "Busy")], 503, headers=JSON)
    server.reply(wire.text("Fine."))
    result = agent.prompt("hi")
    assert (result.text, result.stop_reason) == ("Fine.", "stop")
    assert [m.role for m in agent.state.messages] == ["user", "assistant"] and len(server.requests) == 3


def test_the_low_level_loop_also_continues_from_a_failed_answer_but_not_a_finished_one(server, wire):
    from piagent import AgentContext, AgentLoopConfig, AssistantMessage, UserMessage, run_agent_loop_continue

    config = AgentLoopConfig(model=wire.model(server.url), api_key=KEY)
    failed = AssistantMessage([TextContent("Hel")], stop_reason="error", error_message="Connection lost")
    server.reply(wire.text("Recovered."))
    context = AgentContext("", [UserMessage("hi"), failed])
    new = run_agent_loop_continue(context, config, lambda event: None)
    assert [m.text for m in new] == ["Recovered."] and context.messages[-1] is failed
    assert wire.history(server.requests[0].json) == ["user:hi"]
    finished = AssistantMessage([TextContent("Hello")], stop_reason="stop")
    with pytest.raises(ValueError, match="^Cannot continue from message role: assistant$"):
        run_agent_loop_continue(AgentContext("", [UserMessage("hi"), finished]), config, lambda event: None)
