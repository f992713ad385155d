"""Fallback models (docs/limits.md#fallback-models): several real servers on 127.0.0.1, one per
provider (Anthropic, OpenAI, Gemini wire formats), each with its own key."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from piagent import Agent, AgentTool, AgentToolResult
from piagent.ai import Capabilities, TextContent
from tests.reliability.wires import ANTHROPIC, COMPLETIONS, GOOGLE, RESPONSES
from tests.support.scripted_server import STALL, ScriptedServer, Wait

pytestmark = pytest.mark.timeout(20)

KEYS = {"anthropic": "sk-ant-fallback-0123456789", "openai": "sk-oai-fallback-0123456789", "google": "g-key-0123456789"}
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def servers() -> Iterator[tuple[ScriptedServer, ScriptedServer, ScriptedServer]]:
    with ScriptedServer() as a, ScriptedServer() as b, ScriptedServer() as c:
        yield a, b, c


def echo_tool() -> AgentTool:
    def execute(tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        return AgentToolResult([TextContent(f"echo {args['text']}")])

    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return AgentTool("echo", "Echo the text back", schema, execute)


def make_agent(a: ScriptedServer, b: ScriptedServer, **options: Any) -> tuple[Agent, list[Any]]:
    agent = Agent(
        model=options.pop("model", None) or ANTHROPIC.model(a.url),
        fallback_models=[options.pop("fallback", None) or COMPLETIONS.model(b.url)],
        tools=[echo_tool()],
        get_api_key=lambda provider: KEYS[provider],
        max_retries=1,
        max_retry_delay_ms=50,
        **options,
    )
    events: list[Any] = []
    agent.subscribe(lambda event: events.append(event) if event.type == "model_fallback" else None)
    return agent, events


def fail(server: ScriptedServer, status: int, body: bytes, times: int = 2, **headers: str) -> None:
    for _ in range(times):  # the first answer and its retry
        server.reply([body], status, headers={**JSON, **headers})


def anthropic_error(kind: str, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


def test_a_rate_limited_request_goes_to_the_next_provider_with_its_own_key(
    servers: tuple[ScriptedServer, ...],
) -> None:
    a, b, _ = servers
    agent, events = make_agent(a, b)
    fail(a, 429, anthropic_error("rate_limit_error", "Slow down"), **{"Retry-After": "0"})
    b.reply(COMPLETIONS.text("From the fallback."))

    result = agent.prompt("hello")

    assert result.text == "From the fallback." and result.stop_reason == "stop"
    answer = result.messages[-1]
    assert (answer.provider, answer.model, answer.api) == ("openai", "gpt-test", "openai-completions")
    assert len(a.requests) == 2  # the request and its retry, then the fallback
    assert b.requests[0].headers["authorization"] == f"Bearer {KEYS['openai']}"
    assert KEYS["anthropic"] not in json.dumps(b.requests[0].headers) + b.requests[0].body.decode()
    (event,) = events
    assert (event.model.provider, event.next_model.provider, event.reason) == ("anthropic", "openai", "rate_limit")
    assert event.error_message == "HTTP 429: Slow down"
    assert event.to_dict()["nextModel"] == "openai:gpt-test"
    assert [m.role for m in agent.state.messages] == ["user", "assistant"]  # the failed attempt is not kept


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (500, anthropic_error("api_error", "Internal server error"), "server_error"),
        (529, anthropic_error("overloaded_error", "Overloaded"), "overloaded"),
        (503, b"upstream connect error", "server_error"),
    ],
)
def test_server_errors_and_overloads_fall_back(
    servers: tuple[ScriptedServer, ...], status: int, body: bytes, reason: str
) -> None:
    a, b, _ = servers
    agent, events = make_agent(a, b)
    fail(a, status, body)
    b.reply(COMPLETIONS.text("Served."))
    assert agent.prompt("hello").text == "Served."
    assert [e.reason for e in events] == [reason]


def test_an_overload_reported_in_the_stream_before_any_content_falls_back(
    servers: tuple[ScriptedServer, ...],
) -> None:
    a, b, _ = servers
    agent, events = make_agent(a, b)
    started: list[str] = []

    def on_event(event: Any) -> None:
        if event.type in ("message_start", "message_update") and event.message.role == "assistant":
            started.append(event.message.provider)

    agent.subscribe(on_event)
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    a.reply(ANTHROPIC.head()[:1] + [f"event: error\ndata: {json.dumps(overloaded)}\n\n".encode()])
    b.reply(COMPLETIONS.text("Served."))

    assert agent.prompt("hello").text == "Served."
    assert [e.reason for e in events] == ["overloaded"]
    assert started and set(started) == {"openai"}  # no event of the dropped attempt


def test_a_read_timeout_falls_back(servers: tuple[ScriptedServer, ...]) -> None:
    a, b, _ = servers
    agent, events = make_agent(a, b, timeout_ms=300)
    a.reply([], before_headers=STALL)
    b.reply(COMPLETIONS.text("Served."))
    assert agent.prompt("hello").text == "Served."
    assert [e.reason for e in events] == ["timeout"]
    assert events[0].error_message.startswith("Read timed out")


def test_the_next_request_starts_again_from_the_first_model_unless_sticky(
    servers: tuple[ScriptedServer, ...],
) -> None:
    a, b, _ = servers
    agent, _ = make_agent(a, b)
    fail(a, 500, b"down")
    b.reply(COMPLETIONS.tool_call("call_1", "echo", {"text": "x"}))
    a.reply(ANTHROPIC.text("Back on the first."))
    assert agent.prompt("go").text == "Back on the first."
    assert len(b.requests) == 1 and len(a.requests) == 3

    sticky, _ = make_agent(a, b, fallback_sticky=True)
    fail(a, 500, b"down")
    b.reply(COMPLETIONS.tool_call("call_2", "echo", {"text": "y"}))
    b.reply(COMPLETIONS.text("Still on the fallback."))
    assert sticky.prompt("go").text == "Still on the fallback."
    assert len(b.requests) == 3 and len(a.requests) == 5
    a.reply(ANTHROPIC.text("A new run starts from the first."))
    assert sticky.prompt("again").text == "A new run starts from the first."


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, anthropic_error("invalid_request_error", "messages: field required")),
        (401, anthropic_error("authentication_error", "invalid x-api-key")),
        (404, anthropic_error("not_found_error", "model: claude-test")),
    ],
)
def test_an_error_any_model_would_meet_again_does_not_fall_back(
    servers: tuple[ScriptedServer, ...], status: int, body: bytes
) -> None:
    a, b, _ = servers
    agent, events = make_agent(a, b)
    fail(a, status, body, times=1)
    result = agent.prompt("hello")
    assert result.stop_reason == "error" and result.error_message.startswith(f"HTTP {status}")
    assert b.requests == [] and events == []


def test_an_abort_does_not_fall_back(servers: tuple[ScriptedServer, ...]) -> None:
    a, b, _ = servers
    agent, events = make_agent(a, b)
    release = threading.Event()
    reply = a.reply(ANTHROPIC.text("late"), before_headers=Wait(release))
    future = agent.prompt("hello", wait=False)
    assert reply.received.wait(10)
    agent.abort()
    result = future.result(timeout=10)
    release.set()
    assert result.stop_reason == "aborted" and b.requests == [] and events == []


def test_a_context_overflow_goes_to_the_next_model_with_a_larger_window(
    servers: tuple[ScriptedServer, ...],
) -> None:
    a, b, c = servers
    agent = Agent(
        model=ANTHROPIC.model(a.url, context_window=200_000),
        fallback_models=[
            COMPLETIONS.model(b.url, context_window=128_000),
            GOOGLE.model(c.url, context_window=1_000_000),
        ],
        get_api_key=lambda provider: KEYS[provider],
    )
    events: list[Any] = []
    agent.subscribe(lambda event: events.append(event) if event.type == "model_fallback" else None)
    fail(a, 400, anthropic_error("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"), 1)
    c.reply(GOOGLE.text("A million tokens fit here."))

    result = agent.prompt("a long conversation")

    assert result.text == "A million tokens fit here." and result.messages[-1].provider == "google"
    assert b.requests == []  # its window is smaller
    assert c.requests[0].headers["x-goog-api-key"] == KEYS["google"]
    assert [(e.reason, e.next_model.provider) for e in events] == [("context_overflow", "google")]


def test_the_thinking_level_is_translated_for_the_fallback_model(servers: tuple[ScriptedServer, ...]) -> None:
    a, b, _ = servers
    effort_model = RESPONSES.model(
        b.url, reasoning=True, capabilities=Capabilities(thinking="effort", efforts=("low", "medium", "high"))
    )
    agent, _ = make_agent(
        a, b, model=ANTHROPIC.model(a.url, reasoning=True), fallback=effort_model, thinking_level="xhigh"
    )
    fail(a, 503, b"unavailable")
    b.reply(RESPONSES.text("Thought about it."))

    result = agent.prompt("think")

    assert result.text == "Thought about it." and result.messages[-1].thinking_level == "xhigh"
    assert b.requests[0].json["reasoning"]["effort"] == "high"  # xhigh is past this model's highest
    assert a.requests[0].json["thinking"]["type"] == "enabled"  # the first model was asked in its own terms


def test_when_every_model_fails_the_error_names_each_failure(servers: tuple[ScriptedServer, ...]) -> None:
    a, b, _ = servers
    agent, events = make_agent(a, b)
    fail(a, 500, anthropic_error("api_error", "first is down"))
    fail(b, 503, b'{"error": {"message": "second is down"}}')
    result = agent.prompt("hello")
    assert result.stop_reason == "error"
    assert result.error_message == (
        "Every model failed: anthropic:claude-test: HTTP 500: first is down; openai:gpt-test: HTTP 503: second is down"
    )
    assert len(events) == 1


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        ("HTTP 429: Slow down", "rate_limit"),
        ("HTTP 529: Overloaded", "overloaded"),
        ("HTTP 503: The model is overloaded", "overloaded"),
        ("HTTP 502: Bad gateway", "server_error"),
        ("HTTP 408: Request timeout", "timeout"),
        ("overloaded_error: Overloaded", "overloaded"),
        ("The model is overloaded. Please try again later.", "overloaded"),  # Gemini, in the stream
        ("RESOURCE_EXHAUSTED", "rate_limit"),
        ("api_error: Internal server error", "server_error"),
        ("Read timed out: the server stopped sending data (no stream event for 5 s)", "timeout"),
        ("Connection error: [Errno 111] Connection refused", "connection"),
        ("HTTP 400: prompt is too long: 210000 tokens > 200000 maximum", "context_overflow"),
        ("HTTP 400: This model's maximum context length is 128000 tokens", "context_overflow"),
        ("HTTP 400: the request exceeds the available context size, try increasing it", "context_overflow"),
        ("HTTP 400: The input token count (1200000) exceeds the maximum number of tokens allowed", "context_overflow"),
        ("HTTP 400: messages: field required", None),
        ("HTTP 400: the word overloaded in a bad request", None),
        ("HTTP 401: invalid x-api-key", None),
        ("Request was aborted", None),
    ],
)
def test_which_failures_another_model_can_serve(error: str, reason: Any) -> None:
    from piagent.ai import AssistantMessage, fallback_reason

    assert fallback_reason(AssistantMessage(stop_reason="error", error_message=error)) == reason
    assert fallback_reason(AssistantMessage(stop_reason="aborted", error_message=error)) is None
    assert fallback_reason(AssistantMessage(stop_reason="refusal", error_message=error)) is None


def test_the_llm_layer_falls_back_without_any_agent(servers: tuple[ScriptedServer, ...]) -> None:
    from piagent.ai import Context, StreamOptions, UserMessage, stream_simple, with_fallbacks

    a, b, _ = servers
    fail(a, 429, anthropic_error("rate_limit_error", "Slow down"), times=1)
    b.reply(COMPLETIONS.text("Plain LLM call."))
    seen: list[str] = []
    stream = with_fallbacks(
        stream_simple,
        [COMPLETIONS.model(b.url)],
        on_fallback=lambda failed, model, next_model, reason: seen.append(f"{model.id}->{next_model.id}:{reason}"),
        api_key=lambda model: KEYS[model.provider],
    )
    options = StreamOptions(api_key=KEYS["anthropic"], max_retries=0)
    answer = stream(ANTHROPIC.model(a.url), Context(None, [UserMessage("hi")]), options).result()
    assert answer.text == "Plain LLM call." and answer.provider == "openai"
    assert seen == ["claude-test->gpt-test:rate_limit"]
    assert b.requests[0].headers["authorization"] == f"Bearer {KEYS['openai']}"
