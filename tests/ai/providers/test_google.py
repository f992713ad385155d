"""The google-generative-ai provider against a real HTTP server replaying Gemini API streams."""

from __future__ import annotations

import json
import threading
from typing import Any, Optional

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
    get_model,
)
from piagent.ai.providers.google import build_request, stream_google
from tests.ai.providers.helpers import drain, event_types, hello, stream_options
from tests.support.scripted_server import RESET, ScriptedServer, Wait

KEY = "AIzaSy-test-key-0123456789abcdef"


def make_model(base_url: str = "http://127.0.0.1:9/v1beta", **overrides: Any) -> Model:
    fields: dict[str, Any] = dict(
        id="gemini-2.5-flash",
        api="google-generative-ai",
        provider="google",
        base_url=base_url,
        reasoning=True,
        input=["text", "image"],
        cost=Cost(input=0.3, output=2.5, cache_read=0.075, cache_write=0.0),
        context_window=1_048_576,
        max_tokens=65_536,
        capabilities=get_model("google:gemini-2.5-flash-lite").capabilities,
    )
    fields.update(overrides)
    return Model(**fields)


def options(**overrides: Any) -> StreamOptions:
    return stream_options(KEY, **overrides)


def frames(*chunks: dict[str, Any]) -> list[bytes]:
    """Each chunk as the Gemini API sends it with ``alt=sse``: one ``data:`` line, CRLF endings."""
    return [f"data: {json.dumps(c)}\r\n\r\n".encode() for c in chunks]


USAGE = {"promptTokenCount": 9, "candidatesTokenCount": 5, "totalTokenCount": 14}


def chunk(
    *parts: dict[str, Any], finish: Optional[str] = None, usage: Optional[dict[str, Any]] = None
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": usage or USAGE,
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-XYZ",
    }


def text_stream(*pieces: str, finish: str = "STOP") -> list[dict[str, Any]]:
    chunks = [chunk({"text": p}) for p in pieces]
    chunks[-1]["candidates"][0]["finishReason"] = finish
    return chunks


def run(
    server: ScriptedServer, context: Optional[Context] = None, model: Optional[Model] = None, **opts: Any
) -> tuple[list[Any], AssistantMessage]:
    return drain(stream_google(model or make_model(server.url + "/v1beta"), context or hello(), options(**opts)))


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
    assert events[5].content == "Hello there!"
    assert message.content == [TextContent("Hello there!")]
    assert (message.stop_reason, message.response_id) == ("stop", "resp-XYZ")
    assert (message.api, message.provider, message.model) == ("google-generative-ai", "google", "gemini-2.5-flash")
    assert (message.usage.input, message.usage.output) == (9, 5)


@pytest.mark.parametrize(
    "reported, recorded",
    [("gemini-2.5-flash-preview-09-2026", "gemini-2.5-flash-preview-09-2026"), ("gemini-2.5-flash", None)],
)
def test_response_model_is_the_model_version_reported_when_it_differs(server, reported, recorded):
    chunks = text_stream("Hel", "lo")
    for c in chunks:
        c["modelVersion"] = reported
    server.reply(frames(*chunks))
    _, message = run(server)
    assert (message.stop_reason, message.model, message.response_model) == ("stop", "gemini-2.5-flash", recorded)


def test_request_goes_to_stream_endpoint_with_key_header_and_config(server):
    server.reply(frames(*text_stream("ok")))
    run(server, temperature=0.2, max_tokens=500, headers={"x-extra": "1"})
    request = server.requests[0]
    assert request.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    assert request.headers["x-goog-api-key"] == KEY and request.headers["x-extra"] == "1"
    assert "key=" not in request.path  # the key travels in a header, never in the URL
    body = request.json
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Hi"}]}]
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["generationConfig"] == {
        "maxOutputTokens": 500,
        "temperature": 0.2,
        "thinkingConfig": {"thinkingBudget": 0},
    }


def test_thinking_then_text_keeps_thought_signatures(server):
    server.reply(
        frames(
            chunk({"text": "Counting the", "thought": True}),
            chunk({"text": " letters.", "thought": True, "thoughtSignature": "THOUGHT-SIG"}),
            chunk({"text": "There are 3."}),
            chunk({"text": "", "thoughtSignature": "TEXT-SIG"}, finish="STOP"),
        )
    )
    events, message = run(server, reasoning="medium")
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
    assert events[4].content == "Counting the letters."
    assert message.content == [
        ThinkingContent("Counting the letters.", "THOUGHT-SIG"),
        TextContent("There are 3.", "TEXT-SIG"),
    ]
    config = server.requests[0].json["generationConfig"]
    assert config["thinkingConfig"] == {"thinkingBudget": 8192, "includeThoughts": True}


