"""The chat-completions provider against a real HTTP server replaying OpenAI's wire format."""

from __future__ import annotations

import json

import pytest

from piagent import Agent
from piagent.ai import complete, stream, stream_simple
from piagent.ai.providers._servers import detect_server
from piagent.ai.providers.openai_completions import resolve_compat
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
from tests.ai.providers.openai_wire import chat_stream, chat_text, chunk, tool_delta, usage

KEY = "sk-test-completions-0123456789"
WEATHER = Tool("get_weather", "Weather for a city", {"type": "object", "properties": {"city": {"type": "string"}}})


def model_for(server, **fields) -> Model:
    values = dict(
        id="gpt-test",
        api="openai-completions",
        provider="openai",
        base_url=server.url + "/v1",
        cost=Cost(2.0, 8.0, 0.5, 0.0),
        context_window=128000,
        max_tokens=16384,
        input=["text", "image"],
    )
    values.update(fields)
    return Model(**values)


def ctx(*messages, system="You are terse.", tools=None) -> Context:
    return Context(system_prompt=system, messages=list(messages) or [UserMessage("Hi")], tools=tools)


def run(model, context, **options):
    return drain(stream(model, context, StreamOptions(api_key=KEY, **options)))


def test_text_stream_yields_the_exact_event_sequence_and_message(server):
    server.reply(chat_text("Hel", "lo", "!", usage_=usage(12, 3)))
    events, message = run(model_for(server), ctx())
    assert event_types(events) == ["start", "text_start", "text_delta", "text_delta", "text_delta", "text_end", "done"]
    assert [e.delta for e in events if e.type == "text_delta"] == ["Hel", "lo", "!"]
    assert events[5].content == "Hello!" and events[-1].reason == "stop"
    assert message.content == [TextContent("Hello!")]
    assert (message.api, message.provider, message.model) == ("openai-completions", "openai", "gpt-test")
    assert message.response_id == "chatcmpl-A1" and message.stop_reason == "stop"
    assert (message.usage.input, message.usage.output, message.usage.total_tokens) == (12, 3, 15)


@pytest.mark.parametrize("reported, recorded", [("gpt-test-2025-01-01", "gpt-test-2025-01-01"), ("gpt-test", None)])
def test_response_model_is_the_model_the_chunks_report_when_it_differs(server, reported, recorded):
    chunks = [
        chunk({"role": "assistant", "content": ""}, model=reported),
        chunk({"content": "ok"}, model=reported),
        chunk({}, "stop", model=reported),
    ]
    server.reply(chat_stream(*chunks))
    _, message = run(model_for(server), ctx())
    assert (message.stop_reason, message.model, message.response_model) == ("stop", "gpt-test", recorded)


def test_request_carries_bearer_key_and_openai_fields(server):
    server.reply(chat_text("ok"))
    run(model_for(server), ctx(UserMessage("Hi")), temperature=0.2, max_tokens=99)
    request = server.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.json == {
        "model": "gpt-test",
        "messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 99,
        "temperature": 0.2,
    }


def test_openai_host_differences_come_from_compat(server):
    server.reply(chat_text("ok"))
    compat = {
        "max_tokens_field": "max_completion_tokens",
        "supports_developer_role": True,
        "supports_prompt_cache_key": True,
        "supports_usage_in_streaming": False,
    }
    model = model_for(server, reasoning=True, compat=compat)
    run(model, ctx(), max_tokens=50, reasoning="xhigh", session_id="sess-1")
    body = server.requests[0].json
    assert body["messages"][0] == {"role": "developer", "content": "You are terse."}
    assert body["max_completion_tokens"] == 50 and "max_tokens" not in body
    assert body["reasoning_effort"] == "high"
    assert body["prompt_cache_key"] == "sess-1"
    assert "stream_options" not in body


def test_other_servers_get_no_openai_only_fields(server):
    server.reply(chat_text("ok"))
    run(model_for(server, reasoning=False), ctx(), reasoning="high", session_id="s")
    body = server.requests[0].json
    assert body["messages"][0]["role"] == "system"
    assert "reasoning_effort" not in body and "prompt_cache_key" not in body


def test_stream_simple_defaults_max_tokens(server):
    server.reply(chat_text("ok"))
    list(stream_simple(model_for(server, max_tokens=64000), ctx(), StreamOptions(api_key=KEY)))
    assert server.requests[0].json["max_tokens"] == 32000


def test_reasoning_content_becomes_a_thinking_block_before_the_text(server):
    server.reply(
        chat_stream(
            chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
            chunk({"content": None, "reasoning_content": "The user"}),
            chunk({"content": None, "reasoning_content": " greets."}),
            chunk({"content": "Hi", "reasoning_content": None}),
            chunk({"content": " there"}),
            chunk({"content": ""}, "stop", usage=usage(10, 7, reasoning=4)),
        )
    )
    events, message = run(model_for(server, reasoning=True), ctx())
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
    assert message.content == [ThinkingContent("The user greets.", "reasoning_content"), TextContent("Hi there")]
    assert message.usage.output == 7


