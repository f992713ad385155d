"""The events stream holds a batch of events per entry (docs/remote.md#the-events-stream), against
a real redis-server: every event keeps an id of its own, a client resumes from any of them
without losing or repeating one, and entries of an older worker (one event each) read in order."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from piagent import Agent
from piagent.remote import RunHandle, attach, run_pending
from piagent.remote._keys import RunKeys, stream_id
from piagent.remote._publisher import encode
from piagent.testing import faux_message, register_faux_provider

from .redis_server import RedisServer


def raw(redis_server: RedisServer) -> redis.Redis:
    return redis.Redis.from_url(redis_server.url, decode_responses=True)


def run_answer(redis_server: RedisServer, run_id: str, answer: str) -> None:
    """A worker runs a follow-up whose answer streams as fast as the faux provider goes."""
    provider = register_faux_provider(chunk_tokens=(1, 1))
    provider.set_responses([faux_message(answer)])
    try:
        RunHandle(redis_server.url, run_id).follow_up("go")
        agent = Agent(model=provider.get_model())
        with attach(agent, redis_server.url, run_id):
            run_pending(agent)
    finally:
        provider.unregister()


def until_end(events: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    taken = []
    for event in events:
        taken.append(event)
        if event["type"] == "agent_end":
            break
    return taken


def batch_sizes(redis_server: RedisServer, run_id: str) -> list[int]:
    entries = raw(redis_server).xrange(RunKeys(run_id).events)
    return [len(fields["events"].split("\n")) if "events" in fields else 1 for _, fields in entries]


def test_a_client_resuming_from_any_event_id_gets_exactly_the_events_after_it(redis_server: RedisServer) -> None:
    run_answer(redis_server, "batches-resume", "word " * 300)
    handle = RunHandle(redis_server.url, "batches-resume")
    everything = until_end(handle.events(timeout=5))
    assert len(everything) > 300 and max(batch_sizes(redis_server, "batches-resume")) > 1  # batches were written
    ids = [event["eventId"] for event in everything]
    assert [stream_id(i) for i in ids] == sorted({stream_id(i) for i in ids})  # one id each, oldest first
    for i, since in enumerate(ids[:-1]):  # at a batch's start, inside it, at its end
        assert until_end(handle.events(since=since, timeout=5)) == everything[i + 1 :], since
    assert list(handle.events(since=ids[-1], timeout=0.1)) == []


def test_the_last_event_id_is_the_newest_events_and_none_before_any(redis_server: RedisServer) -> None:
    handle = RunHandle(redis_server.url, "batches-last")
    assert handle.last_event_id() is None
    run_answer(redis_server, "batches-last", "word " * 50)
    everything = until_end(handle.events(timeout=5))
    assert max(batch_sizes(redis_server, "batches-last")) > 1  # batches were written
    assert handle.last_event_id() == everything[-1]["eventId"]
    assert list(handle.events(since=handle.last_event_id(), timeout=0.1)) == []


def test_entries_of_an_older_worker_read_in_order_between_batches(redis_server: RedisServer) -> None:
    """An older worker wrote one event per entry (field ``event``); this version reads those, and
    numbers its own batches on from them, whoever wrote last."""
    run_id = "batches-mixed"
    keys, client, handle = RunKeys(run_id), raw(redis_server), RunHandle(redis_server.url, run_id)
    client.xadd(keys.events, {"event": json.dumps({"type": "older_first"})})
    run_answer(redis_server, run_id, "one two three")
    older = client.xadd(keys.events, {"event": json.dumps({"type": "older_second"})})
    run_answer(redis_server, run_id, "four five")
    everything = list(handle.events(timeout=0.2))
    types = [event["type"] for event in everything]
    assert types[0] == "older_first" and types.count("agent_end") == 2
    assert types[types.index("agent_end") + 1] == "older_second"
    ids = [stream_id(event["eventId"]) for event in everything]
    assert ids == sorted(set(ids))
    after = everything[types.index("older_second") + 1 :]
    assert list(handle.events(since=older, timeout=0.2)) == after
    text = "".join(e["assistantMessageEvent"].get("delta", "") for e in after if e["type"] == "message_update")
    assert text == "four five"


def test_a_deleted_or_unnumberable_newest_entry_does_not_stop_the_next_runs_events(
    redis_server: RedisServer,
) -> None:
    """The next batch is numbered on from the newest entry's id; where that id cannot be used (the
    entry was deleted, leaving a higher last id; a sequence number at its maximum) the batch is
    numbered from the server's clock."""
    run_id = "batches-renumbered"
    keys, client, handle = RunKeys(run_id), raw(redis_server), RunHandle(redis_server.url, run_id)
    run_answer(redis_server, run_id, "first run")
    client.xdel(keys.events, client.xrevrange(keys.events, count=1)[0][0])  # the first run's agent_end
    run_answer(redis_server, run_id, "second run")
    base, _ = stream_id(client.xrevrange(keys.events, count=1)[0][0])
    client.xadd(keys.events, {"event": json.dumps({"type": "unnumberable"})}, id=f"{base + 1}-18446744073709551000")
    run_answer(redis_server, run_id, "third run")
    everything = list(handle.events(timeout=0.2))
    ids = [stream_id(event["eventId"]) for event in everything]
    assert ids == sorted(set(ids))
    ends = [e["messages"][-1]["content"][0]["text"] for e in everything if e["type"] == "agent_end"]
    assert ends == ["second run", "third run"]
    assert [e["type"] for e in everything].index("unnumberable") < len(everything) - 5