def test_two_function_calls_arrive_whole_with_one_delta_each(server):
    server.reply(
        frames(
            chunk({"text": "Checking."}),
            chunk(
                {
                    "functionCall": {"name": "get_weather", "args": {"city": "Paris", "days": 3}},
                    "thoughtSignature": "CALL-SIG",
                },
                {"functionCall": {"name": "get_weather", "args": {"city": "Rome"}}},
                finish="STOP",
            ),
        )
    )
    events, message = run(server)
    assert event_types(events) == [
        "start",
        "text_start",
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    assert json.loads(events[5].delta) == {"city": "Paris", "days": 3}
    assert events[5].partial.content[1].arguments == {"city": "Paris", "days": 3}
    first, second = message.tool_calls
    assert (first.name, first.arguments, first.thought_signature) == (
        "get_weather",
        {"city": "Paris", "days": 3},
        "CALL-SIG",
    )
    assert (second.arguments, second.thought_signature) == ({"city": "Rome"}, None)
    assert first.id and second.id and first.id != second.id  # generated, unique in the message
    assert message.stop_reason == "toolUse" and events[-1].reason == "toolUse"


def test_function_call_id_from_the_api_is_kept(server):
    server.reply(frames(chunk({"functionCall": {"id": "fc-1", "name": "echo", "args": {}}}, finish="STOP")))
    _, message = run(server)
    assert message.tool_calls == [ToolCall("fc-1", "echo", {})]


def test_usage_with_cached_and_thought_tokens_gives_cost(server):
    usage = {
        "promptTokenCount": 1200,
        "cachedContentTokenCount": 1000,
        "candidatesTokenCount": 40,
        "thoughtsTokenCount": 60,
        "totalTokenCount": 1300,
    }
    server.reply(frames(chunk({"text": "a"}), chunk({"text": "b"}, finish="STOP", usage=usage)))
    _, message = run(server)
    u = message.usage
    assert (u.input, u.cache_read, u.output, u.cache_write) == (200, 1000, 100, 0)
    assert u.total_tokens == 1300
    assert u.cost.input == pytest.approx(200 * 0.3 / 1e6)
    assert u.cost.cache_read == pytest.approx(1000 * 0.075 / 1e6)
    assert u.cost.output == pytest.approx(100 * 2.5 / 1e6)
    assert u.cost.total == pytest.approx((60 + 75 + 250) / 1e6)


def test_max_tokens_finish_is_length(server):
    server.reply(frames(*text_stream("cut", finish="MAX_TOKENS")))
    events, message = run(server)
    assert events[-1].type == "done" and message.stop_reason == "length"


@pytest.mark.parametrize("reason", ["SAFETY", "RECITATION", "PROHIBITED_CONTENT", "MALFORMED_FUNCTION_CALL", "OTHER"])
def test_blocking_finish_reasons_are_errors_with_explanation(server, reason):
    server.reply(frames(*text_stream("partial", finish=reason)))
    events, message = run(server)
    assert events[-1].type == "error" and message.stop_reason == "error"
    assert reason in message.error_message
    assert message.content == [TextContent("partial")]


def test_blocked_prompt_without_candidates_is_an_error(server):
    server.reply(frames({"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": USAGE}))
    _, message = run(server)
    assert message.stop_reason == "error" and "blockReason: SAFETY" in message.error_message


# --------------------------------------------------------------------------- failures

JSON = {"Content-Type": "application/json"}


def error_body(code: int, status: str, text: str) -> bytes:
    return json.dumps({"error": {"code": code, "message": text, "status": status}}).encode()


@pytest.mark.parametrize("status, name", [(401, "UNAUTHENTICATED"), (400, "INVALID_ARGUMENT")])
def test_http_error_is_a_single_error_event_with_the_provider_text(server, status, name):
    server.reply(error_body(status, name, "something specific went wrong"), status, headers=JSON)
    events, message = run(server)
    assert event_types(events) == ["error"]
    assert str(status) in message.error_message and "something specific went wrong" in message.error_message
    assert len(server.requests) == 1


def test_error_body_as_a_list_is_read_too(server):
    body = json.dumps([{"error": {"code": 400, "message": "listed error", "status": "INVALID_ARGUMENT"}}]).encode()
    server.reply(body, 400, headers=JSON)
    _, message = run(server)
    assert "listed error" in message.error_message


def test_error_body_echoing_the_key_never_shows_it(server):
    server.reply(error_body(400, "INVALID_ARGUMENT", f"API key not valid: {KEY}"), 400, headers=JSON)
    _, message = run(server)
    assert KEY not in message.error_message and "[REDACTED]" in message.error_message
    assert KEY not in json.dumps(message.to_dict())


def test_missing_key_names_the_environment_variable(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    stream = stream_google(make_model("https://generativelanguage.invalid/v1beta"), hello(), StreamOptions())
    assert event_types(list(stream)) == ["error"]
    assert "GEMINI_API_KEY" in stream.result().error_message


def test_429_with_retry_after_is_retried_then_succeeds(server):
    server.reply(error_body(429, "RESOURCE_EXHAUSTED", "quota"), 429, headers={**JSON, "Retry-After": "0"})
    server.reply(frames(*text_stream("after retry")))
    events, message = run(server)
    assert message.text == "after retry" and len(server.requests) == 2
    assert event_types(events)[0] == "start"


def test_503_is_retried(server):
    server.reply(error_body(503, "UNAVAILABLE", "The model is overloaded"), 503, headers=JSON)
    server.reply(frames(*text_stream("fine")))
    _, message = run(server)
    assert message.text == "fine" and len(server.requests) == 2


def test_exhausted_retries_end_with_the_last_error(server):
    for _ in range(2):
        server.reply(error_body(503, "UNAVAILABLE", "The model is overloaded"), 503, headers=JSON)
    events, message = run(server, max_retries=1)
    assert event_types(events) == ["error"]
    assert "503" in message.error_message and "overloaded" in message.error_message
    assert len(server.requests) == 2


def test_connection_reset_mid_stream_keeps_partial_content(server):
    server.reply(frames(chunk({"text": "partial "}), chunk({"text": "text"})) + [RESET])
    events, message = run(server)
    assert message.stop_reason == "error" and message.error_message
    assert message.content == [TextContent("partial text")]
    assert events[0].type == "start" and events[-1].type == "error"


def test_stream_cut_before_finish_reason_is_an_error_with_partial_content(server):
    server.reply(frames(chunk({"text": "half"}), chunk({"text": " done"})))
    _, message = run(server)
    assert message.stop_reason == "error" and "finish reason" in message.error_message
    assert message.content == [TextContent("half done")]


def test_a_200_answer_that_is_not_an_event_stream_is_an_error(server):
    server.reply([b"<html>proxy page</html>"], headers={"Content-Type": "text/html"})
    _, message = run(server)
    assert message.stop_reason == "error" and "finish reason" in message.error_message


def test_invalid_json_chunk_is_an_error_keeping_partial_content(server):
    server.reply(frames(chunk({"text": "good"})) + [b'data: {"candidates": [{"content": \r\n\r\n'])
    _, message = run(server)
    assert message.stop_reason == "error" and "Invalid JSON" in message.error_message
    assert message.content == [TextContent("good")]


def test_in_stream_error_chunk_becomes_error_message(server):
    server.reply(
        frames(chunk({"text": "so far"}), {"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}})
    )
    _, message = run(server)
    assert message.stop_reason == "error" and "Internal error" in message.error_message
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
    stream = stream_google(make_model(server.url + "/v1beta"), hello(), options(signal=controller.signal))
    thread, seen, _ = consume_in_thread(stream)
    try:
        assert reply.received.wait(5)
        controller.abort()
        thread.join(5)
        assert not thread.is_alive()
    finally:
        release.set()
    assert event_types(seen) == ["error"]
    assert stream.result(timeout=1).stop_reason == "aborted"


def test_abort_mid_stream_returns_aborted_with_partial_content(server):
    release = threading.Event()
    server.reply(frames(chunk({"text": "first"})) + [Wait(release)] + frames(*text_stream("second")))
    controller = AbortController()
    stream = stream_google(make_model(server.url + "/v1beta"), hello(), options(signal=controller.signal))
    thread, seen, first_delta = consume_in_thread(stream)
    try:
        assert first_delta.wait(5)
        controller.abort()
        thread.join(5)
        assert not thread.is_alive()
    finally:
        release.set()
    message = stream.result(timeout=1)
    assert message.stop_reason == "aborted" and message.content == [TextContent("first")]
    assert event_types(seen) == ["start", "text_start", "text_delta", "error"]


# --------------------------------------------------------------------------- request building


def own(content: list[Any], model: Model, stop_reason: str = "toolUse") -> AssistantMessage:
    return AssistantMessage(content, api=model.api, provider=model.provider, model=model.id, stop_reason=stop_reason)


def test_history_maps_to_contents_with_merged_function_responses_and_images():
    model = make_model()
    context = Context(
        messages=[
            UserMessage([TextContent("Look"), ImageContent("aW1n", "image/png")]),
            own(
                [
                    ThinkingContent("hmm", "T-SIG"),
                    TextContent("Reading.", "X-SIG"),
                    ToolCall("c1", "read", {"path": "a.png"}, thought_signature="C-SIG"),
                    ToolCall("c2", "read", {"path": "b.txt"}),
                ],
                model,
            ),
            ToolResultMessage("c1", "read", [TextContent("an image:"), ImageContent("cG5n", "image/png")]),
            ToolResultMessage("c2", "read", [TextContent("no such file")], is_error=True),
            UserMessage("thanks"),
        ],
        tools=[
            Tool(
                "read",
                "Read a file",
                {
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {"path": {"type": "string", "default": "."}},
                },
            )
        ],
    )
    body = build_request(model, context, StreamOptions())
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Look"}, {"inlineData": {"mimeType": "image/png", "data": "aW1n"}}]},
        {
            "role": "model",
            "parts": [
                {"text": "hmm", "thought": True, "thoughtSignature": "T-SIG"},
                {"text": "Reading.", "thoughtSignature": "X-SIG"},
                {"functionCall": {"name": "read", "args": {"path": "a.png"}}, "thoughtSignature": "C-SIG"},
                {"functionCall": {"name": "read", "args": {"path": "b.txt"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "read", "response": {"output": "an image:"}}},
                {"inlineData": {"mimeType": "image/png", "data": "cG5n"}},
                {"functionResponse": {"name": "read", "response": {"error": "no such file"}}},
            ],
        },
        {"role": "user", "parts": [{"text": "thanks"}]},
    ]
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "read",
                    "description": "Read a file",
                    "parametersJsonSchema": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {"path": {"type": "string", "default": "."}},
                    },
                }
            ]
        }
    ]


