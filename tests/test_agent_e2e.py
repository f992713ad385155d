"""Agent + faux provider end to end: pi's end-to-end cases (E1–E10)."""

from __future__ import annotations

import re
import threading
from typing import Any

import pytest

from piagent import (
    Agent,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    InvalidStateError,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from piagent.testing import faux_message, faux_text, faux_thinking, faux_tool_call, register_faux_provider
from tests.support.agent_support import WAIT, Recorder, roles, text_of, user

CALCULATE_SCHEMA = {
    "type": "object",
    "properties": {"expression": {"type": "string", "description": "like '12 * 3'"}},
    "required": ["expression"],
}


def calculate_tool() -> AgentTool:
    """Evaluates ``<int> <op> <int>`` (no eval of arbitrary text)."""

    def execute(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        match = re.fullmatch(r"\s*(-?\d+)\s*([-+*/])\s*(-?\d+)\s*", args["expression"])
        if match is None:
            raise ValueError(f"cannot evaluate {args['expression']!r}")
        left, op, right = int(match.group(1)), match.group(2), int(match.group(3))
        results = {"+": left + right, "-": left - right, "*": left * right}
        value = results[op] if op in results else (left / right if right else float("nan"))
        return AgentToolResult([TextContent(f"{args['expression']} = {value:g}")], {"value": value})

    return AgentTool("calculate", "Evaluate an arithmetic expression", CALCULATE_SCHEMA, execute, label="Calculator")


def test_e1_handles_a_basic_text_prompt(faux) -> None:
    faux.set_responses([faux_message("4")])
    agent = Agent(model=faux.get_model(), system_prompt="You are helpful.")
    result = agent.prompt("What is 2+2? Answer with just the number.")
    assert agent.state.is_streaming is False
    assert roles(agent.state.messages) == ["user", "assistant"]
    assert "4" in agent.state.messages[1].text and "4" in result.text


def test_e2_executes_tools_and_tracks_pending_tool_calls(faux) -> None:
    faux.set_responses(
        [
            faux_message(
                [
                    faux_text("Let me calculate."),
                    faux_tool_call("calculate", {"expression": "123 * 456"}, id="calc-1"),
                ]
            ),
            faux_message("The result is 56088."),
        ]
    )
    agent = Agent(model=faux.get_model(), tools=[calculate_tool()])
    pending: list[Any] = []
    agent.subscribe(
        lambda event: (
            pending.append((event.type, sorted(agent.state.pending_tool_calls)))
            if event.type in ("tool_execution_start", "tool_execution_end")
            else None
        )
    )
    result = agent.prompt("Calculate 123 * 456")
    tool_result = next(m for m in agent.state.messages if m.role == "toolResult")
    assert isinstance(tool_result, ToolResultMessage)
    assert "123 * 456 = 56088" in tool_result.text
    assert "56088" in result.text
    assert agent.state.pending_tool_calls == frozenset()
    assert pending == [("tool_execution_start", ["calc-1"]), ("tool_execution_end", [])]


def test_e3_handles_abort_during_streaming() -> None:
    paced = register_faux_provider(tokens_per_second=20, chunk_tokens=(2, 2))
    try:
        paced.set_responses([faux_message("word " * 200)])
        agent = Agent(model=paced.get_model())
        first_update = threading.Event()
        agent.subscribe(lambda event: first_update.set() if event.type == "message_update" else None)
        future = agent.prompt("Count slowly to a thousand.", wait=False)
        assert first_update.wait(WAIT)
        agent.abort()
        result = future.result(WAIT)
    finally:
        paced.unregister()
    assert agent.state.is_streaming is False
    assert len(agent.state.messages) >= 2
    last = agent.state.messages[-1]
    assert last.role == "assistant" and last.stop_reason == "aborted"
    assert last.error_message
    assert agent.state.error_message == last.error_message
    assert result.stop_reason == "aborted" and len(last.text) < len("word " * 200)


def test_e4_emits_lifecycle_updates_while_streaming() -> None:
    one_token = register_faux_provider(chunk_tokens=(1, 1))
    try:
        one_token.set_responses([faux_message("1 2 3 4 5")])
        agent = Agent(model=one_token.get_model())
        recorder = Recorder()
        agent.subscribe(recorder)
        agent.prompt("Count from 1 to 5.")
    finally:
        one_token.unregister()
    types = recorder.types
    lifecycle = ("agent_start", "turn_start", "message_start", "message_update", "message_end", "turn_end", "agent_end")
    assert set(lifecycle) <= set(types)
    last_agent_end = len(types) - 1 - types[::-1].index("agent_end")
    assert types.index("agent_start") < types.index("message_start") < types.index("message_end") < last_agent_end
    assert len(agent.state.messages) == 2


def test_e5_maintains_context_across_turns(faux) -> None:
    def remembers(context: Any, options: Any, state: Any, model: Any) -> AssistantMessage:
        said = " ".join(text_of(m) for m in context.messages if m.role == "user")
        return faux_message("Your name is Alice." if "Alice" in said else "I don't know.")

    faux.set_responses([faux_message("Nice to meet you, Alice."), remembers])
    agent = Agent(model=faux.get_model())
    agent.prompt("My name is Alice.")
    agent.prompt("What is my name?")
    assert len(agent.state.messages) == 4
    assert "alice" in agent.state.messages[-1].text.lower()


def test_e6_preserves_thinking_blocks() -> None:
    thinker = register_faux_provider(models=[{"id": "thinker", "reasoning": True}])
    try:
        thinker.set_responses([faux_message([faux_thinking("step by step"), faux_text("4")])])
        agent = Agent(model=thinker.get_model(), thinking_level="low")
        agent.prompt("What is 2+2?")
        assert thinker.state.requests[0].options.reasoning == "low"
    finally:
        thinker.unregister()
    content = agent.state.messages[-1].content
    assert [block.to_dict() for block in content] == [
        {"type": "thinking", "thinking": "step by step"},
        {"type": "text", "text": "4"},
    ]
    assert [type(block) for block in content] == [ThinkingContent, TextContent]  # plain blocks, no streaming scratch


def test_e7_continue_with_no_messages_raises() -> None:
    agent = Agent()
    with pytest.raises(InvalidStateError, match=r"^No messages to continue from$"):
        agent.continue_()
    assert agent.state.is_streaming is False


def test_e8_continue_from_an_assistant_tail_with_empty_queues_raises(faux) -> None:
    agent = Agent(model=faux.get_model(), messages=[faux_message("Hello")])
    with pytest.raises(InvalidStateError, match=r"^Cannot continue from message role: assistant$"):
        agent.continue_()
    assert faux.state.call_count == 0 and agent.state.is_streaming is False


def test_e9_continue_from_a_user_message(faux) -> None:
    faux.set_responses([faux_message("HELLO WORLD")])
    agent = Agent(model=faux.get_model(), messages=[user("Say exactly: HELLO WORLD")])
    recorder = Recorder()
    agent.subscribe(recorder)
    result = agent.continue_()
    assert roles(agent.state.messages) == ["user", "assistant"]
    assert roles(result.messages) == ["assistant"]
    assert [e.message.role for e in recorder.of_type("message_end")] == ["assistant"]  # no user message events


def test_e10_continue_from_a_tool_result(faux) -> None:
    faux.set_responses([faux_message("5 + 3 = 8")])
    call = ToolCall("calc-1", "calculate", {"expression": "5 + 3"})
    messages = [
        user("What is 5 + 3?"),
        AssistantMessage(content=[TextContent("Let me calculate."), call], stop_reason="toolUse", usage=Usage()),
        ToolResultMessage("calc-1", "calculate", [TextContent("5 + 3 = 8")]),
    ]
    agent = Agent(model=faux.get_model(), tools=[calculate_tool()], messages=messages)
    agent.continue_()
    assert len(agent.state.messages) >= 4
    last = agent.state.messages[-1]
    assert last.role == "assistant" and "8" in last.text
