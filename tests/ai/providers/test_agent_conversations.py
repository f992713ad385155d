"""End to end: the agent loop holds a multi-turn tool conversation with each real provider,
spoken to over HTTP against a local server replaying that API's wire format."""

from __future__ import annotations

import json
import threading
from typing import Any

from piagent import Agent, AgentContext, AgentLoopConfig, UserMessage, run_agent_loop
from piagent.ai import Cost, Model
from tests.ai.providers.helpers import add_tool
from tests.support.scripted_server import RESET, ScriptedServer, Wait

KEY = "test-key-0123456789abcdef"


def converse(model: Model, server: ScriptedServer, calls: list[dict[str, Any]]) -> list[list[Any]]:
    """Two prompts in one conversation: the first needs the tool, the second does not."""
    config = AgentLoopConfig(model=model, api_key=KEY, max_retry_delay_ms=20)
    context = AgentContext("You add numbers.", [], [add_tool(calls)])
    runs = []
    for prompt in ("What is 2 + 3?", "Thanks!"):
        events: list[Any] = []
        new = run_agent_loop([UserMessage(prompt)], context, config, events.append)
        context.messages.extend(new)
        runs.append(new)
    return runs


def agent_for(model: Model, calls: list[dict[str, Any]], **options: Any) -> Agent:
    return Agent(
        system_prompt="You add numbers.",
        model=model,
        tools=[add_tool(calls)],
        get_api_key=lambda provider: KEY,
        **options,
    )


# --------------------------------------------------------------------------- Anthropic


def anthropic_frames(*events: dict[str, Any]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def anthropic_reply(blocks: list[list[dict[str, Any]]], stop_reason: str) -> list[bytes]:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "claude-test-4",
                "usage": {"input_tokens": 20, "output_tokens": 1},
            },
        }
    ]
    for index, (start, *deltas) in enumerate(blocks):
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events.extend({"type": "content_block_delta", "index": index, "delta": d} for d in deltas)
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {"output_tokens": 9}})
    events.append({"type": "message_stop"})
    return anthropic_frames(*events)


def anthropic_model() -> Model:
    return Model(
        "claude-test-4",
        api="anthropic-messages",
        provider="anthropic",
        reasoning=True,
        cost=Cost(3.0, 15.0, 0.3, 3.75),
        max_tokens=64000,
    )


def anthropic_text(text: str) -> list[bytes]:
    return anthropic_reply([[{"type": "text", "text": ""}, {"type": "text_delta", "text": text}]], "end_turn")


