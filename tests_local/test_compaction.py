"""Compaction on the embedded model with a 2,048-token context (docs/compaction.md): a 40-turn
conversation with long tool outputs completes with compactions, where without compaction it
ends with the overflow."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import pytest

from piagent import Agent, AgentTool, AgentToolResult, RequestUpdate, TextContent
from piagent.ai.types import Model
from piagent.compaction import CompactionSummary

WINDOW = 2048
TURNS = 40
PAGE = (
    "The harbour town kept its lighthouse lit through every winter storm. Fishermen mended nets on the "
    "quay while gulls argued over scraps, and the baker opened before dawn so the crews could eat. "
)


def read_page(calls: list[int]) -> AgentTool:
    def execute(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        calls.append(1)
        return AgentToolResult([TextContent(f"Page {args.get('page')}:\n" + PAGE * 6)])  # ~270 tokens

    schema = {"type": "object", "properties": {"page": {"type": "integer"}}, "required": ["page"]}
    return AgentTool("read_page", "Read one page of the town's chronicle", schema, execute)


def read_then_answer(request: Any, signal: Any) -> Optional[RequestUpdate]:
    """A user message is answered by a read_page call, its result by text (the small model calls
    tools reliably only when forced)."""
    last = request.context.messages[-1]
    return RequestUpdate(tool_choice={"name": "read_page"} if last.role == "user" else "none")


def small(model: Model) -> Model:
    return dataclasses.replace(model, context_window=WINDOW, max_tokens=20)  # short answers: a quicker test


def converse(agent: Agent) -> tuple[list[Any], list[Any]]:
    """40 prompts, each read and answered; returns the run results and the compaction events."""
    compactions: list[Any] = []
    agent.subscribe(lambda event: compactions.append(event) if event.type == "compaction_end" else None)
    results = []
    for turn in range(TURNS):
        results.append(agent.prompt(f"Read page {turn + 1} and tell me what it says."))
        if results[-1].error_message:
            break
    return results, compactions


@pytest.mark.long  # about 14 minutes on one core: `make test-local-long`, not CI's make test-local
@pytest.mark.timeout(1800)  # 80 model calls and the summaries, on a small CPU share
def test_a_40_turn_conversation_with_long_tool_outputs_completes_on_the_embedded_model(local_model: Model) -> None:
    calls: list[int] = []
    agent = Agent(model=small(local_model), tools=[read_page(calls)], prepare_request=read_then_answer)
    results, compactions = converse(agent)
    assert [r.error_message for r in results] == [None] * TURNS
    assert len(calls) == TURNS
    assert len(compactions) >= 3 and all(e.result is not None for e in compactions)
    assert isinstance(agent.state.messages[0], CompactionSummary)


def test_without_compaction_the_same_conversation_ends_with_the_overflow(local_model: Model) -> None:
    agent = Agent(model=small(local_model), tools=[read_page([])], prepare_request=read_then_answer, compaction=None)
    results, _ = converse(agent)
    assert len(results) < TURNS
    assert "exceed context window of 2048" in (results[-1].error_message or "")