def test_a_client_resuming_from_a_deleted_entrys_id_misses_none_of_the_events_after_it(
    redis_server: RedisServer,
) -> None:
    """Ids go on from the last id given, not from the newest entry left: an entry deleted (XDEL)
    after a client read it leaves no id to be given twice."""
    run_id = "batches-after-a-deletion"
    keys, client, handle = RunKeys(run_id), raw(redis_server), RunHandle(redis_server.url, run_id)
    run_answer(redis_server, run_id, "first run")
    read = client.xrevrange(keys.events, count=1)[0][0]  # the last entry a client read, then deleted
    client.xdel(keys.events, read)
    run_answer(redis_server, run_id, "second run")
    everything = [event for event in handle.events(timeout=0.2)]
    resumed = list(handle.events(since=read, timeout=0.2))
    starts = [index for index, event in enumerate(everything) if event["type"] == "agent_start"]
    second_run = everything[starts[-1] :]
    assert resumed == second_run and resumed[0]["type"] == "agent_start"
    assert resumed[-1]["messages"][-1]["content"][0]["text"] == "second run"


def test_events_are_encoded_as_json_dumps_with_default_str_encodes_them() -> None:
    values: list[Any] = [
        {
            "type": "x",
            "text": "line\nbreak \u00e9 \U0001f600",
            "n": [1, 2.5, None, True],
            "at": datetime.date(2026, 1, 2),
        },
        {"nested": {"deep": [[{"a": float("inf")}]]}, 1: "int key"},
        "a string",
    ]
    for value in values:
        assert encode(value) == json.dumps(value, default=str) and "\n" not in encode(value)


@pytest.mark.parametrize("constructor", [None, lambda *args: 1 / 0, lambda *args: lambda value, level: ["{}"]])
def test_without_a_c_encoder_that_writes_what_json_writes_events_use_json_s_encoder(
    constructor: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from piagent.remote import _publisher

    assert _publisher._c_encoder() is not None  # this CPython's: built once, used for every event
    monkeypatch.setattr(json.encoder, "c_make_encoder", constructor)  # absent, another signature, wrong output
    assert _publisher._c_encoder() is None


def test_a_circular_or_too_deep_event_is_refused_with_a_value_error() -> None:
    circular: dict[str, Any] = {}
    circular["self"] = circular
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    for value in (circular, deep):
        with pytest.raises(ValueError, match="circular or nested too deeply"):
            encode(value)
    assert encode({"after": [{}]}) == '{"after": [{}]}'
