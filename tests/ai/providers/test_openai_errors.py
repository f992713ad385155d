"""Failure handling shared by both OpenAI APIs: HTTP errors, retries, broken streams, aborts, secrets.

Every case runs against a real server on 127.0.0.1 in each API's wire format; every failure
must end the stream with one ``error`` event (never an exception), keeping partial content.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable

import pytest

from piagent.abort import AbortController
from piagent.ai import stream
from piagent.ai.types import Context, Cost, Model, StreamOptions, UserMessage
from tests.ai.providers.helpers import event_types
from tests.ai.providers.openai_wire import ResponsesStream, chat_stream, chat_text, chunk, responses_text
from tests.support.scripted_server import RESET, Wait, sse

KEY = "sk-proj-SECRET-abcdef0123456789"


@dataclass
class Wire:
    api: str
    text: Callable[..., list[bytes]]  # complete stream of the given text parts
    head: Callable[[], list[bytes]]  # a response that has streamed the text "Hel" and is still open
    tail: Callable[[], list[bytes]]  # the rest of it: "lo" and the end
    error_event: Callable[[], list[bytes]]  # the API's in-stream error after "Hel"


def _responses_head() -> ResponsesStream:
    s = ResponsesStream().created()
    s.add(
        "response.output_item.added",
        output_index=0,
        item={"id": "msg_1", "type": "message", "status": "in_progress", "content": [], "role": "assistant"},
    )
    return s.add("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0, delta="Hel")


def _responses_tail() -> list[bytes]:
    s = ResponsesStream()
    s.add("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0, delta="lo")
    s.add(
        "response.output_item.done",
        output_index=0,
        item={
            "id": "msg_1",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hello", "annotations": []}],
        },
    )
    return s.completed().frames()


def _responses_error() -> list[bytes]:
    return _responses_head().add("error", code="server_error", message="The server had an error", param=None).frames()


COMPLETIONS = Wire(
    "openai-completions",
    chat_text,
    lambda: chat_stream(chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}), done=False),
    lambda: chat_stream(chunk({"content": "lo"}), chunk({}, "stop")),
    lambda: chat_stream(
        chunk({"content": "Hel"}), {"error": {"message": "The server had an error", "type": "server_error"}}, done=False
    ),
)
RESPONSES = Wire(
    "openai-responses",
    responses_text,
    lambda: _responses_head().frames(),
    _responses_tail,
    _responses_error,
)


@pytest.fixture(params=[COMPLETIONS, RESPONSES], ids=lambda w: w.api)
def wire(request) -> Wire:
    return request.param


def model_for(server, wire: Wire) -> Model:
    return Model("gpt-test", api=wire.api, provider="openai", base_url=server.url + "/v1", cost=Cost(1, 1))


def call(server, wire, **options):
    options.setdefault("api_key", KEY)
    options.setdefault("max_retry_delay_ms", 20)
    s = stream(model_for(server, wire), Context("sys", [UserMessage("Hi")]), StreamOptions(**options))
    events = list(s)
    final = s.result()
    return events, final


def error_body(message: str, code: str) -> bytes:
    return (
        f'{{"error": {{"message": "{message}", "type": "invalid_request_error", "param": null, "code": "{code}"}}}}'
    ).encode()


def test_401_ends_with_a_single_error_event_and_the_key_never_leaks(server, wire):
    body = error_body(f"Incorrect API key provided: {KEY}. You can find your API key at ...", "invalid_api_key")
    server.reply([body], 401, headers={"Content-Type": "application/json"})
    events, message = call(server, wire)
    assert event_types(events) == ["error"]
    assert message.stop_reason == "error"
    assert message.error_message.startswith("HTTP 401: Incorrect API key provided: [REDACTED]")
    assert KEY not in message.error_message and KEY not in repr(message) and KEY not in str(message.to_dict())
    assert len(server.requests) == 1


def test_400_is_not_retried_and_carries_the_provider_message(server, wire):
    server.reply(
        [error_body("Invalid value for 'temperature'", "invalid_value")],
        400,
        headers={"Content-Type": "application/json"},
    )
    events, message = call(server, wire, max_retries=3)
    assert event_types(events) == ["error"] and message.error_message == "HTTP 400: Invalid value for 'temperature'"
    assert len(server.requests) == 1


def test_429_with_retry_after_is_retried_then_succeeds(server, wire):
    server.reply(
        [error_body("Rate limit reached", "rate_limit_exceeded")],
        429,
        headers={"Content-Type": "application/json", "Retry-After": "0"},
    )
    server.reply(wire.text("Hello"))
    events, message = call(server, wire)
    assert message.stop_reason == "stop" and message.text == "Hello"
    assert event_types(events)[0] == "start" and "error" not in event_types(events)
    assert len(server.requests) == 2 and server.requests[0].body == server.requests[1].body


def test_429_exhausting_max_retries_fails_with_the_provider_message(server, wire):
    for _ in range(3):
        server.reply(
            [error_body("Rate limit reached", "rate_limit_exceeded")], 429, headers={"Content-Type": "application/json"}
        )
    events, message = call(server, wire, max_retries=2)
    assert event_types(events) == ["error"] and message.error_message == "HTTP 429: Rate limit reached"
    assert len(server.requests) == 3


def test_503_is_retried(server, wire):
    server.reply([b"upstream unavailable"], 503, headers={"Content-Type": "text/plain"})
    server.reply(wire.text("ok"))
    _, message = call(server, wire)
    assert message.text == "ok" and len(server.requests) == 2


def test_retry_after_longer_than_max_retry_delay_fails_at_once(server, wire):
    server.reply(
        [error_body("Rate limit reached", "rate_limit_exceeded")],
        429,
        headers={"Content-Type": "application/json", "Retry-After": "120"},
    )
    events, message = call(server, wire, max_retry_delay_ms=1000)
    assert event_types(events) == ["error"]
    assert "retry after 120s" in message.error_message and "max_retry_delay_ms" in message.error_message
    assert len(server.requests) == 1


def test_connection_reset_mid_stream_keeps_partial_content(server, wire):
    server.reply(wire.head() + [RESET])
    events, message = call(server, wire)
    assert event_types(events)[:3] == ["start", "text_start", "text_delta"] and event_types(events)[-1] == "error"
    assert message.stop_reason == "error" and message.text == "Hel"
    assert message.error_message.startswith("Connection lost while streaming the response")


def test_stream_ending_before_its_terminal_event_is_an_error(server, wire):
    server.reply(wire.head())
    events, message = call(server, wire)
    assert event_types(events)[-1] == "error" and message.text == "Hel"
    assert "ended before the response was complete" in message.error_message


def test_lines_that_are_not_sse_fields_are_ignored(server, wire):
    frames = wire.text("Hi")
    server.reply([b": keep-alive comment\n\n", b"garbage line without a field\n\n", b"retry: 10\n\n"] + frames)
    _, message = call(server, wire)
    assert message.stop_reason == "stop" and message.text == "Hi"


def test_invalid_json_chunk_ends_with_an_error_keeping_partial_content(server, wire):
    server.reply(wire.head() + [b'data: {"truncated": \n\n'])
    events, message = call(server, wire)
    assert event_types(events)[-1] == "error" and message.text == "Hel"
    assert "Invalid JSON in stream event" in message.error_message


def test_error_object_inside_the_stream_ends_with_an_error(server, wire):
    server.reply(wire.error_event())
    events, message = call(server, wire)
    assert event_types(events)[-1] == "error" and message.stop_reason == "error"
    assert message.error_message == "Provider error: The server had an error"
    assert message.text == "Hel"


def test_missing_key_names_the_variable_and_sends_nothing(wire):
    model = Model("gpt-test", api=wire.api, provider="openai", base_url="https://api.openai.invalid/v1")
    s = stream(model, Context("", [UserMessage("Hi")]), StreamOptions())
    assert event_types(list(s)) == ["error"]
    assert s.result().error_message == "No API key for provider openai: set OPENAI_API_KEY or pass api_key"


def test_abort_while_waiting_for_headers_returns_promptly(server, wire):
    release = threading.Event()
    reply = server.reply(wire.text("late"), before_headers=Wait(release))
    controller = AbortController()
    outcome = []
    consumer = threading.Thread(target=lambda: outcome.append(call(server, wire, signal=controller.signal)))
    consumer.start()
    try:
        assert reply.received.wait(5)
        controller.abort()
        consumer.join(5)
        assert not consumer.is_alive()
    finally:
        release.set()
    events, message = outcome[0]
    assert event_types(events) == ["error"]
    assert (message.stop_reason, message.error_message) == ("aborted", "Request was aborted")


def test_abort_mid_stream_closes_the_response_and_keeps_partial_content(server, wire):
    gate = threading.Event()
    server.reply(wire.head() + [Wait(gate)] + wire.tail())
    controller = AbortController()
    got_text = threading.Event()
    seen: list[str] = []

    def consume():
        s = stream(
            model_for(server, wire),
            Context("sys", [UserMessage("Hi")]),
            StreamOptions(api_key=KEY, signal=controller.signal),
        )
        for event in s:
            seen.append(event.type)
            if event.type == "text_delta":
                got_text.set()
        seen.append(s.result())

    consumer = threading.Thread(target=consume)
    consumer.start()
    try:
        assert got_text.wait(5)
        controller.abort()
        consumer.join(5)
        assert not consumer.is_alive()
    finally:
        gate.set()
    message = seen[-1]
    assert seen[-2] == "error"
    assert message.stop_reason == "aborted" and message.error_message == "Request was aborted"
    assert message.text == "Hel"


def test_abort_before_the_call_sends_nothing(server, wire):
    controller = AbortController()
    controller.abort()
    events, message = call(server, wire, signal=controller.signal)
    assert event_types(events) == ["error"] and message.stop_reason == "aborted"
    assert server.requests == []


def test_connection_refused_is_an_error_event(wire):
    model = Model("gpt-test", api=wire.api, provider="openai", base_url="http://127.0.0.1:9/v1")
    s = stream(model, Context("", [UserMessage("Hi")]), StreamOptions(api_key=KEY, max_retries=0))
    events = list(s)
    assert event_types(events) == ["error"]
    assert s.result().error_message.startswith("Connection error")


def test_sse_helper_frames_match_the_wire_format():
    assert sse({"a": 1}, "[DONE]") == [b'data: {"a": 1}\n\n', b"data: [DONE]\n\n"]