def test_reasoning_field_of_openrouter_style_servers_is_thinking_too(server):
    server.reply(chat_stream(chunk({"reasoning": "hmm"}), chunk({"content": "A"}), chunk({}, "stop")))
    _, message = run(model_for(server), ctx())
    assert message.content == [ThinkingContent("hmm", "reasoning"), TextContent("A")]


def _parallel_calls(repeat_id_and_name: bool):
    def delta(index, id, name, args):
        if repeat_id_and_name:
            return tool_delta(index, id, name, args)
        return tool_delta(index, arguments=args)

    return chat_stream(
        chunk({"role": "assistant", "content": None}),
        tool_delta(0, "call_A", "get_weather", ""),
        delta(0, "call_A", "get_weather", '{"ci'),
        tool_delta(1, "call_B", "get_weather", ""),
        delta(0, "call_A", "get_weather", 'ty": "Par'),
        delta(1, "call_B", "get_weather", '{"city"'),
        delta(0, "call_A", "get_weather", 'is"}'),
        delta(1, "call_B", "get_weather", ': "Oslo"}'),
        chunk({}, "tool_calls"),
        chunk(choices=False, usage=usage(30, 20)),
    )


@pytest.mark.parametrize("repeat", [False, True], ids=["openai", "llama.cpp-repeats-id-and-name"])
def test_parallel_tool_calls_with_split_arguments(server, repeat):
    server.reply(_parallel_calls(repeat))
    events, message = run(model_for(server), ctx(tools=[WEATHER]))
    assert event_types(events) == [
        "start",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_delta",
        "toolcall_end",
        "toolcall_end",
        "done",
    ]
    assert [e.content_index for e in events if e.type == "toolcall_delta"] == [0, 0, 1, 0, 1]
    assert message.content == [
        ToolCall("call_A", "get_weather", {"city": "Paris"}),
        ToolCall("call_B", "get_weather", {"city": "Oslo"}),
    ]
    assert [e.tool_call.id for e in events if e.type == "toolcall_end"] == ["call_A", "call_B"]
    assert message.stop_reason == "toolUse"
    partial_args = [
        e.partial.content[0].arguments for e in events if e.type == "toolcall_delta" and e.content_index == 0
    ]
    assert isinstance(partial_args[0], dict)


def test_text_and_tool_call_blocks_interleave_and_close_in_content_order(server):
    server.reply(
        chat_stream(
            chunk({"content": "Let me check"}),
            tool_delta(0, "call_1", "get_weather", '{"city":'),
            chunk({"content": "."}),
            tool_delta(0, arguments='"Rome"}'),
            chunk({}, "tool_calls"),
        )
    )
    events, message = run(model_for(server), ctx(tools=[WEATHER]))
    assert event_types(events) == [
        "start",
        "text_start",
        "text_delta",
        "toolcall_start",
        "toolcall_delta",
        "text_delta",
        "toolcall_delta",
        "text_end",
        "toolcall_end",
        "done",
    ]
    assert message.content == [TextContent("Let me check."), ToolCall("call_1", "get_weather", {"city": "Rome"})]


def test_finish_reason_stop_with_tool_calls_means_tool_use(server):
    server.reply(chat_stream(tool_delta(0, "c", "get_weather", "{}"), chunk({}, "stop")))
    _, message = run(model_for(server), ctx(tools=[WEATHER]))
    assert message.stop_reason == "toolUse"


def test_cached_tokens_are_split_out_and_cost_uses_model_prices(server):
    server.reply(chat_text("ok", usage_=usage(prompt=1000, completion=200, cached=600)))
    _, message = run(model_for(server), ctx())
    u = message.usage
    assert (u.input, u.cache_read, u.output, u.total_tokens) == (400, 600, 200, 1200)
    assert u.cost.input == pytest.approx(400 * 2.0 / 1e6)
    assert u.cost.cache_read == pytest.approx(600 * 0.5 / 1e6)
    assert u.cost.output == pytest.approx(200 * 8.0 / 1e6)
    assert u.cost.total == pytest.approx((800 + 300 + 1600) / 1e6)


def test_usage_inside_the_last_choice_is_read(server):
    last = chunk({}, "stop")
    last["choices"][0]["usage"] = usage(5, 2)
    server.reply(chat_stream(chunk({"content": "x"}), last))
    _, message = run(model_for(server), ctx())
    assert (message.usage.input, message.usage.output) == (5, 2)


