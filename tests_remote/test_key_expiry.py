"""Every key of a run expires (docs/remote.md#keys): a run nobody touches for ``RUN_TTL_MS`` leaves
nothing in Redis, a live or resumable run loses nothing, and a run touched again after its keys
expired works (expiry is simulated with ``DEL``/``PEXPIRE``, against a real redis-server)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import redis

from piagent import Agent, tool
from piagent.remote import Approval, RunHandle, attach, run_pending
from piagent.remote._keys import RUN_TTL_MS, RunKeys
from piagent.testing import faux_message, faux_tool_call, register_faux_provider
from tests.support.waits import wait_until

from .redis_server import RedisServer, key_ttls, without_ttl

ROOT = Path(__file__).resolve().parents[1]
A_MINUTE = 60_000


def raw(redis_server: RedisServer) -> redis.Redis:
    return redis.Redis.from_url(redis_server.url, decode_responses=True)


def user_texts(agent: Agent) -> list[str]:
    return [m.content[0].text for m in agent.state.messages if m.role == "user"]


@tool
def delete(name: str) -> str:
    """Delete something (needs approval)."""
    return f"deleted {name}"


def delete_once(context: Any, *_: Any) -> Any:
    """Deletes ``a`` on the first turn, then answers with the number of messages seen."""
    if not any(m.role == "toolResult" for m in context.messages):
        return faux_message([faux_tool_call("delete", {"name": "a"}, id="call_a")])
    return faux_message(f"answer {len(context.messages)}")


def test_after_a_run_with_steering_a_follow_up_and_an_approval_every_key_of_the_run_expires(
    redis_server: RedisServer,
) -> None:
    run_id = "expiry-complete"
    handle, client = RunHandle(redis_server.url, run_id), raw(redis_server)
    handle.follow_up("go")  # the prompt, as start_run sends it

    def approver() -> None:  # steers and queues a follow-up while the call waits, then approves it
        for event in handle.events(timeout=30):
            if event["type"] == "approval_request":
                handle.steer("also this")
                handle.follow_up("and then")
                handle.approve(event["toolCallId"])
                return

    thread = threading.Thread(target=approver)
    thread.start()
    faux = register_faux_provider()
    faux.set_responses([delete_once] * 10)
    try:
        agent = Agent(model=faux.get_model(), tools=[delete])
        with attach(agent, redis_server.url, run_id, approval=Approval(tools={"delete"}, timeout=30)):
            run_pending(agent)
    finally:
        thread.join(30)
        faux.unregister()
    assert user_texts(agent) == ["go", "also this", "and then"]
    tool_results = [m for m in agent.state.messages if m.role == "toolResult"]
    assert [(m.is_error, m.content[0].text) for m in tool_results] == [(False, "deleted a")]
    ttls = key_ttls(client, run_id)
    assert RUN_TTL_MS - A_MINUTE < ttls["control"] <= RUN_TTL_MS  # the stream and its group stay a week
    assert without_ttl(client, run_id) == []


def test_a_worker_killed_while_an_approval_is_pending_leaves_no_key_without_a_ttl(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    run_id = "expiry-pending"
    handle, client = RunHandle(redis_server.url, run_id), raw(redis_server)
    handle.follow_up("charge a")
    worker = subprocess.Popen(  # waits 30 s for a decision that never comes
        [sys.executable, "-m", "tests_remote.effects_worker", redis_server.url, run_id,
         str(tmp_path / "run.jsonl"), str(tmp_path / "ledger"), "never"],
        cwd=ROOT,
    )  # fmt: skip
    try:
        for event in handle.events(timeout=30):
            if event["type"] == "approval_request":
                break
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=30) == -signal.SIGKILL
    finally:
        if worker.poll() is None:
            worker.kill()
    assert list(handle.pending_approvals()) == ["call_charge_1"]  # nobody resumes the run: it stays pending
    ttls = key_ttls(client, run_id)
    assert RUN_TTL_MS - A_MINUTE < ttls["approvals"] <= RUN_TTL_MS
    assert without_ttl(client, run_id) == []


def test_a_live_worker_keeps_its_runs_control_stream_from_expiring(redis_server: RedisServer, faux: Any) -> None:
    """An attached worker renews the run's keys with its lease: a worker idle for longer than the
    TTL (simulated: the stream is a minute from expiring) does not lose its stream and group."""
    run_id = "expiry-live"
    keys, client, handle = RunKeys(run_id), raw(redis_server), RunHandle(redis_server.url, run_id)
    agent = Agent(model=faux.get_model())
    with attach(agent, redis_server.url, run_id):
        client.pexpire(keys.control, A_MINUTE)
        assert wait_until(lambda: client.pttl(keys.control) > A_MINUTE)  # the next renewal, within a second
        handle.follow_up("still here")
        assert wait_until(agent.has_queued_messages)
        run_pending(agent)
    assert user_texts(agent) == ["still here"]


def test_a_run_whose_keys_expired_takes_messages_again_and_the_next_worker_makes_its_group_anew(
    redis_server: RedisServer, faux: Any
) -> None:
    run_id = "expiry-again"
    keys, client, handle = RunKeys(run_id), raw(redis_server), RunHandle(redis_server.url, run_id)
    agent = Agent(model=faux.get_model())
    handle.follow_up("first")
    with attach(agent, redis_server.url, run_id):
        run_pending(agent)
    client.delete(*client.scan_iter(f"{keys.prefix}*"))  # a week without activity: every key expired

    handle.steer("a week later")  # a stream without its group, until a worker attaches
    assert client.xinfo_groups(keys.control) == []
    assert RUN_TTL_MS - A_MINUTE < client.pttl(keys.control) <= RUN_TTL_MS
    with attach(agent, redis_server.url, run_id):  # the same conversation (its transcript kept elsewhere)
        run_pending(agent)
    assert user_texts(agent) == ["first", "a week later"]
    assert [group["name"] for group in client.xinfo_groups(keys.control)] == ["worker"]
    assert without_ttl(client, run_id) == []
    events = list(handle.events(timeout=0.2))  # the events stream starts again
    assert events[0]["type"] == "agent_start" and events[-1]["type"] == "agent_end"


def test_a_worker_detaching_from_a_control_stream_redis_lost_does_not_make_one_without_a_ttl(
    redis_server: RedisServer, faux: Any
) -> None:
    """Closing wakes the reader with an entry: on a stream Redis no longer has (deleted, or lost
    in a failover) it must not make a stream again, which nothing would ever expire."""
    run_id = "expiry-lost"
    keys, client = RunKeys(run_id), raw(redis_server)
    with attach(Agent(model=faux.get_model()), redis_server.url, run_id):
        client.delete(keys.control)
    assert client.exists(keys.control) == 0
    assert without_ttl(client, run_id) == []


def test_a_live_workers_renewals_leave_the_expiry_of_its_state_keys_alone_until_they_age_by_the_slack(
    redis_server: RedisServer, faux: Any
) -> None:
    """The lease is renewed every second; the state keys' expiry only once it has aged by an hour
    (``STATE_SLACK_MS``): one write per renewal (the lease's), not five, for every live run."""
    client = raw(redis_server)

    def calls() -> tuple[int, int]:
        """(renewals, PEXPIREs) since the reset, read in one INFO: each renewal GETs the lease."""
        stats = client.info("commandstats")
        get, pexpire = (int(stats.get(f"cmdstat_{name}", {}).get("calls", 0)) for name in ("get", "pexpire"))
        return get, pexpire

    with attach(Agent(model=faux.get_model()), redis_server.url, "expiry-slack"):
        client.config_resetstat()
        assert wait_until(lambda: calls()[0] >= 2)  # two renewals
        renewals, writes = calls()
    assert writes == renewals  # the lease's own PEXPIRE, nothing else


def test_a_message_sent_to_a_run_nobody_attaches_to_renews_every_state_key_of_the_run(
    redis_server: RedisServer,
) -> None:
    """The run's state expires as one: a dead worker's delivering note (and its intents) lived a
    week from their own last write while steering kept the control stream alive, and a note lapsing
    before its pending entry would let that message be delivered again."""
    run_id, client = "expiry-together", raw(redis_server)
    keys = RunKeys(run_id)
    client.hset(keys.delivering, "1-0", 3)  # as a worker that died mid-delivery left them, a day before the end
    client.hset(keys.intents, "call_a", "{}")
    for key in (keys.delivering, keys.intents):
        client.pexpire(key, A_MINUTE)
    RunHandle(redis_server.url, run_id).steer("still there?")
    ttls = key_ttls(client, run_id)
    for name in ("control", "delivering", "intents"):
        assert RUN_TTL_MS - A_MINUTE < ttls[name] <= RUN_TTL_MS, name
