"""Side effects exactly once on a remote run (docs/effects.md): run_pending settles an interrupted call."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import redis

from piagent import Agent, ToolIntent, tool
from piagent.ai.types import UserMessage
from piagent.remote import Approval, RunHandle, attach, run_pending
from piagent.remote._keys import RUN_TTL_MS
from piagent.sessions import JsonlSession
from piagent.testing import faux_message, faux_tool_call, register_faux_provider

from .effects_worker import CALL_ID, charging_tool
from .redis_server import RedisServer, key_ttls, without_ttl

ROOT = Path(__file__).resolve().parents[1]


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


def killed_worker_then_resumed(
    redis_server: RedisServer, tmp_path: Path, run_id: str, kill: str, after_kill: Callable[[], None] = lambda: None
) -> Any:
    """A worker process takes an approval for ``charge`` and is SIGKILLed at ``kill`` (then
    ``after_kill()`` runs); a worker here resumes the run. Returns the resumed agent, the
    ledger's lines and the run's events."""
    session, ledger = tmp_path / "run.jsonl", tmp_path / "ledger"
    handle = RunHandle(redis_server.url, run_id)
    handle.follow_up("charge a")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests_remote.effects_worker",
            redis_server.url,
            run_id,
            str(session),
            str(ledger),
            kill,
        ],
        cwd=ROOT,
    )
    try:
        for event in handle.events(timeout=30):
            if event["type"] == "approval_request":
                handle.approve(event["toolCallId"])
                break
        assert worker.wait(timeout=60) == -signal.SIGKILL
    finally:
        if worker.poll() is None:
            worker.kill()
    after_kill()
    faux = register_faux_provider()
    faux.set_responses([faux_message("done")])
    try:
        agent = Agent(model=faux.get_model(), tools=[charging_tool(str(ledger), "")], session=JsonlSession(session))
        with attach(agent, redis_server.url, run_id, approval=Approval(tools={"charge"}, timeout=5)):
            run_pending(agent)
    finally:
        faux.unregister()
    events: list[dict[str, Any]] = []
    for event in handle.events(timeout=2):
        events.append(event)
    return agent, ledger.read_text().splitlines() if ledger.exists() else [], events


def test_an_approval_taken_by_a_worker_killed_before_the_intent_is_kept_and_used_once_by_the_resumed_run(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    agent, ledger, events = killed_worker_then_resumed(redis_server, tmp_path, "effects-kept", "before-intent")
    assert ledger == ["a"]  # it ran once, after the resume, on the kept approval
    assert [e["type"] for e in events].count("approval_request") == 1  # never asked twice
    [recovery] = [e for e in events if e["type"] == "tool_recovery"]
    assert (recovery["action"], recovery["decidedBy"]) == ("rerun", "approval")
    [result] = [m for m in agent.state.messages if m.role == "toolResult"]
    assert not result.is_error and result.content[0].text == "charged a"
    keys = redis.Redis.from_url(redis_server.url, decode_responses=True)
    assert keys.exists(f"piagent:{{effects-kept}}:approved:{CALL_ID}") == 0  # used, with the intent
    assert keys.hexists("piagent:{effects-kept}:intents", CALL_ID)


def test_a_worker_killed_after_an_approved_calls_intent_follows_the_policy_and_the_approval_is_used(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    agent, ledger, events = killed_worker_then_resumed(redis_server, tmp_path, "effects-used", "after-effect")
    assert ledger == ["a"]  # not run again
    assert [e["type"] for e in events].count("approval_request") == 1
    [recovery] = [e for e in events if e["type"] == "tool_recovery"]
    assert (recovery["action"], recovery["decidedBy"]) == ("fail", "policy")
    [result] = [m for m in agent.state.messages if m.role == "toolResult"]
    assert result.is_error and "was interrupted" in result.content[0].text
    keys = redis.Redis.from_url(redis_server.url, decode_responses=True)
    assert keys.exists(f"piagent:{{effects-used}}:approved:{CALL_ID}") == 0


def test_an_approval_kept_by_a_killed_worker_expires_after_the_default_ttl_yet_the_resumed_run_finds_it(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    kept: dict[str, int] = {}
    agent, ledger, _ = killed_worker_then_resumed(
        redis_server,
        tmp_path,
        "effects-ttl-kept",
        "before-intent",
        lambda: kept.update(key_ttls(client, "effects-ttl-kept")),
    )
    assert RUN_TTL_MS - 60_000 < kept[f"approved:{CALL_ID}"] <= RUN_TTL_MS  # set with the approval it keeps
    assert ledger == ["a"]  # found, and used once
    left = key_ttls(client, "effects-ttl-kept")
    assert RUN_TTL_MS - 60_000 < left["intents"] <= RUN_TTL_MS
    assert not [name for name in left if name.startswith("approved:")]


def test_after_a_resumed_run_no_key_of_the_run_is_left_without_a_ttl(redis_server: RedisServer, tmp_path: Path) -> None:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    left_by_the_killed_worker: list[str] = []
    killed_worker_then_resumed(
        redis_server,
        tmp_path,
        "effects-ttl-used",
        "after-effect",
        lambda: left_by_the_killed_worker.extend(without_ttl(client, "effects-ttl-used")),
    )
    assert left_by_the_killed_worker == []
    left = key_ttls(client, "effects-ttl-used")
    assert RUN_TTL_MS - 60_000 < left["intents"] <= RUN_TTL_MS
    assert RUN_TTL_MS - 60_000 < left["control"] <= RUN_TTL_MS  # a week from the run's last activity
    assert without_ttl(client, "effects-ttl-used") == []


def test_a_decision_that_wins_the_race_against_the_approval_timeout_is_kept_with_its_ttl(
    redis_server: RedisServer,
) -> None:
    from piagent.remote._keys import RunKeys
    from piagent.remote._scripts import WITHDRAW

    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    keys = RunKeys("effects-race")
    client.hset(keys.approvals, "c1", "{}")  # the worker's pending request
    assert RunHandle(redis_server.url, "effects-race").approve("c1")  # decided just as the worker gave up
    withdraw = client.register_script(WITHDRAW)  # what the worker runs on its timeout
    raw = withdraw(keys=[keys.approvals, keys.decision("c1"), keys.approved("c1")], args=["c1", RUN_TTL_MS])
    assert json.loads(raw)["approved"] is True  # honoured
    assert client.lrange(keys.approved("c1"), 0, -1) == [raw]  # and kept for a resumed run, as any taken approval
    assert RUN_TTL_MS - 60_000 < client.pttl(keys.approved("c1")) <= RUN_TTL_MS
