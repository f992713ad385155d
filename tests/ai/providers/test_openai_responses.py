"""The responses-API provider against a real HTTP server replaying OpenAI's wire format."""

from __future__ import annotations

import json

import pytest

from piagent.ai import Capabilities, stream, stream_simple
from piagent.ai.types import (
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
)
from tests.ai.providers.helpers import drain, event_types
from tests.ai.providers.openai_wire import ResponsesStream, responses_text

KEY = "sk-test-responses-0123456789"
WEATHER = Tool("get_weather", "Weather for a city", {"type": "object", "properties": {"city": {"type": "string"}}})


def model_for(server, **fields) -> Model:
    values = dict(
        id="gpt-5-test",
        api="openai-responses",
        provider="openai",
        base_url=server.url + "/v1",
        cost=Cost(1.25, 10.0, 0.125, 0.0),
        context_window=400000,
        max_tokens=128000,
        input=["text", "image"],
    )
    values.update(fields)
    return Model(**values)


def ctx(*messages, system="Be brief.", tools=None) -> Context:
    return Context(system_prompt=system, messages=list(messages) or [UserMessage("Hi")], tools=tools)


def run(model, context, **options):
    return drain(stream(model, context, StreamOptions(api_key=KEY, **options)))


def test_text_stream_yields_the_exact_event_sequence_and_message(server):
    server.reply(responses_text("Hel", "lo"))
    events, message = run(model_for(server), ctx())
    assert event_types(events) == ["start", "text_start", "text_delta", "text_delta", "text_end", "done"]
    assert events[4].content == "Hello"
    assert message.content == [TextContent("Hello", text_signature="msg_01")]
    assert message.response_id == "resp_01" and message.stop_reason == "stop"
    assert (message.usage.input, message.usage.output) == (20, 5)


@pytest.mark.parametrize(
    "reported, recorded", [("gpt-5-test-2026-08-07", "gpt-5-test-2026-08-07"), ("gpt-5-test", None)]
)
def test_response_model_is_the_model_the_response_object_reports_when_it_differs(server, reported, recorded):
    server.reply(ResponsesStream(model=reported).created().message(0, "msg_01", "ok").completed().frames())
    _, message = run(model_for(server), ctx())
    assert (message.stop_reason, message.model, message.response_model) == ("stop", "gpt-5-test", recorded)


def test_request_has_instructions_input_items_and_bearer_key(server):
    server.reply(responses_text("ok"))
    run(model_for(server, reasoning=False), ctx(UserMessage("Hi")), max_tokens=77, temperature=0.5)
    request = server.requests[0]
    assert request.path == "/v1/responses"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json == {
        "model": "gpt-5-test",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
        "stream": True,
        "store": False,
        "instructions": "Be brief.",
        "max_output_tokens": 77,
        "temperature": 0.5,
    }


def test_reasoning_models_request_encrypted_reasoning_and_effort(server):
    server.reply(responses_text("ok"))
    gpt5 = Capabilities(thinking="effort", efforts=("minimal", "low", "medium", "high"), thinking_off=None)
    run(
        model_for(server, reasoning=True, capabilities=gpt5),
        ctx(tools=[WEATHER]),
        reasoning="minimal",
        session_id="sess-7",
        tool_choice={"name": "get_weather"},
    )
    body = server.requests[0].json
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["reasoning"] == {"effort": "minimal", "summary": "auto"}
    assert body["prompt_cache_key"] == "sess-7"
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": WEATHER.parameters,
            "strict": False,
        }
    ]
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}


def test_minimal_effort_becomes_low_for_a_reasoning_model_declared_without_capabilities(server):
    server.reply(responses_text("ok"))
    run(model_for(server, id="o4-mini", reasoning=True), ctx(), reasoning="minimal", tool_choice="none")
    body = server.requests[0].json
    assert body["reasoning"]["effort"] == "low" and body["tool_choice"] == "none"


def test_stream_simple_defaults_max_output_tokens(server):
    server.reply(responses_text("ok"))
    list(stream_simple(model_for(server), ctx(), StreamOptions(api_key=KEY)))
    assert server.requests[0].json["max_output_tokens"] == 32000


