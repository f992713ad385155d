"""The anthropic-messages provider against a real HTTP server replaying Messages API streams."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from piagent.abort import AbortController
from piagent.ai import (
    AssistantMessage,
    Context,
    Cost,
    ImageContent,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    complete,
)
from piagent.ai.providers.anthropic import build_request, normalize_tool_call_id, stream_anthropic
from tests.ai.providers.helpers import drain, event_types, hello, stream_options
from tests.support.scripted_server import RESET, ScriptedServer, Wait

KEY = "sk-ant-test-key-0123456789abcdef"


def make_model(base_url: str = "http://127.0.0.1:9", **overrides: Any) -> Model:
    fields: dict[str, Any] = dict(
        id="claude-test-4",
        api="anthropic-messages",
        provider="anthropic",
        base_url=base_url,
        reasoning=True,
        input=["text", "image"],
        cost=Cost(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
        context_window=200_000,
        max_tokens=64_000,
    )
    fields.update(overrides)
    return Model(**fields)


def options(**overrides: Any) -> StreamOptions:
    return stream_options(KEY, **overrides)


def frames(*events: dict[str, Any]) -> list[bytes]:
    """Each event as the API sends it: ``event: <type>`` then ``data: <json>``."""
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def message_start(input_tokens: int = 12, **usage: int) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_01TEST",
            "type": "message",
            "role": "assistant",
            "model": "claude-test-4",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1, **usage},
        },
    }


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, **d: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": d}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str, output_tokens: int) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens},
    }


STOP = {"type": "message_stop"}
PING = {"type": "ping"}


def text_stream(*pieces: str, stop_reason: str = "end_turn") -> list[dict[str, Any]]:
    return [
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        PING,
        *[delta(0, type="text_delta", text=p) for p in pieces],
        block_stop(0),
        message_delta(stop_reason, 7),
        STOP,
    ]


def run(server: ScriptedServer, context: Context = None, **opts: Any) -> tuple[list[Any], AssistantMessage]:
    return drain(stream_anthropic(make_model(server.url), context or hello(), options(**opts)))


# --------------------------------------------------------------------------- streams


def test_text_stream_builds_message_and_exact_event_sequence(server):
    server.reply(frames(*text_stream("Hello", " there", "!")))
    events, message = run(server)
    assert event_types(events) == [
        "start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    assert [e.delta for e in events if e.type == "text_delta"] == ["Hello", " there", "!"]
    assert events[5].content == "Hello there!" and events[5].content_index == 0
    assert events[-1].reason == "stop" and events[-1].message is message
    assert message.content == [TextContent("Hello there!")]
    assert (message.stop_reason, message.response_id) == ("stop", "msg_01TEST")
    assert (message.api, message.provider, message.model) == ("anthropic-messages", "anthropic", "claude-test-4")
    assert (message.usage.input, message.usage.output) == (12, 7)


@pytest.mark.parametrize(
    "reported, recorded", [("claude-test-4-20261101", "claude-test-4-20261101"), ("claude-test-4", None)]
)
def test_response_model_is_the_model_message_start_reports_when_it_differs(server, reported, recorded):
    start = message_start()
    start["message"]["model"] = reported
    server.reply(frames(start, *text_stream("ok")[1:]))
    _, message = run(server)
    assert (message.stop_reason, message.model, message.response_model) == ("stop", "claude-test-4", recorded)


def test_request_goes_to_messages_endpoint_with_key_version_and_model_headers(server):
    server.reply(frames(*text_stream("ok")))
    stream = stream_anthropic(
        make_model(server.url, headers={"x-model-header": "m"}), hello(), options(headers={"x-extra": "1"})
    )
    stream.result(timeout=10)
    request = server.requests[0]
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2026-10-21"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["x-model-header"] == "m" and request.headers["x-extra"] == "1"
    body = request.json
    assert body["model"] == "claude-test-4" and body["stream"] is True
    assert body["max_tokens"] == 32000  # min(model.max_tokens, 32000)
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}]}
    ]
    assert "thinking" not in body and "tools" not in body


def test_thinking_then_text_keeps_concatenated_signature(server):
    server.reply(
        frames(
            message_start(),
            block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
            delta(0, type="thinking_delta", thinking="Let me"),
            delta(0, type="thinking_delta", thinking=" think."),
            delta(0, type="thinking_delta", thinking=""),
            delta(0, type="signature_delta", signature="EqQBCkYIARgC"),
            delta(0, type="signature_delta", signature="+more=="),
            block_stop(0),
            block_start(1, {"type": "text", "text": ""}),
            delta(1, type="text_delta", text="Answer."),
            block_stop(1),
            message_delta("end_turn", 30),
            STOP,
        )
    )
    events, message = run(server, reasoning="low")
    assert event_types(events) == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_end",
        "done",
    ]
    assert events[4].content == "Let me think."
    assert message.content == [ThinkingContent("Let me think.", "EqQBCkYIARgC+more=="), TextContent("Answer.")]
    body = server.requests[0].json
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 32000 + 2048


def test_redacted_thinking_block_keeps_its_data_as_signature(server):
    server.reply(
        frames(
            message_start(),
            block_start(0, {"type": "redacted_thinking", "data": "ENCRYPTED=="}),
            block_stop(0),
            block_start(1, {"type": "text", "text": ""}),
            delta(1, type="text_delta", text="ok"),
            block_stop(1),
            message_delta("end_turn", 3),
            STOP,
        )
    )
    _, message = run(server, reasoning="high")
    assert message.content[0] == ThinkingContent("[Reasoning redacted]", "ENCRYPTED==", redacted=True)


def test_content_carried_by_a_block_start_is_its_first_delta(server):
    server.reply(
        frames(
            message_start(),
            block_start(0, {"type": "thinking", "thinking": "Hm.", "signature": "SIG"}),
            block_stop(0),
            block_start(1, {"type": "text", "text": "Hi"}),
            delta(1, type="text_delta", text="!"),
            block_stop(1),
            block_start(2, {"type": "tool_use", "id": "toolu_X", "name": "f", "input": {"a": 1}}),
            block_stop(2),
            message_delta("tool_use", 9),
            STOP,
        )
    )
    events, message = run(server)
    assert event_types(events) == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    assert [e.delta for e in events if e.type.endswith("_delta")] == ["Hm.", "Hi", "!", '{"a": 1}']
    assert message.content == [ThinkingContent("Hm.", "SIG"), TextContent("Hi!"), ToolCall("toolu_X", "f", {"a": 1})]


def tool_stream() -> list[dict[str, Any]]:
    return [
        message_start(),
        block_start(0, {"type": "text", "text": ""}),
        delta(0, type="text_delta", text="Checking both."),
        block_stop(0),
        block_start(1, {"type": "tool_use", "id": "toolu_A", "name": "get_weather", "input": {}}),
        delta(1, type="input_json_delta", partial_json=""),
        delta(1, type="input_json_delta", partial_json='{"locati'),
        delta(1, type="input_json_delta", partial_json='on": "Pa'),
        delta(1, type="input_json_delta", partial_json='ris", "days": '),
        delta(1, type="input_json_delta", partial_json="3}"),
        block_stop(1),
        block_start(2, {"type": "tool_use", "id": "toolu_B", "name": "get_time", "input": {}}),
        delta(2, type="input_json_delta", partial_json=""),
        delta(2, type="input_json_delta", partial_json='{"tz"'),
        delta(2, type="input_json_delta", partial_json=': "Europe/'),
        delta(2, type="input_json_delta", partial_json='Paris"}'),
        block_stop(2),
        message_delta("tool_use", 65),
        STOP,
    ]


def test_two_tool_calls_with_arguments_split_across_chunks(server):
    server.reply(frames(*tool_stream()))
    stream = stream_anthropic(make_model(server.url), hello(), options())
    events, partial_args = [], []
    for event in stream:
        events.append(event)
        if event.type == "toolcall_delta":
            partial_args.append(dict(event.partial.content[event.content_index].arguments))
    message = stream.result(timeout=10)
    assert event_types(events) == [
        "start",
        "text_start",
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]  # empty partial_json deltas carry nothing and are not emitted
    assert partial_args[0] == {} and partial_args[1] == {"location": "Pa"}
    assert partial_args[3] == {"location": "Paris", "days": 3}
    assert events[9].tool_call == ToolCall("toolu_A", "get_weather", {"location": "Paris", "days": 3})
    assert message.tool_calls == [
        ToolCall("toolu_A", "get_weather", {"location": "Paris", "days": 3}),
        ToolCall("toolu_B", "get_time", {"tz": "Europe/Paris"}),
    ]
    assert message.stop_reason == "toolUse" and events[-1].reason == "toolUse"


def test_usage_with_cache_tokens_gives_cost_from_model_prices(server):
    events = text_stream("cached")
    events[0] = message_start(100, cache_read_input_tokens=1000, cache_creation_input_tokens=200)
    events[-2] = message_delta("end_turn", 50)
    server.reply(frames(*events))
    _, message = run(server)
    usage = message.usage
    assert (usage.input, usage.output, usage.cache_read, usage.cache_write) == (100, 50, 1000, 200)
    assert usage.total_tokens == 1350
    assert usage.cost.input == pytest.approx(100 * 3.0 / 1e6)
    assert usage.cost.output == pytest.approx(50 * 15.0 / 1e6)
    assert usage.cost.cache_read == pytest.approx(1000 * 0.3 / 1e6)
    assert usage.cost.cache_write == pytest.approx(200 * 3.75 / 1e6)
    assert usage.cost.total == pytest.approx((300 + 750 + 300 + 750) / 1e6)


@pytest.mark.parametrize(
    "stop_reason, expected",
    [("end_turn", "stop"), ("pause_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length")],
)
def test_stop_reasons_map_to_pi_reasons(server, stop_reason, expected):
    server.reply(frames(*text_stream("x", stop_reason=stop_reason)))
    events, message = run(server)
    assert events[-1].type == "done" and message.stop_reason == expected


def test_a_refusal_is_its_own_outcome_with_text_and_category_kept(server):
    events_in = text_stream("I can't help with that.", stop_reason="refusal")
    events_in[-2]["delta"]["stop_details"] = {
        "type": "refusal",
        "category": "cyber",
        "explanation": "Could enable malware development.",
    }
    server.reply(frames(*events_in))
    events, message = run(server)
    assert events[-1].type == "done" and message.stop_reason == "refusal"
    assert message.text == "I can't help with that." and message.error_message is None
    assert message.refusal == {"category": "cyber", "explanation": "Could enable malware development."}
    assert message.to_dict()["refusal"]["category"] == "cyber"


def test_a_refusal_without_details_still_is_a_refusal(server):
    server.reply(frames(*text_stream("No.", stop_reason="refusal")))
    _, message = run(server)
    assert message.stop_reason == "refusal" and message.refusal == {"category": None, "explanation": None}


# --------------------------------------------------------------------------- failures


def error_body(kind: str, text: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": kind, "message": text}}).encode()


JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize("status, kind", [(401, "authentication_error"), (400, "invalid_request_error")])
def test_http_error_is_a_single_error_event_with_the_provider_text(server, status, kind):
    server.reply(error_body(kind, "something specific went wrong"), status, headers=JSON)
    events, message = run(server)
    assert event_types(events) == ["error"]
    assert message.stop_reason == "error"
    assert str(status) in message.error_message and "something specific went wrong" in message.error_message
    assert len(server.requests) == 1


def test_error_body_echoing_the_key_never_shows_it(server):
    server.reply(error_body("invalid_request_error", f"bad key {KEY}"), 400, headers=JSON)
    _, message = run(server)
    assert KEY not in message.error_message and "[REDACTED]" in message.error_message
    assert KEY not in repr(message) and KEY not in json.dumps(message.to_dict())


def test_missing_key_names_the_environment_variable(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    stream = stream_anthropic(make_model("https://api.anthropic.invalid"), hello(), StreamOptions())
    events = list(stream)
    assert event_types(events) == ["error"]
    assert "ANTHROPIC_API_KEY" in stream.result().error_message


def test_key_from_environment_is_used(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env-123456")
    server.reply(frames(*text_stream("ok")))
    message = stream_anthropic(make_model(server.url), hello(), StreamOptions()).result(timeout=10)
    assert message.stop_reason == "stop"
    assert server.requests[0].headers["x-api-key"] == "sk-from-env-123456"


def test_429_with_retry_after_is_retried_then_succeeds(server):
    server.reply(error_body("rate_limit_error", "slow down"), 429, headers={**JSON, "Retry-After": "0"})
    server.reply(frames(*text_stream("after retry")))
    events, message = run(server)
    assert message.text == "after retry" and message.stop_reason == "stop"
    assert len(server.requests) == 2
    assert event_types(events)[0] == "start"  # the failed attempt left no trace in the stream


@pytest.mark.parametrize("status", [529, 503])
def test_overloaded_and_unavailable_are_retried(server, status):
    server.reply(error_body("overloaded_error", "Overloaded"), status, headers=JSON)
    server.reply(frames(*text_stream("fine")))
    _, message = run(server)
    assert message.text == "fine" and len(server.requests) == 2


def test_exhausted_retries_end_with_the_last_error(server):
    for _ in range(3):
        server.reply(error_body("overloaded_error", "Overloaded"), 529, headers=JSON)
    events, message = run(server, max_retries=2)
    assert event_types(events) == ["error"]
    assert "529" in message.error_message and "Overloaded" in message.error_message
    assert len(server.requests) == 3


def test_connection_reset_mid_stream_keeps_partial_content(server):
    events = text_stream("partial ", "text", "never")
    server.reply(frames(*events[:5]) + [RESET])
    got, message = run(server)
    assert message.stop_reason == "error" and message.error_message
    assert message.content == [TextContent("partial text")]
    assert got[-1].type == "error" and got[0].type == "start"


def test_stream_cut_before_message_stop_is_an_error_with_partial_content(server):
    server.reply(frames(*text_stream("half", " done")[:-1]))  # everything but message_stop
    _, message = run(server)
    assert message.stop_reason == "error"
    assert "message_stop" in message.error_message
    assert message.content == [TextContent("half done")]


def test_a_200_answer_that_is_not_an_event_stream_is_an_error(server):
    server.reply([b"<html><body>Gateway says hi</body></html>"], headers={"Content-Type": "text/html"})
    _, message = run(server)
    assert message.stop_reason == "error" and "message_stop" in message.error_message


def test_invalid_json_in_an_event_is_an_error_keeping_partial_content(server):
    events = frames(*text_stream("good")[:4])
    server.reply(events + [b'event: content_block_delta\ndata: {"type": "content_block_delta", "ind\n\n'])
    _, message = run(server)
    assert message.stop_reason == "error" and "Invalid JSON" in message.error_message
    assert message.content == [TextContent("good")]


def test_in_stream_error_event_becomes_error_message(server):
    events = text_stream("so far")[:4]
    events.append({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    server.reply(frames(*events))
    got, message = run(server)
    assert got[-1].type == "error" and message.stop_reason == "error"
    assert "overloaded_error" in message.error_message and "Overloaded" in message.error_message
    assert message.content == [TextContent("so far")]


def consume_in_thread(stream):
    seen: list[Any] = []
    first_delta = threading.Event()

    def consume() -> None:
        for event in stream:
            seen.append(event)
            if event.type == "text_delta":
                first_delta.set()

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    return thread, seen, first_delta


def test_abort_while_waiting_for_headers_returns_aborted_at_once(server):
    release = threading.Event()
    reply = server.reply(frames(*text_stream("late")), before_headers=Wait(release))
    controller = AbortController()
    stream = stream_anthropic(make_model(server.url), hello(), options(signal=controller.signal))
    thread, seen, _ = consume_in_thread(stream)
    try:
        assert reply.received.wait(5)
        controller.abort()
        thread.join(5)
        assert not thread.is_alive()
    finally:
        release.set()
    assert event_types(seen) == ["error"]
    message = stream.result(timeout=1)
    assert message.stop_reason == "aborted" and message.error_message


def test_abort_mid_stream_returns_aborted_with_partial_content(server):
    release = threading.Event()
    events = text_stream("first", "second")
    server.reply(frames(*events[:4]) + [Wait(release)] + frames(*events[4:]))
    controller = AbortController()
    stream = stream_anthropic(make_model(server.url), hello(), options(signal=controller.signal))
    thread, seen, first_delta = consume_in_thread(stream)
    try:
        assert first_delta.wait(5)
        controller.abort()
        thread.join(5)
        assert not thread.is_alive()
    finally:
        release.set()
    message = stream.result(timeout=1)
    assert message.stop_reason == "aborted"
    assert message.content == [TextContent("first")]
    assert event_types(seen) == ["start", "text_start", "text_delta", "error"]


# --------------------------------------------------------------------------- request building


def test_history_maps_to_messages_with_merged_tool_results_and_images():
    model = make_model()
    assistant = AssistantMessage(
        content=[
            ThinkingContent("hmm", "SIG1"),
            ThinkingContent("[Reasoning redacted]", "REDACTED1", redacted=True),
            TextContent("Let me look."),
            ToolCall("toolu_1", "read", {"path": "a.png"}),
            ToolCall("toolu_2", "read", {"path": "b.txt"}),
        ],
        api=model.api,
        provider=model.provider,
        model=model.id,
        stop_reason="toolUse",
    )
    context = Context(
        messages=[
            UserMessage([TextContent("Look"), ImageContent("aW1n", "image/png")]),
            assistant,
            ToolResultMessage("toolu_1", "read", [TextContent("an image:"), ImageContent("cG5n", "image/png")]),
            ToolResultMessage("toolu_2", "read", [TextContent("no such file")], is_error=True),
            UserMessage("thanks"),
        ],
        tools=[Tool("read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})],
    )
    body = build_request(model, context, StreamOptions(cache_retention="none"))
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Look"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "aW1n"}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "SIG1"},
                {"type": "redacted_thinking", "data": "REDACTED1"},
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.png"}},
                {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"path": "b.txt"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [
                        {"type": "text", "text": "an image:"},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "cG5n"}},
                    ],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "no such file"}],
                    "is_error": True,
                },
            ],
        },
        {"role": "user", "content": [{"type": "text", "text": "thanks"}]},
    ]
    assert body["tools"] == [
        {
            "name": "read",
            "description": "Read a file",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    ]
    assert "system" not in body


def test_cache_control_marks_last_user_message_and_long_retention_asks_one_hour():
    context = Context(
        system_prompt="sys",
        messages=[
            UserMessage("one"),
            AssistantMessage(
                [TextContent("two")], api="anthropic-messages", provider="anthropic", model="claude-test-4"
            ),
            UserMessage([TextContent("three"), TextContent("four")]),
        ],
    )
    body = build_request(make_model(), context, StreamOptions(cache_retention="long"))
    control = {"type": "ephemeral", "ttl": "1h"}
    assert body["system"][0]["cache_control"] == control
    assert body["messages"][0]["content"] == [{"type": "text", "text": "one"}]
    assert body["messages"][2]["content"] == [
        {"type": "text", "text": "three"},
        {"type": "text", "text": "four", "cache_control": control},
    ]
    none = build_request(make_model(), context, StreamOptions(cache_retention="none"))
    assert "cache_control" not in json.dumps(none)


def test_thinking_from_another_model_becomes_text_and_tool_ids_are_normalized():
    other = AssistantMessage(
        content=[ThinkingContent("deep thought", "OTHER-SIG"), ToolCall("call|abc.def/1", "echo", {"v": 1})],
        api="openai-responses",
        provider="openai",
        model="gpt-x",
        stop_reason="toolUse",
    )
    context = Context(
        messages=[UserMessage("go"), other, ToolResultMessage("call|abc.def/1", "echo", [TextContent("1")])]
    )
    body = build_request(make_model(), context, StreamOptions(cache_retention="none"))
    assistant, results = body["messages"][1]["content"], body["messages"][2]["content"]
    assert assistant[0] == {"type": "text", "text": "deep thought"}
    assert assistant[1]["id"] == "call_abc_def_1" == results[0]["tool_use_id"]


def test_normalized_tool_call_ids_fit_anthropic_pattern():
    assert normalize_tool_call_id("a" * 100) == "a" * 64
    assert normalize_tool_call_id("fc_1|item:2") == "fc_1_item_2"


def test_unanswered_tool_call_gets_a_synthetic_error_result():
    call = AssistantMessage(
        [ToolCall("toolu_9", "echo", {})],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-test-4",
        stop_reason="toolUse",
    )
    body = build_request(
        make_model(),
        Context(messages=[UserMessage("go"), call, UserMessage("next")]),
        StreamOptions(cache_retention="none"),
    )
    result = body["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_9" and result["is_error"] is True


def test_errored_assistant_messages_are_left_out():
    failed = AssistantMessage(
        [TextContent("half")],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-test-4",
        stop_reason="error",
        error_message="boom",
    )
    body = build_request(
        make_model(),
        Context(messages=[UserMessage("a"), failed, UserMessage("b")]),
        StreamOptions(cache_retention="none"),
    )
    assert [m["role"] for m in body["messages"]] == ["user", "user"]


@pytest.mark.parametrize(
    "choice, expected",
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ({"name": "echo"}, {"type": "tool", "name": "echo"}),
    ],
)
def test_tool_choice_maps_to_anthropic_form(choice, expected):
    context = Context(messages=[UserMessage("x")], tools=[Tool("echo", "Echo", {"type": "object", "properties": {}})])
    assert build_request(make_model(), context, StreamOptions(tool_choice=choice))["tool_choice"] == expected


def test_unknown_tool_choice_ends_the_stream_with_an_error(server):
    context = Context(messages=[UserMessage("x")], tools=[Tool("echo", "Echo", {"type": "object", "properties": {}})])
    message = stream_anthropic(make_model(server.url), context, options(tool_choice="sometimes")).result(timeout=10)
    assert message.stop_reason == "error" and "tool_choice" in message.error_message
    assert server.requests == []


def test_temperature_is_sent_without_thinking_and_dropped_with_it():
    context = Context(messages=[UserMessage("x")])
    plain = build_request(make_model(), context, StreamOptions(temperature=0.3, max_tokens=1000))
    assert plain["temperature"] == 0.3 and plain["max_tokens"] == 1000
    thinking = build_request(make_model(), context, StreamOptions(temperature=0.3, max_tokens=1000, reasoning="medium"))
    assert "temperature" not in thinking
    assert thinking["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert thinking["max_tokens"] == 1000 + 8192


def test_thinking_budget_overrides_and_model_limit():
    model = make_model(max_tokens=10_000)
    body = build_request(
        model, Context(messages=[UserMessage("x")]), StreamOptions(reasoning="xhigh", thinking_budgets={"high": 9_500})
    )
    assert body["max_tokens"] == 10_000
    assert body["thinking"]["budget_tokens"] < body["max_tokens"]


def test_reasoning_is_ignored_for_a_model_without_it():
    body = build_request(
        make_model(reasoning=False), Context(messages=[UserMessage("x")]), StreamOptions(reasoning="high")
    )
    assert "thinking" not in body


def test_metadata_user_id_and_on_payload_replacement(server):
    server.reply(frames(*text_stream("ok")))
    seen: list[Any] = []

    def on_payload(payload: dict[str, Any], model: Model) -> dict[str, Any]:
        seen.append(payload)
        return {**payload, "top_k": 5}

    complete(make_model(server.url), hello(), options(metadata={"user_id": "u-42", "other": 1}, on_payload=on_payload))
    body = server.requests[0].json
    assert body["metadata"] == {"user_id": "u-42"}
    assert body["top_k"] == 5 and seen[0]["metadata"] == {"user_id": "u-42"}
