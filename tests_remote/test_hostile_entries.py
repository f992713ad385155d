"""Anyone who can write a run's Redis keys, by mistake or not, against a real redis-server: a
malformed entry is skipped and reported (a warning on ``piagent.remote``), never the end of a
worker or a reader, and only an explicit, well-typed ``approved: true`` approves a call."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
import redis

from piagent import Agent, tool
from piagent.remote import Approval, RunHandle, attach, run_pending
from piagent.remote._keys import CONSUMER, GROUP, RunKeys
from piagent.testing import faux_message, faux_tool_call, register_faux_provider
from tests.support.waits import wait_until

from .redis_server import RedisServer


def raw(redis_server: RedisServer) -> redis.Redis:
    return redis.Redis.from_url(redis_server.url, decode_responses=True)


def user_texts(agent: Agent) -> list[str]:
    return [m.content[0].text for m in agent.state.messages if m.role == "user"]


def test_a_malformed_control_entry_is_skipped_and_later_attachments_still_work(
    redis_server: RedisServer, faux: Any, caplog: pytest.LogCaptureFixture
) -> None:
    keys, handle = RunKeys("hostile-control"), RunHandle(redis_server.url, "hostile-control")
    agent = Agent(model=faux.get_model())
    with caplog.at_level(logging.WARNING, logger="piagent.remote"):
        with attach(agent, redis_server.url, "hostile-control"):  # the reader meets it while attached
            raw(redis_server).xadd(keys.control, {"kind": "steer", "text": "bad", "timestamp": "yesterday"})
            handle.follow_up("after the bad one")
            assert wait_until(agent.has_queued_messages)
            run_pending(agent)
        raw(redis_server).xadd(keys.control, {"kind": "follow_up", "text": "bad", "timestamp": "-1"})
        handle.follow_up("next run")
        for _ in range(2):  # before the fix every later attach raised on the entry left pending
            with attach(agent, redis_server.url, "hostile-control"):
                run_pending(agent)
    assert user_texts(agent) == ["after the bad one", "next run"]
    assert "skipped control entry" in caplog.text and "'yesterday'" in caplog.text


def test_a_bad_events_entry_is_skipped_and_events_go_on_even_resuming_before_it(
    redis_server: RedisServer, faux: Any, caplog: pytest.LogCaptureFixture
) -> None:
    keys, handle = RunKeys("hostile-events"), RunHandle(redis_server.url, "hostile-events")
    first = raw(redis_server).xadd(keys.events, {"event": '{"type": "before"}'})
    for bad in ("not json", "[1, 2]", "[" * 5000 + "]" * 5000):
        raw(redis_server).xadd(keys.events, {"event": bad})
    raw(redis_server).xadd(keys.events, {"event": '{"type": "after"}'})
    with caplog.at_level(logging.WARNING, logger="piagent.remote"):
        assert [e["type"] for e in handle.events(timeout=0.2)] == ["before", "after"]
        assert [e["type"] for e in handle.events(since=first, timeout=0.2)] == ["after"]
    assert caplog.text.count("skipped event") == 6


def test_a_bad_event_in_a_batch_is_skipped_and_the_rest_of_the_batch_is_read(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    keys, handle = RunKeys("hostile-batch"), RunHandle(redis_server.url, "hostile-batch")
    raw(redis_server).xadd(keys.events, {"events": '{"type": "a"}\nnot json\n{"type": 7}\n{"type": "b"}'}, id="5-3")
    raw(redis_server).xadd(keys.events, {"events": '{"type": "c"}\n{"type": "d"}'}, id="6-0")  # 2 events up to 6-0
    raw(redis_server).xadd(keys.events, {"events": '{"type": "e"}'}, id="6-1")
    with caplog.at_level(logging.WARNING, logger="piagent.remote"):
        events = list(handle.events(timeout=0.2))
        assert [(e["type"], e["eventId"]) for e in events] == [("a", "5-0"), ("b", "5-3"), ("e", "6-1")]
        assert [e["type"] for e in handle.events(since="5-0", timeout=0.2)] == ["b", "e"]
    assert caplog.text.count("skipped event 5-1") == caplog.text.count("skipped event 5-2") == 2  # once a read
    assert "skipped events entry 6-0" in caplog.text


def test_pending_approvals_skips_a_bad_entry(redis_server: RedisServer) -> None:
    keys, handle = RunKeys("hostile-pending"), RunHandle(redis_server.url, "hostile-pending")
    raw(redis_server).hset(keys.approvals, mapping={"call_ok": '{"toolName": "delete"}', "call_bad": "{nope", "n": "7"})
    assert handle.pending_approvals() == {"call_ok": {"toolName": "delete"}}


@pytest.mark.parametrize("decision", ['{"approved": "no"}', '{"approved": 1}', '"yes"', "not json", "{}"])
def test_only_an_explicit_boolean_true_approves_a_call(redis_server: RedisServer, decision: str) -> None:
    ran = threading.Event()

    @tool
    def delete(name: str) -> str:
        """Delete something."""
        ran.set()
        return f"deleted {name}"

    provider = register_faux_provider()
    provider.set_responses([faux_message([faux_tool_call("delete", {"name": "x"}, id="call_1")]), faux_message("ok")])
    run_id = f"hostile-decision-{abs(hash(decision))}"
    keys, handle = RunKeys(run_id), RunHandle(redis_server.url, run_id)
    agent = Agent(model=provider.get_model(), tools=[delete])
    try:
        handle.follow_up("delete x")
        with attach(agent, redis_server.url, run_id, Approval(timeout=30)):
            runner = threading.Thread(target=run_pending, args=(agent,))
            runner.start()
            assert wait_until(lambda: "call_1" in handle.pending_approvals())
            raw(redis_server).hdel(keys.approvals, "call_1")  # what the decide script does, then the decision
            raw(redis_server).rpush(keys.decision("call_1"), decision)
            runner.join(30)
    finally:
        provider.unregister()
    assert not ran.is_set()
    (result,) = [m for m in agent.state.messages if m.role == "toolResult"]
    assert result.is_error and result.content[0].text == "Denied: the decision was malformed"


@pytest.mark.parametrize("index", ["\u00b2", "\u0661", "-1", "1e3", "9" * 40, ""])
def test_a_bad_delivery_index_of_a_pending_entry_does_not_stop_attach(
    redis_server: RedisServer, faux: Any, index: str
) -> None:
    """A crashed worker leaves its entry pending with the index it was delivered at; whatever
    is written there instead, the next attach() works (the entry is delivered, or was)."""
    run_id = f"hostile-index-{ord(index[0]) if index else 0}"
    keys, client = RunKeys(run_id), raw(redis_server)
    agent = Agent(model=faux.get_model())
    with attach(agent, redis_server.url, run_id):
        pass  # creates the run's consumer group
    RunHandle(redis_server.url, run_id).follow_up("pending")
    (entry,) = [
        entry_id for _, entries in client.xreadgroup(GROUP, CONSUMER, {keys.control: ">"}) for entry_id, _ in entries
    ]
    client.hset(keys.delivering, entry, index)  # the crashed worker's note, overwritten
    with attach(agent, redis_server.url, run_id):
        run_pending(agent)
    assert user_texts(agent) == ["pending"]


def test_an_events_entry_without_a_string_type_is_skipped(redis_server: RedisServer) -> None:
    """Every event ``events()`` yields has its ``type``: consumers dispatch on it."""
    keys, handle = RunKeys("hostile-typeless"), RunHandle(redis_server.url, "hostile-typeless")
    raw(redis_server).xadd(keys.events, {"event": '{"type": "before"}'})
    for fields in ({"event": "{}"}, {"other": "field"}, {"event": '{"type": 5}'}, {"event": '{"type": null}'}):
        raw(redis_server).xadd(keys.events, fields)
    raw(redis_server).xadd(keys.events, {"event": '{"type": "after"}'})
    assert [e["type"] for e in handle.events(timeout=0.2)] == ["before", "after"]


def test_entries_pending_for_another_consumer_of_the_group_do_not_deliver_a_message_twice(
    redis_server: RedisServer, faux: Any
) -> None:
    """Only the consumer ``owner`` is piagent's; entries some other consumer of the group holds
    are not ours to recover, and never make attach() read its own entries twice."""
    run_id = "hostile-consumer"
    keys, client, handle = RunKeys(run_id), raw(redis_server), RunHandle(redis_server.url, run_id)
    agent = Agent(model=faux.get_model())
    with attach(agent, redis_server.url, run_id):
        pass  # creates the run's consumer group
    for text in ("taken", "also taken"):
        handle.follow_up(text)
    client.xreadgroup(GROUP, "intruder", {keys.control: ">"})  # two entries pending for someone else
    handle.follow_up("hello")
    with attach(agent, redis_server.url, run_id):
        run_pending(agent)
    assert user_texts(agent) == ["hello"]


def test_a_delivering_note_redis_refuses_ends_the_run_clearly_and_the_message_waits_for_the_next_worker(
    redis_server: RedisServer, faux: Any
) -> None:
    """The note a queued message needs before it may reach the transcript (written by the run
    thread at its message_start): when Redis refuses it, the run ends with the error and the
    message is neither in the transcript nor acknowledged."""
    run_id = "hostile-delivering"
    keys, client, handle = RunKeys(run_id), raw(redis_server), RunHandle(redis_server.url, run_id)
    client.set(keys.delivering, "not a hash")  # HSET on it: WRONGTYPE
    handle.follow_up("hello")
    agent = Agent(model=faux.get_model())
    with attach(agent, redis_server.url, run_id):
        result = run_pending(agent)
    assert result is not None and "WRONGTYPE" in str(result.error_message)
    assert f"run {run_id!r}" in str(result.error_message)
    assert user_texts(agent) == []
    client.delete(keys.delivering)
    with attach(agent, redis_server.url, run_id):
        run_pending(agent)
    assert user_texts(agent) == ["hello"]
