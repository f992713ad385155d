"""Side effects exactly once on a remote run (docs/effects.md): run_pending settles an interrupted call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from piagent import Agent, ToolIntent, tool
from piagent.ai.types import UserMessage
from piagent.remote import RunHandle, attach, run_pending
from piagent.sessions import JsonlSession
from piagent.testing import faux_message, faux_tool_call, register_faux_provider

from .redis_server import RedisServer


def test_run_pending_reports_a_never_call_interrupted_by_a_crash_and_does_not_run_it_again(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    ran: list[str] = []

    @tool
    def charge(item: str) -> str:
        """Charge an item."""
        ran.append(item)
        return "charged"

    path = tmp_path / "run.jsonl"
    call = faux_tool_call("charge", {"item": "a"})
    crashed = JsonlSession(path)  # what the worker that died left: the batch and its intent, no result
    crashed.append_message(UserMessage("charge a"))
    crashed.append_message(faux_message([call]))
    crashed.record_intents([ToolIntent(call.id, "charge", {"item": "a"}, 1.0, "dead:1", f"{crashed.id}:{call.id}")])
    faux = register_faux_provider()
    faux.set_responses([faux_message("I will check the ledger first.")])
    try:
        agent = Agent(model=faux.get_model(), tools=[charge], session=JsonlSession(path))
        with attach(agent, redis_server.url, "effects-pending"):
            result = run_pending(agent)
    finally:
        faux.unregister()
    assert result is not None and result.text == "I will check the ledger first."
    assert ran == []
    [stored] = [m for m in agent.state.messages if m.role == "toolResult"]
    assert stored.is_error and "was interrupted" in stored.content[0].text
    seen: list[dict[str, Any]] = []
    for event in RunHandle(redis_server.url, "effects-pending").events(timeout=5):
        seen.append(event)
        if event["type"] == "agent_end":
            break
    [recovery] = [e for e in seen if e["type"] == "tool_recovery"]
    assert (recovery["toolCallId"], recovery["action"], recovery["decidedBy"]) == (call.id, "fail", "policy")
    assert recovery["intent"]["worker"] == "dead:1"
