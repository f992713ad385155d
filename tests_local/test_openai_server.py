"""piagent's ``openai-completions`` provider against a real OpenAI-compatible server.

The server is llama-cpp-python's (``python -m llama_cpp.server``, chat format
``chatml-function-calling``) serving the embedded model on 127.0.0.1. It repeats a tool
call's id and name in every streamed delta: the provider must treat a repeat as the same
value, not as text to append.
"""

from __future__ import annotations

from piagent import Agent, AgentToolResult, TextContent
from piagent.abort import AbortController
from piagent.ai import Context, Tool, UserMessage, stream_simple
from piagent.types import AgentTool, TurnUpdate

WAIT = 120
WEATHER = Tool(
    "get_weather",
    "Get the current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def ask(text: str, tools=None) -> Context:
    return Context("You are a helpful assistant. Answer briefly.", [UserMessage(text)], tools)


def test_a_text_answer_streams_in_several_deltas(served_model):
    events = stream_simple(served_model, ask("What is the capital of France?"))
    deltas = [e.delta for e in events if e.type == "text_delta"]
    final = events.result(timeout=WAIT)
    assert final.stop_reason in ("stop", "length"), final.error_message
    assert len(deltas) > 2 and final.text == "".join(deltas) and final.text.strip()


def test_a_forced_tool_call_keeps_the_repeated_id_and_name_as_one_value(served_model):
    events = stream_simple(
        served_model, ask("What's the weather in Paris?", [WEATHER]), tool_choice={"name": "get_weather"}
    )
    deltas = [e for e in events if e.type == "toolcall_delta"]
    final = events.result(timeout=WAIT)
    assert final.stop_reason == "toolUse", final.error_message
    assert len(deltas) > 1  # the server sent the id and name again with each of these
    (call,) = final.tool_calls
    assert call.name == "get_weather"
    assert call.id.startswith("call_") and call.id.count("get_weather") == 1
    assert isinstance(call.arguments.get("city"), str)


def test_a_forced_tool_call_is_executed_and_answered_through_the_agent(served_model):
    seen = []

    def execute(tool_call_id, args, signal, on_update):
        seen.append(args)
        return AgentToolResult([TextContent(f"{args['city']}: sunny, 24 °C")])

    weather = AgentTool(WEATHER.name, WEATHER.description, WEATHER.parameters, execute)
    agent = Agent(
        model=served_model,
        system_prompt="You are a helpful assistant. Answer briefly.",
        tools=[weather],
        tool_choice={"name": "get_weather"},
        prepare_next_turn=lambda context, signal: TurnUpdate(tool_choice="none") if context.tool_results else None,
        max_turns=3,
    )
    result = agent.prompt("What's the weather in Paris?")
    assert result.stop_reason in ("stop", "length"), result.error_message
    roles = [m.role for m in result.messages]
    assert roles == ["user", "assistant", "toolResult", "assistant"]
    assert len(seen) == 1 and isinstance(seen[0]["city"], str)
    assert result.messages[2].tool_call_id == result.messages[1].tool_calls[0].id
    assert result.text.strip()


def test_abort_mid_stream_ends_the_answer_and_leaves_the_server_usable(served_model):
    controller = AbortController()
    events = stream_simple(
        served_model, ask("Write a long story about a dragon."), signal=controller.signal, max_tokens=400
    )
    deltas = []
    for event in events:
        if event.type == "text_delta":
            deltas.append(event.delta)
            if len(deltas) == 3:
                controller.abort()
    final = events.result(timeout=WAIT)
    assert final.stop_reason == "aborted"
    assert final.text == "".join(deltas) and len(deltas) == 3
    again = stream_simple(served_model, ask("Say hi.")).result(timeout=WAIT)
    assert again.stop_reason in ("stop", "length"), again.error_message