def test_missing_usage_gives_zeros(server):
    server.reply(chat_stream(chunk({"content": "x"}), chunk({}, "stop")))
    _, message = run(model_for(server), ctx())
    assert message.stop_reason == "stop" and message.usage.total_tokens == 0 and message.usage.cost.total == 0


@pytest.mark.parametrize("finish, reason", [("length", "length"), ("function_call", "toolUse"), ("stop", "stop")])
def test_finish_reason_mapping(server, finish, reason):
    server.reply(chat_stream(chunk({"content": "x"}), chunk({}, finish)))
    _, message = run(model_for(server), ctx())
    assert message.stop_reason == reason


def test_content_filter_is_an_error_with_an_explanation(server):
    server.reply(chat_stream(chunk({"content": "partial"}), chunk({}, "content_filter")))
    events, message = run(model_for(server), ctx())
    assert events[-1].type == "error" and message.stop_reason == "error"
    assert "content filter" in message.error_message
    assert message.text == "partial"


def test_history_is_serialised_in_chat_format(server):
    server.reply(chat_text("done"))
    model = model_for(server)
    image = ImageContent("aW1n", "image/png")
    assistant = AssistantMessage(
        [
            ThinkingContent("plan", "reasoning_content"),
            TextContent("Checking."),
            ToolCall("call_1", "get_weather", {"city": "Paris"}),
            ToolCall("call_2", "get_weather", {"city": "Oslo"}),
        ],
        api=model.api,
        provider=model.provider,
        model=model.id,
        stop_reason="toolUse",
    )
    history = [
        UserMessage([TextContent("Weather?"), image]),
        assistant,
        ToolResultMessage("call_1", "get_weather", [TextContent("Sunny"), image]),
        ToolResultMessage("call_2", "get_weather", [TextContent("boom")], is_error=True),
        UserMessage("thanks"),
    ]
    run(model, ctx(*history, tools=[WEATHER]), tool_choice={"name": "get_weather"})
    body = server.requests[0].json
    data_url = "data:image/png;base64,aW1n"
    assert body["messages"][1:] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Weather?"}, {"type": "image_url", "image_url": {"url": data_url}}],
        },
        {
            "role": "assistant",
            "content": "Checking.",
            "reasoning_content": "plan",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "boom"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Attached image(s) from tool result:"},
                {"type": "image_url", "image_url": {"url": data_url}},
            ],
        },
        {"role": "user", "content": "thanks"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "get_weather", "description": "Weather for a city", "parameters": WEATHER.parameters},
        }
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}


def test_a_user_message_of_text_only_goes_as_a_string(server):
    """``Agent.prompt("...")`` makes a user message of one text block. Sent as a list of parts,
    llama-cpp-python's server showed the model ``[{'type': 'text', ...}]`` (chatml-function-calling),
    nothing (chatml) or failed rendering the GGUF's own template mid-stream; a string is read alike
    by every server. Text blocks are joined as ``message.text`` joins them; an image keeps the parts."""
    for _ in range(3):
        server.reply(chat_text("ok"))
    agent = Agent(model=model_for(server), get_api_key=lambda provider: KEY)
    assert agent.prompt("Read notes.txt").stop_reason == "stop"
    agent.prompt(UserMessage([TextContent("Read "), TextContent("todo.txt")]))
    agent.prompt("And this:", images=[ImageContent("aW1n", "image/png")])
    sent = [r.json["messages"][-1]["content"] for r in server.requests]
    assert sent[:2] == ["Read notes.txt", "Read todo.txt"]
    assert sent[2][0] == {"type": "text", "text": "And this:"} and sent[2][1]["type"] == "image_url"


def sent_tool_only_content(server, model) -> object:
    """The ``content`` piagent sends for an assistant message that only called a tool."""
    server.reply(chat_text("done"))
    call = AssistantMessage(
        [ToolCall("call_1", "get_weather", {"city": "Paris"})],
        api=model.api,
        provider=model.provider,
        model=model.id,
        stop_reason="toolUse",
    )
    run(model, ctx(UserMessage("Weather?"), call, ToolResultMessage("call_1", "get_weather", [TextContent("Sunny")])))
    return server.requests[-1].json["messages"][2]["content"]


@pytest.mark.parametrize("null_ok, content", [(True, None), (False, "")])
def test_compat_decides_null_or_empty_content_for_a_tool_only_message(server, null_ok, content):
    assert sent_tool_only_content(server, model_for(server, compat={"supports_null_content": null_ok})) == content


@pytest.mark.parametrize(
    "provider, content",
    [
        ("local", ""),  # an unknown server: the form every common server accepts
        ("my-gateway", ""),
        ("ollama", ""),  # rejects null: "invalid message content type: <nil>"
        ("lmstudio", ""),
        ("llama.cpp", ""),  # llama-cpp-python's server answers 500 to null
        ("vllm", None),  # follows OpenAI's schema
    ],
)
def test_the_default_content_of_a_tool_only_message_suits_the_server(server, provider, content):
    assert sent_tool_only_content(server, model_for(server, provider=provider)) == content