def test_anthropic_tool_conversation_over_two_prompts():
    model = anthropic_model()
    calls: list[dict[str, Any]] = []
    with ScriptedServer() as server:
        model.base_url = server.url
        server.reply(
            anthropic_reply(
                [
                    [
                        {"type": "thinking", "thinking": "", "signature": ""},
                        {"type": "thinking_delta", "thinking": "Use the tool."},
                        {"type": "signature_delta", "signature": "SIG"},
                    ],
                    [
                        {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}},
                        {"type": "input_json_delta", "partial_json": '{"a": 2, '},
                        {"type": "input_json_delta", "partial_json": '"b": 3}'},
                    ],
                ],
                "tool_use",
            )
        )
        server.reply(
            anthropic_reply([[{"type": "text", "text": ""}, {"type": "text_delta", "text": "2 + 3 = 5."}]], "end_turn")
        )
        server.reply(
            anthropic_reply(
                [[{"type": "text", "text": ""}, {"type": "text_delta", "text": "You're welcome."}]], "end_turn"
            )
        )
        first, second = converse(model, server, calls)
        bodies = [r.json for r in server.requests]

    assert calls == [{"a": 2, "b": 3}]
    assert [m.role for m in first] == ["user", "assistant", "toolResult", "assistant"]
    assert first[1].stop_reason == "toolUse" and first[2].text == "5" and first[3].text == "2 + 3 = 5."
    assert second[-1].text == "You're welcome."
    assert len(bodies) == 3
    # the second request answers the tool call, sending the signed thinking back
    assert bodies[1]["messages"][1]["content"][:2] == [
        {"type": "thinking", "thinking": "Use the tool.", "signature": "SIG"},
        {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 3}},
    ]
    assert bodies[1]["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [{"type": "text", "text": "5"}],
                "cache_control": {"type": "ephemeral"},
            }
        ],
    }
    # the third carries the whole conversation
    assert [m["role"] for m in bodies[2]["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    assert bodies[2]["tools"][0]["name"] == "add"


# --------------------------------------------------------------------------- Google


def google_reply(*parts: dict[str, Any]) -> list[bytes]:
    chunk = {
        "candidates": [{"content": {"role": "model", "parts": list(parts)}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 8},
        "responseId": "r1",
    }
    return [f"data: {json.dumps(chunk)}\r\n\r\n".encode()]


def test_google_tool_conversation_over_two_prompts():
    model = Model(
        "gemini-2.5-flash",
        api="google-generative-ai",
        provider="google",
        reasoning=True,
        cost=Cost(0.3, 2.5, 0.075, 0.0),
        max_tokens=65536,
    )
    calls: list[dict[str, Any]] = []
    with ScriptedServer() as server:
        model.base_url = server.url + "/v1beta"
        server.reply(
            google_reply({"functionCall": {"name": "add", "args": {"a": 2, "b": 3}}, "thoughtSignature": "SIG"})
        )
        server.reply(google_reply({"text": "2 + 3 = 5."}))
        server.reply(google_reply({"text": "You're welcome."}))
        first, second = converse(model, server, calls)
        bodies = [r.json for r in server.requests]

    assert calls == [{"a": 2, "b": 3}]
    assert [m.role for m in first] == ["user", "assistant", "toolResult", "assistant"]
    assert first[1].stop_reason == "toolUse" and first[3].text == "2 + 3 = 5."
    assert second[-1].text == "You're welcome."
    assert bodies[1]["contents"][1:] == [
        {
            "role": "model",
            "parts": [{"functionCall": {"name": "add", "args": {"a": 2, "b": 3}}, "thoughtSignature": "SIG"}],
        },
        {"role": "user", "parts": [{"functionResponse": {"name": "add", "response": {"output": "5"}}}]},
    ]
    assert [c["role"] for c in bodies[2]["contents"]] == ["user", "model", "user", "model", "user"]


def test_anthropic_tool_conversation_through_agent_with_thinking():
    model = anthropic_model()
    calls: list[dict[str, Any]] = []
    with ScriptedServer() as server:
        model.base_url = server.url
        server.reply(
            anthropic_reply(
                [
                    [
                        {"type": "thinking", "thinking": "", "signature": ""},
                        {"type": "thinking_delta", "thinking": "Add them."},
                        {"type": "signature_delta", "signature": "SIG"},
                    ],
                    [
                        {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}},
                        {"type": "input_json_delta", "partial_json": '{"a": 2, "b": 3}'},
                    ],
                ],
                "tool_use",
            )
        )
        server.reply(anthropic_text("5."))
        server.reply(anthropic_text("Bye."))
        agent = agent_for(model, calls, thinking_level="low")
        first = agent.prompt("What is 2 + 3?")
        second = agent.prompt("Thanks!")
        bodies = [r.json for r in server.requests]

    assert (first.text, first.stop_reason, second.text) == ("5.", "stop", "Bye.")
    assert calls == [{"a": 2, "b": 3}]
    assert first.usage.input == 40 and first.usage.cost.total > 0  # summed over both model calls
    assert all(b["thinking"] == {"type": "enabled", "budget_tokens": 2048} for b in bodies)
    assert bodies[0]["system"][0]["text"] == "You add numbers."
    assert [m.role for m in agent.state.messages] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
        "user",
        "assistant",
    ]


def test_anthropic_abort_mid_stream_through_agent_keeps_partial_and_agent_usable():
    model = anthropic_model()
    release, first_delta = threading.Event(), threading.Event()
    with ScriptedServer() as server:
        model.base_url = server.url
        frames = anthropic_text("never finished")
        server.reply(frames[:3] + [Wait(release)] + frames[3:])
        server.reply(anthropic_text("Back again."))
        agent = agent_for(model, [])

        def on_event(event: Any) -> None:
            # text_start arrives before the delta: abort only once the text itself is in
            if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
                first_delta.set()

        agent.subscribe(on_event)
        try:
            future = agent.prompt("Hi", wait=False)
            assert first_delta.wait(5)
            agent.abort()
            aborted = future.result(timeout=5)
        finally:
            release.set()
        again = agent.prompt("Still there?")
        bodies = [r.json for r in server.requests]

    assert aborted.stop_reason == "aborted" and aborted.messages[-1].text == "never finished"
    assert again.text == "Back again."
    # the aborted answer stays in the transcript but is not sent to the model again
    assert [m["role"] for m in bodies[1]["messages"]] == ["user", "user"]


# --------------------------------------------------------------------------- Google through the Agent


def google_model() -> Model:
    return Model(
        "gemini-2.5-flash",
        api="google-generative-ai",
        provider="google",
        reasoning=True,
        cost=Cost(0.3, 2.5, 0.075, 0.0),
        max_tokens=65536,
    )


def test_google_tool_conversation_through_agent():
    model = google_model()
    calls: list[dict[str, Any]] = []
    with ScriptedServer() as server:
        model.base_url = server.url + "/v1beta"
        server.reply(google_reply({"functionCall": {"name": "add", "args": {"a": 4, "b": 5}}}))
        server.reply(google_reply({"text": "9."}))
        agent = agent_for(model, calls, thinking_level="medium")
        result = agent.prompt("What is 4 + 5?")
        bodies = [r.json for r in server.requests]

    assert (result.text, result.stop_reason, calls) == ("9.", "stop", [{"a": 4, "b": 5}])
    assert bodies[0]["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 8192, "includeThoughts": True}
    assert bodies[1]["contents"][2]["parts"][0]["functionResponse"] == {"name": "add", "response": {"output": "9"}}


def test_google_connection_drop_ends_the_run_with_an_error_and_the_next_prompt_works():
    model = google_model()
    with ScriptedServer() as server:
        model.base_url = server.url + "/v1beta"
        chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": "half"}]}}]}
        server.reply([f"data: {json.dumps(chunk)}\r\n\r\n".encode(), RESET])
        server.reply(google_reply({"text": "Whole answer."}))
        agent = agent_for(model, [])
        failed = agent.prompt("Hi")
        recovered = agent.prompt("Again?")
        bodies = [r.json for r in server.requests]

    assert failed.stop_reason == "error" and failed.error_message and failed.messages[-1].text == "half"
    assert recovered.text == "Whole answer."
    assert [c["role"] for c in bodies[1]["contents"]] == ["user", "user"]
