"""An agent's compactions are written as pi's ``compaction`` entries, and reading the session
back gives the context the agent had (docs/compaction.md#what-a-compaction-does)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from piagent import Agent, Compaction
from piagent.ai import Context
from piagent.ai.types import AssistantMessage
from piagent.compaction._summary import SYSTEM_PROMPT
from piagent.sessions import JsonlSession, convert_to_llm
from piagent.testing import FauxProvider, faux_message


def answers(context: Context, options: Any, state: Any, model: Any) -> AssistantMessage:
    if context.system_prompt == SYSTEM_PROMPT:
        return faux_message("## Goal\nTalk about numbers")
    return faux_message("Number " + "n" * 400)


def llm_texts(messages: list[Any]) -> list[tuple[str, str]]:
    return [(m.role, json.dumps(m.to_dict()["content"])) for m in convert_to_llm(messages)]


def test_a_compaction_is_written_as_pis_entry_and_read_back_as_the_agent_had_it(
    faux: FauxProvider, tmp_path: Path
) -> None:
    faux.set_responses([answers] * 20)
    path = tmp_path / "s.jsonl"
    agent = Agent(model=faux.get_model(), session=JsonlSession(path), compaction=Compaction(keep_recent_tokens=150))
    for question in ("one", "two", "three", "four"):
        agent.prompt(f"Say a number: {question} " + "q" * 400)
    result = agent.compact()
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    compaction = entries[-1]
    assert compaction["type"] == "compaction" and compaction["summary"] == "## Goal\nTalk about numbers"
    assert compaction["tokensBefore"] == result.tokens_before and compaction["fromHook"] is False
    assert compaction["usage"]["totalTokens"] == result.usage.total_tokens > 0
    first_kept = next(e for e in entries if e.get("id") == compaction["firstKeptEntryId"])
    assert first_kept["type"] == "message" and first_kept["message"]["role"] == "user"
    assert first_kept["message"]["content"][0]["text"].startswith("Say a number: four")

    reopened = JsonlSession(path).messages()
    assert reopened[0].role == "compactionSummary"
    assert llm_texts(reopened) == llm_texts(agent.state.messages)  # the model sees the same

    agent.prompt("And now?")  # the conversation goes on after the compaction, in the session too
    assert llm_texts(JsonlSession(path).messages()) == llm_texts(agent.state.messages)