def test_reasoning_summary_becomes_thinking_with_the_item_as_signature(server):
    s = ResponsesStream().created()
    s.reasoning(0, "rs_1", [["**Plan**", " first"], ["then", " answer"]], encrypted="gAAAA-encrypted")
    s.message(1, "msg_2", "Done.")
    server.reply(s.completed(output_tokens=40).frames())
    events, message = run(model_for(server, reasoning=True), ctx())
    assert event_types(events) == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "thinking_delta",
        "thinking_delta",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_end",
        "done",
    ]
    thinking = message.content[0]
    assert thinking.thinking == "**Plan** first\n\nthen answer"
    item = json.loads(thinking.thinking_signature)
    assert item["type"] == "reasoning" and item["id"] == "rs_1" and item["encrypted_content"] == "gAAAA-encrypted"
    assert message.content[1] == TextContent("Done.", "msg_2")


def test_parallel_function_calls_with_split_arguments(server):
    s = ResponsesStream().created()
    s.call_added(0, "fc_A", "call_A", "get_weather")
    s.call_delta(0, "fc_A", '{"ci')
    s.call_delta(0, "fc_A", 'ty": "Par')
    s.call_delta(0, "fc_A", 'is"}')
    s.call_done(0, "fc_A", "call_A", "get_weather", '{"city": "Paris"}')
    s.call_added(1, "fc_B", "call_B", "get_weather")
    s.call_delta(1, "fc_B", '{"city":')
    s.call_delta(1, "fc_B", ' "Oslo"}')
    s.call_done(1, "fc_B", "call_B", "get_weather", '{"city": "Oslo"}')
    server.reply(s.completed().frames())
    events, message = run(model_for(server), ctx(tools=[WEATHER]))
    assert event_types(events) == [
        "start",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_end",
        "done",
    ]
    assert message.content == [
        ToolCall("call_A|fc_A", "get_weather", {"city": "Paris"}),
        ToolCall("call_B|fc_B", "get_weather", {"city": "Oslo"}),
    ]
    assert message.stop_reason == "toolUse"


def test_cached_tokens_are_split_out_and_cost_uses_model_prices(server):
    server.reply(
        ResponsesStream()
        .created()
        .message(0, "m", "ok")
        .completed(input_tokens=5000, output_tokens=300, cached=4000)
        .frames()
    )
    _, message = run(model_for(server), ctx())
    u = message.usage
    assert (u.input, u.cache_read, u.output, u.total_tokens) == (1000, 4000, 300, 5300)
    assert u.cost.total == pytest.approx((1000 * 1.25 + 4000 * 0.125 + 300 * 10.0) / 1e6)


def test_incomplete_for_max_output_tokens_is_length(server):
    s = ResponsesStream().created().message(0, "m", "cut")
    server.reply(s.completed(status="incomplete", incomplete_reason="max_output_tokens").frames())
    _, message = run(model_for(server), ctx())
    assert message.stop_reason == "length" and message.text == "cut"


def test_incomplete_for_content_filter_is_an_error(server):
    s = ResponsesStream().created().message(0, "m", "cut")
    server.reply(s.completed(status="incomplete", incomplete_reason="content_filter").frames())
    events, message = run(model_for(server), ctx())
    assert events[-1].type == "error" and "content filter" in message.error_message


def test_response_failed_is_an_error_with_the_provider_message(server):
    s = ResponsesStream().created().message(0, "m", "part")
    s.add(
        "response.failed", response=s.response("failed", error={"code": "server_error", "message": "Something broke"})
    )
    server.reply(s.frames())
    events, message = run(model_for(server), ctx())
    assert events[-1].type == "error"
    assert message.error_message == "Provider error: Something broke" and message.text == "part"


def test_same_model_history_is_replayed_item_for_item(server):
    server.reply(responses_text("ok"))
    model = model_for(server, reasoning=True)
    reasoning_item = {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "plan"}],
        "encrypted_content": "gAAAA",
    }
    image = ImageContent("aW1n", "image/jpeg")
    assistant = AssistantMessage(
        [
            ThinkingContent("plan", json.dumps(reasoning_item)),
            TextContent("Checking.", "msg_1"),
            ToolCall("call_A|fc_A", "get_weather", {"city": "Paris"}),
        ],
        api=model.api,
        provider=model.provider,
        model=model.id,
        stop_reason="toolUse",
    )
    history = [
        UserMessage([TextContent("Weather?"), image]),
        assistant,
        ToolResultMessage("call_A|fc_A", "get_weather", [TextContent("Sunny"), image]),
    ]
    run(model, ctx(*history))
    data_url = "data:image/jpeg;base64,aW1n"
    assert server.requests[0].json["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Weather?"},
                {"type": "input_image", "image_url": data_url, "detail": "auto"},
            ],
        },
        reasoning_item,
        {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_A",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
            "id": "fc_A",
        },
        {"type": "function_call_output", "call_id": "call_A", "output": "Sunny"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "Attached image(s) from tool result:"},
                {"type": "input_image", "image_url": data_url, "detail": "auto"},
            ],
        },
    ]


