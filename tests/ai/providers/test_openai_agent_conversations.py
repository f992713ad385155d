"""End to end: the agent loop holds a multi-turn tool conversation over each OpenAI API,
against a local server replaying that API's wire format."""

from __future__ import annotations

import json
from typing import Any

from piagent import AgentContext, AgentLoopConfig, UserMessage, run_agent_loop
from piagent.ai import Cost, Model
from tests.ai.providers.helpers import add_tool
from tests.ai.providers.openai_wire import ResponsesStream, chat_stream, chat_text, chunk, tool_delta, usage
from tests.support.scripted_server import ScriptedServer

KEY = "sk-e2e-0123456789abcdef"


def converse(model: Model) -> list[list[Any]]:
    """Two prompts in one conversation: the first needs two parallel tool calls, the second none."""
    calls: list[dict[str, Any]] = []
    config = AgentLoopConfig(model=model, api_key=KEY, max_retry_delay_ms=20)
    context = AgentContext("You add numbers.", [], [add_tool(calls)])
    runs = []
    for prompt in ("What is 2 + 3 and 4 + 5?", "Thanks!"):
        new = run_agent_loop([UserMessage(prompt)], context, config, lambda event: None)
        context.messages.extend(new)
        runs.append(new)
    assert sorted(calls, key=lambda a: a["a"]) == [{"a": 2, "b": 3}, {"a": 4, "b": 5}]
    return runs


