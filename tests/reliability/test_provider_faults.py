"""The fault matrix at the LLM layer: every provider API against a server that misbehaves.

Each case goes through ``piagent.ai.stream`` to a real server on 127.0.0.1. Whatever the
fault, the stream never raises and never hangs: it ends with exactly one terminal event, and
a failure keeps what had already streamed ("Hel") in an ``error`` message.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest

from piagent.abort import AbortController
from piagent.ai import AssistantMessage, Context, StreamOptions, UserMessage, stream
from tests.reliability.conftest import leftover_threads, threads_now
from tests.reliability.wires import Wire
from tests.support.scripted_server import RESET, STALL, ScriptedServer, Wait

pytestmark = pytest.mark.timeout(20)

KEY = "sk-reliability-0123456789abcdef"
JSON = {"Content-Type": "application/json"}


def call(server: ScriptedServer, wire: Wire, **options: Any) -> tuple[list[str], AssistantMessage]:
    options.setdefault("api_key", KEY)
    options.setdefault("max_retry_delay_ms", 20)
    events = stream(wire.model(server.url), Context("sys", [UserMessage("Hi")]), StreamOptions(**options))
    types = [event.type for event in events]
    return types, events.result(timeout=10)


def assert_failed(types: list[str], message: AssistantMessage, text: str = "") -> None:
    """One terminal ``error`` event, last; the message is an error keeping ``text``."""
    assert types[-1] == "error" and types.count("error") == 1 and "done" not in types
    assert message.stop_reason == "error" and message.error_message
    assert message.text == text


def retry_delays(caplog: pytest.LogCaptureFixture) -> list[float]:
    """The waits the HTTP layer logged before each retry (its own record arguments)."""
    return [
        r.args[2]
        for r in caplog.records
        if r.name == "piagent" and r.getMessage().startswith("retrying") and "HTTP" in r.msg
    ]


# --------------------------------------------------------------------------- rate limits and 5xx


def test_429_with_retry_after_is_retried_then_succeeds(server, wire):
    server.reply([wire.error_body(429, "Rate limit reached")], 429, headers={**JSON, "Retry-After": "0"})
    server.reply(wire.text("Hello"))
    types, message = call(server, wire)
    assert message.stop_reason == "stop" and message.text == "Hello" and "error" not in types
    assert len(server.requests) == 2 and server.requests[0].body == server.requests[1].body


def test_429_without_retry_after_backs_off_up_to_max_retries_with_capped_waits(server, wire, caplog):
    for _ in range(4):
        server.reply([wire.error_body(429, "Rate limit reached")], 429, headers=JSON)
    caplog.set_level(logging.INFO, logger="piagent")
    types, message = call(server, wire, max_retries=2, max_retry_delay_ms=30)
    assert types == ["error"] and message.error_message == "HTTP 429: Rate limit reached"
    assert len(server.requests) == 3  # the first try and max_retries retries
    delays = retry_delays(caplog)
    assert len(delays) == 2 and all(0 <= d <= 0.03 for d in delays)


def test_retry_after_longer_than_max_retry_delay_fails_at_once(server, wire):
    server.reply([wire.error_body(429, "Rate limit reached")], 429, headers={**JSON, "Retry-After": "30"})
    types, message = call(server, wire, max_retry_delay_ms=1000)
    assert types == ["error"] and len(server.requests) == 1
    assert message.error_message.startswith("HTTP 429: Rate limit reached")
    assert "retry after 30s" in message.error_message and "max_retry_delay_ms=1000" in message.error_message


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_is_retried_then_succeeds(server, wire, status):
    server.reply([wire.error_body(status, "upstream trouble")], status, headers=JSON)
    server.reply(wire.text("Hello"))
    types, message = call(server, wire)
    assert message.stop_reason == "stop" and message.text == "Hello" and len(server.requests) == 2


@pytest.mark.parametrize("status", [500, 502, 503])
def test_5xx_exhausting_retries_ends_with_the_status_and_the_provider_text(server, wire, status):
    for _ in range(2):
        server.reply([wire.error_body(status, "upstream trouble")], status, headers=JSON)
    types, message = call(server, wire, max_retries=1)
    assert types == ["error"] and message.error_message == f"HTTP {status}: upstream trouble"
    assert len(server.requests) == 2


def test_5xx_with_a_plain_text_body_shows_that_text(server, wire):
    server.reply([b"<html>502 Bad Gateway</html>"], 502, headers={"Content-Type": "text/html"})
    types, message = call(server, wire, max_retries=0)
    assert types == ["error"] and message.error_message == "HTTP 502: <html>502 Bad Gateway</html>"


# --------------------------------------------------------------------------- broken connections


def test_reset_before_headers_is_retried_then_succeeds(server, wire):
    server.reply([], before_headers=RESET)
    server.reply(wire.text("Hello"))
    types, message = call(server, wire)
    assert message.stop_reason == "stop" and message.text == "Hello" and len(server.requests) == 2


def test_reset_before_headers_every_time_ends_with_a_connection_error(server, wire):
    for _ in range(2):
        server.reply([], before_headers=RESET)
    types, message = call(server, wire, max_retries=1)
    assert types == ["error"] and len(server.requests) == 2
    assert message.error_message == "Connection error: [Errno 104] Connection reset by peer"


def test_reset_mid_stream_keeps_the_partial_content_and_is_not_retried(server, wire):
    streamed = threading.Event()  # a reset sent before the client read "Hel" could discard it
    server.reply(wire.head() + [Wait(streamed), RESET])
    events = stream(wire.model(server.url), Context("", [UserMessage("Hi")]), StreamOptions(api_key=KEY))
    types = []
    for event in events:
        types.append(event.type)
        if event.type == "text_delta":
            streamed.set()
    message = events.result(timeout=10)
    assert types[:3] == ["start", "text_start", "text_delta"]
    assert_failed(types, message, "Hel")
    assert message.error_message == "Connection lost while streaming the response: [Errno 104] Connection reset by peer"
    assert len(server.requests) == 1  # a half-streamed answer is never silently replayed


def test_server_that_stops_sending_mid_stream_is_ended_by_the_read_timeout(server, wire):
    server.reply(wire.head() + [STALL])
    types, message = call(server, wire, timeout_ms=200)
    assert_failed(types, message, "Hel")
    assert message.error_message == "Read timed out: the server stopped sending data (no stream event for 0.2 s)"


def test_server_that_never_sends_headers_is_ended_by_the_read_timeout(server, wire):
    server.reply(wire.text("never"), before_headers=STALL)
    types, message = call(server, wire, timeout_ms=200)
    assert types == ["error"]
    assert message.error_message == "Read timed out: the server stopped sending data"
    assert len(server.requests) == 1  # a read timeout is not retried: the server got the request


def test_connection_refused_names_the_host_and_port(wire):
    model = wire.model("http://127.0.0.1:9")
    events = stream(model, Context("", [UserMessage("Hi")]), StreamOptions(api_key=KEY, max_retries=0))
    assert [e.type for e in events] == ["error"]
    text = events.result().error_message
    assert text.startswith("Connection error: HTTPConnection(host='127.0.0.1', port=9)") and "refused" in text


# --------------------------------------------------------------------------- bad bodies


def test_malformed_sse_lines_are_skipped(server, wire):
    noise = [b"this line is not an SSE field\n", b"data\n", b"event\n\n", b": comment\n\n", b"id: 7\nretry: 5\n\n"]
    server.reply(noise + wire.text("Hello"))
    types, message = call(server, wire)
    assert message.stop_reason == "stop" and message.text == "Hello" and "error" not in types


def test_invalid_json_chunk_ends_with_an_error_keeping_the_partial_content(server, wire):
    server.reply(wire.head() + [b"data: {oops\n\n"] + wire.tail())
    types, message = call(server, wire)
    assert_failed(types, message, "Hel")
    assert message.error_message.startswith("Invalid JSON in stream event: '{oops'")


def test_empty_200_body_is_an_error(server, wire):
    server.reply([])
    types, message = call(server, wire)
    assert types == ["start", "error"]
    assert_failed(types, message, "")
    assert message.error_message.startswith("The stream ended before")


def test_stream_truncated_before_its_terminal_event_is_an_error_keeping_the_partial(server, wire):
    server.reply(wire.head())
    types, message = call(server, wire)
    assert_failed(types, message, "Hel")
    assert message.error_message.startswith("The stream ended before")


# --------------------------------------------------------------------------- abort


def test_abort_while_the_server_holds_the_headers_ends_the_request_thread_too(server, wire):
    reply = server.reply(wire.text("late"), before_headers=STALL)
    controller = AbortController()
    before = threads_now()
    aborter = threading.Thread(target=lambda: reply.received.wait(5) and controller.abort())
    aborter.start()
    types, message = call(server, wire, signal=controller.signal)
    aborter.join(5)
    assert types == ["error"]
    assert (message.stop_reason, message.error_message) == ("aborted", "Request was aborted")
    # the server still holds its answer: the helper thread must not wait for it
    assert leftover_threads(before) == []


def test_abort_mid_stream_keeps_the_partial_content(server, wire):
    gate = threading.Event()
    server.reply(wire.head() + [Wait(gate)] + wire.tail())
    controller = AbortController()
    events = stream(
        wire.model(server.url), Context("", [UserMessage("Hi")]), StreamOptions(api_key=KEY, signal=controller.signal)
    )
    types = []
    for event in events:
        types.append(event.type)
        if event.type == "text_delta":
            controller.abort()
    gate.set()
    message = events.result(timeout=5)
    assert types[-1] == "error" and (message.stop_reason, message.text) == ("aborted", "Hel")