def test_foreign_history_loses_signatures_and_gemini_3_calls_get_the_skip_marker():
    other = AssistantMessage(
        [ThinkingContent("deep", "SIG"), ToolCall("call_1", "echo", {"v": 1})],
        api="anthropic-messages",
        provider="anthropic",
        model="claude-x",
        stop_reason="toolUse",
    )
    context = Context(messages=[UserMessage("go"), other, ToolResultMessage("call_1", "echo", [TextContent("1")])])
    parts = build_request(make_model(), context, StreamOptions())["contents"][1]["parts"]
    assert parts == [{"text": "deep"}, {"functionCall": {"name": "echo", "args": {"v": 1}}}]
    gemini3_caps = get_model("google:gemini-3.5-flash").capabilities
    gemini3 = build_request(make_model(id="gemini-3.5-flash", capabilities=gemini3_caps), context, StreamOptions())
    assert gemini3["contents"][1]["parts"][1]["thoughtSignature"] == "skip_thought_signature_validator"


@pytest.mark.parametrize(
    "choice, expected",
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        ({"name": "echo"}, {"mode": "ANY", "allowedFunctionNames": ["echo"]}),
    ],
)
def test_tool_choice_maps_to_function_calling_config(choice, expected):
    context = Context(messages=[UserMessage("x")], tools=[Tool("echo", "Echo", {"type": "object", "properties": {}})])
    body = build_request(make_model(), context, StreamOptions(tool_choice=choice))
    assert body["toolConfig"] == {"functionCallingConfig": expected}


def test_thinking_configuration_per_model():
    context = Context(messages=[UserMessage("x")])

    def config(ref: str, **opts: Any) -> dict[str, Any]:
        return build_request(get_model(ref), context, StreamOptions(**opts))["generationConfig"]

    assert config("google:gemini-2.5-flash-lite")["thinkingConfig"] == {"thinkingBudget": 0}
    custom = config("google:gemini-2.5-flash-lite", reasoning="high", thinking_budgets={"high": 20000})
    assert custom["thinkingConfig"] == {"thinkingBudget": 20000, "includeThoughts": True}
    assert custom["maxOutputTokens"] == 32000
    plain = build_request(make_model(id="gemini-x", reasoning=False, capabilities=None), context, StreamOptions())
    assert "thinkingConfig" not in plain["generationConfig"]
