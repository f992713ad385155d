"""A small user program written against piagent's public API, fully annotated.

`.ci/run` type-checks it with ``mypy --strict`` (piagent's own modules are analysed, their
errors left to the package's gate); ``tests/test_typed_program.py`` runs it, so it stays a
real program. It uses what users write most: ``@tool``, ``prompt()`` with and without
``wait``, listeners of both forms, hooks, options as keywords and as attributes, and a
structured output whose type flows into ``RunResult.output``, given per prompt or to the
agent (``Agent(output_type=Sum)`` is an ``Agent[Sum]``); ``assert_type`` lines fail the type
check if a type stops flowing.
"""

from __future__ import annotations

import json
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Optional

from typing_extensions import assert_type

from piagent import (
    AbortSignal,
    AfterToolCallContext,
    AfterToolCallResult,
    Agent,
    AgentEvent,
    AgentOptions,
    AgentTool,
    BeforeToolCallContext,
    BeforeToolCallResult,
    MessageEndEvent,
    RunResult,
    ToolExecutionEndEvent,
    TurnContext,
    TurnUpdate,
    tool,
)
from piagent.ai import Model, Tool
from piagent.testing import faux_message, faux_text, faux_tool_call, register_faux_provider


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


@dataclass
class Sum:
    """The answer of an addition."""

    total: int
    explanation: str = ""


@dataclass
class Check:
    """A yes or no."""

    ok: bool


def before(context: BeforeToolCallContext, signal: AbortSignal) -> Optional[BeforeToolCallResult]:
    if context.tool_call.name == "forbidden":
        return BeforeToolCallResult(block=True, reason="not allowed")
    return None


def after(context: AfterToolCallContext, signal: AbortSignal) -> Optional[AfterToolCallResult]:
    return AfterToolCallResult(details={"checked": True}) if not context.is_error else None


def prepare(context: TurnContext, signal: AbortSignal) -> Optional[TurnUpdate]:
    return TurnUpdate(thinking_level="off") if context.tool_results else None


def main() -> list[str]:
    """Two runs on a faux model; returns what the program saw, for the test to check."""
    faux = register_faux_provider()
    seen: list[str] = []
    try:
        model: Model = faux.get_model()
        faux.set_responses(
            [
                faux_message([faux_tool_call("add", {"a": 2, "b": 3})]),
                faux_message([faux_text("5")]),
                faux_message("again"),
            ]
        )
        as_tool: Tool = add  # an AgentTool is a Tool
        tools: list[AgentTool] = [add]
        agent = Agent(model=model, tools=tools, before_tool_call=before, after_tool_call=after, max_turns=5)
        agent.prepare_next_turn = prepare
        agent.thinking_level = "off"

        def on_event(event: AgentEvent) -> None:
            if isinstance(event, ToolExecutionEndEvent):
                seen.append(f"{event.tool_name} -> {event.result.content}")

        def on_event_with_signal(event: AgentEvent, signal: AbortSignal) -> None:
            if isinstance(event, MessageEndEvent) and event.message.role == "assistant":
                seen.append(f"assistant (aborted: {signal.aborted})")

        unsubscribe = agent.subscribe(on_event)
        agent.subscribe(on_event_with_signal)

        result: RunResult = agent.prompt("What is 2 + 3?")
        seen.append(result.text)
        unsubscribe()

        future: Future[RunResult] = agent.prompt("Once more", wait=False)
        seen.append(future.result(timeout=30).text)
        seen.append(f"{as_tool.name} {agent.state.model.id} {len(agent.messages)} messages")

        options = AgentOptions(system_prompt="Be brief.", max_retries=2)
        seen.append(f"{options.system_prompt} {options.max_retries}")

        faux.set_responses([faux_message(json.dumps({"total": 5})), faux_message(json.dumps({"total": 7}))])
        typed: RunResult[Sum] = agent.prompt("2 + 3 as a Sum", output_type=Sum)
        total: int = typed.output.total  # an int under mypy --strict: output is a Sum
        later: Future[RunResult[Sum]] = agent.prompt("3 + 4", output_type=Sum, wait=False)
        later_total: int = later.result(timeout=30).output.total  # before the next prompt: one run at a time
        untyped: RunResult[Any] = agent.prompt("no output type")
        seen.append(f"{total} {later_total} {untyped.stop_reason}")

        # The agent-level form: Agent(output_type=Sum) is an Agent[Sum], and its runs' outputs are Sums.
        summing = Agent(model=model, output_type=Sum)
        assert_type(summing, Agent[Sum])
        faux.set_responses([faux_message(json.dumps({"total": 9})), faux_message(json.dumps({"total": 11}))])
        summed = summing.prompt("4 + 5")
        assert_type(summed, RunResult[Sum])
        assert_type(summed.output, Sum)
        pending = summing.prompt("5 + 6", wait=False)
        assert_type(pending, Future[RunResult[Sum]])
        summed_later: int = pending.result(timeout=30).output.total
        faux.set_responses([faux_message(json.dumps({"ok": True}))])
        assert_type(summing.prompt("checked?", output_type=Check), RunResult[Check])  # a run's own type wins
        assert_type(Agent(model=model), Agent[Any])  # no output_type: as before
        assert_type(Agent(model=model).prompt("hi"), RunResult[Any])
        seen.append(f"{summed.output.total} {summed_later}")
    finally:
        faux.unregister()
    return seen


if __name__ == "__main__":
    for line in main():
        print(line)