def test_chat_completions_tool_conversation_over_two_prompts():
    with ScriptedServer() as server:
        model = Model(
            "deepseek-test",
            api="openai-completions",
            provider="deepseek",
            base_url=server.url,
            reasoning=True,
            cost=Cost(0.28, 0.42, 0.028),
            max_tokens=8192,
        )
        server.reply(
            chat_stream(
                chunk({"role": "assistant", "content": None, "reasoning_content": "Two sums."}),
                tool_delta(0, "call_1", "add", '{"a": 2,'),
                tool_delta(1, "call_2", "add", '{"a": 4,'),
                tool_delta(0, arguments=' "b": 3}'),
                tool_delta(1, arguments=' "b": 5}'),
                chunk({}, "tool_calls", usage=usage(50, 30, cached=32)),
            )
        )
        server.reply(chat_text("5 and 9."))
        server.reply(chat_text("You're welcome."))
        first, second = converse(model)
        bodies = [r.json for r in server.requests]

    assert [m.role for m in first] == ["user", "assistant", "toolResult", "toolResult", "assistant"]
    assert [r.text for r in first[2:4]] == ["5", "9"] and first[-1].text == "5 and 9."
    assert first[1].usage.cache_read == 32 and first[1].usage.cost.total > 0
    assert second[-1].text == "You're welcome."
    # the second request answers both calls and replays the thinking in the field it came in
    assert bodies[1]["messages"][2:] == [
        {
            "role": "assistant",
            "content": "",  # what servers other than OpenAI/vLLM get (docs/servers.md)
            "reasoning_content": "Two sums.",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}},
                {"id": "call_2", "type": "function", "function": {"name": "add", "arguments": '{"a": 4, "b": 5}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "5"},
        {"role": "tool", "tool_call_id": "call_2", "content": "9"},
    ]
    assert [m["role"] for m in bodies[2]["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
    ]
    assert bodies[2]["tools"][0]["function"]["name"] == "add"


def test_responses_tool_conversation_over_two_prompts():
    with ScriptedServer() as server:
        model = Model(
            "gpt-5-test",
            api="openai-responses",
            provider="openai",
            base_url=server.url + "/v1",
            reasoning=True,
            cost=Cost(1.25, 10.0, 0.125),
            max_tokens=128000,
        )
        s = ResponsesStream("resp_1").created()
        s.reasoning(0, "rs_1", [["Two sums."]], encrypted="ENC-1")
        s.call_added(1, "fc_1", "call_1", "add").call_delta(1, "fc_1", '{"a": 2,').call_delta(1, "fc_1", ' "b": 3}')
        s.call_done(1, "fc_1", "call_1", "add", '{"a": 2, "b": 3}')
        s.call_added(2, "fc_2", "call_2", "add").call_delta(2, "fc_2", '{"a": 4, "b": 5}')
        s.call_done(2, "fc_2", "call_2", "add", '{"a": 4, "b": 5}')
        server.reply(s.completed().frames())
        server.reply(ResponsesStream("resp_2").created().message(0, "msg_2", "5 and 9.").completed().frames())
        server.reply(ResponsesStream("resp_3").created().message(0, "msg_3", "You're welcome.").completed().frames())
        first, second = converse(model)
        bodies = [r.json for r in server.requests]

    assert [m.role for m in first] == ["user", "assistant", "toolResult", "toolResult", "assistant"]
    assert first[1].stop_reason == "toolUse" and first[1].response_id == "resp_1"
    assert first[-1].text == "5 and 9." and second[-1].text == "You're welcome."
    replay = bodies[1]["input"][1:]
    assert replay[0]["type"] == "reasoning" and replay[0]["encrypted_content"] == "ENC-1"
    assert replay[1:] == [
        {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": '{"a": 2, "b": 3}', "id": "fc_1"},
        {"type": "function_call", "call_id": "call_2", "name": "add", "arguments": '{"a": 4, "b": 5}', "id": "fc_2"},
        {"type": "function_call_output", "call_id": "call_1", "output": "5"},
        {"type": "function_call_output", "call_id": "call_2", "output": "9"},
    ]
    third = bodies[2]["input"]
    assert third[-2]["id"] == "msg_2" and third[-1] == {
        "role": "user",
        "content": [{"type": "input_text", "text": "Thanks!"}],
    }
    assert json.dumps(bodies[2]).count("ENC-1") == 1


# --------------------------------------------------------------------------- through the Agent class


def test_agent_talks_to_a_local_openai_compatible_server_by_model_string():
    from piagent import Agent
    from piagent.ai.models import custom_model, unregister_model

    calls: list[dict[str, Any]] = []
    with ScriptedServer() as server:
        custom_model("llama-e2e:8b", base_url=server.url + "/v1", provider="ollama")
        try:
            server.reply(chat_stream(tool_delta(0, "call_9", "add", '{"a": 2, "b": 3}'), chunk({}, "tool_calls")))
            server.reply(chat_text("5."))
            server.reply(chat_text("Bye."))
            agent = Agent(model="ollama:llama-e2e:8b", system_prompt="You add numbers.", tools=[add_tool(calls)])
            first = agent.prompt("What is 2 + 3?")
            second = agent.prompt("Bye")
        finally:
            unregister_model("ollama", "llama-e2e:8b")
        requests = server.requests

    assert calls == [{"a": 2, "b": 3}]
    assert (first.text, first.stop_reason, second.text) == ("5.", "stop", "Bye.")
    assert all("authorization" not in r.headers for r in requests)  # a local server needs no key
    assert [m["role"] for m in requests[2].json["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert [m.role for m in agent.state.messages] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "user",
        "assistant",
    ]


def test_agent_abort_mid_stream_over_responses_then_the_next_prompt_works():
    import threading

    from piagent import Agent
    from tests.support.scripted_server import Wait

    gate = threading.Event()
    streaming = threading.Event()
    with ScriptedServer() as server:
        model = Model("gpt-5-test", api="openai-responses", provider="openai", base_url=server.url + "/v1")
        head = ResponsesStream().created()
        head.add(
            "response.output_item.added",
            output_index=0,
            item={"id": "msg_1", "type": "message", "status": "in_progress", "content": [], "role": "assistant"},
        )
        head.add("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0, delta="Once upon")
        server.reply(head.frames() + [Wait(gate)])
        server.reply(ResponsesStream("resp_2").created().message(0, "msg_2", "Short answer.").completed().frames())
        agent = Agent(model=model, get_api_key=lambda provider: KEY)

        def on_event(event: Any) -> None:
            if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
                streaming.set()

        agent.subscribe(on_event)
        try:
            future = agent.prompt("Tell me a long story", wait=False)
            assert streaming.wait(5)
            agent.abort()
            aborted = future.result(timeout=5)
        finally:
            gate.set()
        after = agent.prompt("Then a short one")
        second_input = server.requests[1].json["input"]

    assert aborted.stop_reason == "aborted" and aborted.error_message == "Request was aborted"
    assert aborted.messages[-1].text == "Once upon"  # partial content kept in the transcript
    assert after.text == "Short answer." and after.stop_reason == "stop"
    # the aborted answer is not sent back: the model sees both user prompts only
    assert [item["content"][0]["text"] for item in second_input] == ["Tell me a long story", "Then a short one"]