@pytest.mark.parametrize(
    "base_url, server_name",
    [
        ("https://api.openai.com/v1", "openai"),
        ("http://localhost:11434/v1", "ollama"),
        ("http://127.0.0.1:1234/v1", "lmstudio"),
        ("http://localhost:8000/v1", "vllm"),
        ("http://127.0.0.1:8080/v1", None),  # llama.cpp's port, shared by too many servers to tell
        ("http://gpu-box:11434/v1", None),  # a default port means something only on this machine
        ("http://[bad", None),
    ],
)
def test_a_local_server_without_a_provider_name_is_known_by_its_default_port(base_url, server_name):
    model = Model(id="m", api="openai-completions", provider="local", base_url=base_url)
    assert detect_server(model) == server_name


def test_model_compat_overrides_the_detected_server():
    model = Model(id="m", api="openai-completions", provider="ollama", base_url="http://localhost:11434/v1")
    assert resolve_compat(model)["supports_null_content"] is False
    model.compat = {"supports_null_content": True}
    assert resolve_compat(model)["supports_null_content"] is True


def test_foreign_history_is_normalised_for_this_api(server):
    server.reply(chat_text("ok"))
    foreign = AssistantMessage(
        [ThinkingContent("I think", "sig"), ToolCall("call_x|fc_yyy", "get_weather", {}, thought_signature="t")],
        api="openai-responses",
        provider="openai",
        model="gpt-5",
        stop_reason="toolUse",
    )
    history = [UserMessage("q"), foreign, ToolResultMessage("call_x|fc_yyy", "get_weather", [TextContent("r")])]
    run(model_for(server), ctx(*history), tool_choice="required")
    body = server.requests[0].json
    assert body["messages"][2] == {
        "role": "assistant",
        "content": "I think",
        "tool_calls": [{"id": "call_x", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}],
    }
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_x", "content": "r"}
    assert body["tool_choice"] == "required"


def test_mistral_servers_get_nine_character_ids_and_tool_names(server):
    server.reply(chat_text("ok"))
    model = model_for(server, compat={"tool_call_ids": "mistral", "tool_result_name": True})
    foreign = AssistantMessage(
        [ToolCall("toolu_01ABCDEFGHJK", "get_weather", {})],
        api="anthropic-messages",
        provider="anthropic",
        model="claude",
        stop_reason="toolUse",
    )
    run(
        model,
        ctx(UserMessage("q"), foreign, ToolResultMessage("toolu_01ABCDEFGHJK", "get_weather", [TextContent("r")])),
    )
    messages = server.requests[0].json["messages"]
    assert messages[2]["tool_calls"][0]["id"] == "1ABCDEFGHJK"[-9:]
    assert messages[3] == {"role": "tool", "tool_call_id": "1ABCDEFGHJK"[-9:], "content": "r", "name": "get_weather"}


def test_on_payload_replacement_is_what_gets_sent(server):
    server.reply(chat_text("ok"))
    seen = []

    def on_payload(payload, model):
        seen.append(payload["model"])
        return dict(payload, user="u-1")

    run(model_for(server), ctx(), on_payload=on_payload)
    assert seen == ["gpt-test"] and server.requests[0].json["user"] == "u-1"


def test_on_response_sees_status_and_headers(server):
    server.reply(chat_text("ok"), headers={"Content-Type": "text/event-stream", "x-request-id": "req-9"})
    responses = []
    run(model_for(server), ctx(), on_response=lambda r, m: responses.append(r))
    assert responses[0]["status"] == 200 and responses[0]["headers"]["x-request-id"] == "req-9"


def test_keyless_local_server_gets_no_authorization_header(server):
    server.reply(chat_text("ok"))
    model = model_for(server, provider="ollama")
    message = complete(model, ctx())
    assert message.text == "ok"
    assert "authorization" not in server.requests[0].headers


def test_invalid_tool_choice_is_reported_in_the_stream(server):
    events, message = run(model_for(server), ctx(), tool_choice="any")
    assert event_types(events) == ["error"] and "Invalid tool_choice" in message.error_message
    assert server.requests == []


def test_json_tool_arguments_survive_a_round_trip(server):
    args = {"city": "Zürich", "nested": {"list": [1, 2.5, None, True]}}
    text = json.dumps(args)
    server.reply(
        chat_stream(
            *[tool_delta(0, "c1", "get_weather", text[:5])]
            + [tool_delta(0, arguments=text[i : i + 3]) for i in range(5, len(text), 3)],
            chunk({}, "tool_calls"),
        )
    )
    _, message = run(model_for(server), ctx(tools=[WEATHER]))
    assert message.tool_calls[0].arguments == args