def test_foreign_history_drops_what_only_its_producer_can_read(server):
    server.reply(responses_text("ok"))
    foreign = AssistantMessage(
        [
            ThinkingContent("thought", "anthropic-signature"),
            TextContent("Sure.", "sig"),
            ToolCall("toolu_01:weird.id", "get_weather", {}, thought_signature="x"),
        ],
        api="anthropic-messages",
        provider="anthropic",
        model="claude",
        stop_reason="toolUse",
    )
    aborted = AssistantMessage(
        [TextContent("half")], api="openai-responses", provider="openai", model="gpt-5-test", stop_reason="aborted"
    )
    history = [
        UserMessage("q"),
        foreign,
        ToolResultMessage("toolu_01:weird.id", "get_weather", [TextContent("r")]),
        aborted,
    ]
    run(model_for(server), ctx(*history))
    assert server.requests[0].json["input"][1:] == [
        {"role": "assistant", "content": "thought"},
        {"role": "assistant", "content": "Sure."},
        {"type": "function_call", "call_id": "toolu_01_weird_id", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "toolu_01_weird_id", "output": "r"},
    ]


def test_text_only_model_gets_image_placeholders(server):
    server.reply(responses_text("ok"))
    run(model_for(server, input=["text"]), ctx(UserMessage([ImageContent("aW1n", "image/png")])))
    content = server.requests[0].json["input"][0]["content"]
    assert content == [{"type": "input_text", "text": "[image omitted: this model does not accept images]"}]


def test_text_from_the_done_item_is_used_when_no_delta_arrived(server):
    s = ResponsesStream().created()
    s.add(
        "response.output_item.added",
        output_index=0,
        item={"id": "m", "type": "message", "content": [], "role": "assistant"},
    )
    s.add(
        "response.output_item.done",
        output_index=0,
        item={
            "id": "m",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "whole", "annotations": []}],
        },
    )
    server.reply(s.completed().frames())
    _, message = run(model_for(server), ctx())
    assert message.text == "whole"


def test_unknown_output_items_are_skipped(server):
    s = ResponsesStream().created()
    s.add(
        "response.output_item.added",
        output_index=0,
        item={"id": "ws_1", "type": "web_search_call", "status": "in_progress"},
    )
    s.add(
        "response.output_item.done",
        output_index=0,
        item={"id": "ws_1", "type": "web_search_call", "status": "completed"},
    )
    s.message(1, "m", "found")
    server.reply(s.completed().frames())
    events, message = run(model_for(server), ctx())
    assert message.content == [TextContent("found", "m")]
    assert event_types(events) == ["start", "text_start", "text_delta", "text_end", "done"]


def test_refusal_and_raw_reasoning_text_deltas_stream_as_text_and_thinking(server):
    s = ResponsesStream().created()
    s.add("response.output_item.added", output_index=0, item={"id": "rs", "type": "reasoning", "summary": []})
    s.add("response.reasoning_text.delta", item_id="rs", output_index=0, content_index=0, delta="Think")
    s.add("response.reasoning_text.delta", item_id="rs", output_index=0, content_index=0, delta="ing.")
    s.add("response.output_item.done", output_index=0, item={"id": "rs", "type": "reasoning", "summary": []})
    s.add(
        "response.output_item.added",
        output_index=1,
        item={"id": "m", "type": "message", "content": [], "role": "assistant"},
    )
    s.add("response.refusal.delta", item_id="m", output_index=1, content_index=0, delta="I can't")
    s.add("response.refusal.delta", item_id="m", output_index=1, content_index=0, delta=" help.")
    s.add(
        "response.output_item.done",
        output_index=1,
        item={
            "id": "m",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "refusal", "refusal": "I can't help."}],
        },
    )
    server.reply(s.completed().frames())
    events, message = run(model_for(server), ctx())
    assert event_types(events) == [
        "start",
        "thinking_start",
        "thinking_delta",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
        "done",
    ]
    assert message.content[0].thinking == "Thinking." and message.text == "I can't help."
