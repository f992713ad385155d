"""Runs in real Celery workers (thread pool), driven from other real processes through a real Redis.

Two workers serve every test of this module; each client (producer, aborter, approver, starter)
is its own OS process.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from piagent.remote import RunHandle

from .processes import CeleryWorker, client, read_until
from .redis_server import RedisServer
from .scenarios import PRODUCERS, SLOW_TOOL_SECONDS, STEERS_PER_PRODUCER

RUN_TIMEOUT = 60.0  # seconds any run of this module may take; every wait below is bounded by it


@pytest.fixture(scope="module")
def workers(redis_server: RedisServer) -> Iterator[list[CeleryWorker]]:
    started = [CeleryWorker(redis_server.url, f"w{i}", concurrency=25) for i in range(2)]
    try:
        yield started
    finally:
        for worker in started:
            worker.stop()


def follow(handle: RunHandle) -> list[dict[str, Any]]:
    """The run's events up to its ``agent_end``."""
    return read_until(handle.events(timeout=RUN_TIMEOUT), "agent_end")


def start(redis_server: RedisServer, run_id: str, *args: str) -> None:
    process = client(redis_server.url, "start", run_id, *args)
    output, _ = process.communicate(timeout=RUN_TIMEOUT)
    assert process.returncode == 0 and "task" in json.loads(output)


def user_texts(events: list[dict[str, Any]]) -> list[str]:
    return [
        e["message"]["content"][0]["text"]
        for e in events
        if e["type"] == "message_end" and e["message"]["role"] == "user"
    ]


def test_steering_from_four_producer_processes_is_delivered_exactly_once_in_each_producers_order(
    redis_server: RedisServer, workers: list[CeleryWorker]
) -> None:
    handle = RunHandle(redis_server.url, "steer-1")
    start(redis_server, "steer-1")
    events = handle.events(timeout=RUN_TIMEOUT)
    seen = read_until(events, "tool_execution_start")  # the model pauses until it has every steering message
    producers = [
        client(redis_server.url, "steer", "steer-1", f"p{i}", str(STEERS_PER_PRODUCER)) for i in range(PRODUCERS)
    ]
    for producer in producers:
        output, _ = producer.communicate(timeout=RUN_TIMEOUT)
        assert json.loads(output) == {"sent": STEERS_PER_PRODUCER}
    seen += read_until(events, "agent_end")
    delivered = user_texts(seen)
    steered = [text for text in delivered if text.startswith("p")]
    assert delivered[0] == "go"
    assert sorted(steered) == sorted(f"p{i}-{k}" for i in range(PRODUCERS) for k in range(STEERS_PER_PRODUCER))
    for i in range(PRODUCERS):
        mine = [int(text.split("-")[1]) for text in steered if text.startswith(f"p{i}-")]
        assert mine == list(range(STEERS_PER_PRODUCER))
    final = seen[-1]["messages"][-1]
    assert final["content"][0]["text"] == f"received {PRODUCERS * STEERS_PER_PRODUCER}"


def test_abort_from_another_process_ends_the_run_at_once(
    redis_server: RedisServer, workers: list[CeleryWorker]
) -> None:
    handle = RunHandle(redis_server.url, "abort-1")
    start(redis_server, "abort-1")
    events = handle.events(timeout=RUN_TIMEOUT)
    read_until(events, "tool_execution_start")
    aborter = client(redis_server.url, "abort", "abort-1")
    event = read_until(events, "agent_end")[-1]
    ended_at = time.time()
    output, _ = aborter.communicate(timeout=RUN_TIMEOUT)
    sent = json.loads(output)
    assert sent["attached"] is True
    latency = ended_at - sent["sentAt"]
    print(f"abort latency (abort() in another process -> agent_end followed here): {latency * 1000:.1f} ms")
    assert latency < SLOW_TOOL_SECONDS / 3  # the tool would have run 30 s; the figure is in the report
    result = event["messages"]
    assert result[-1]["stopReason"] == "aborted"
    assert RunHandle(redis_server.url, "abort-1").abort() is False  # nothing attached any more


def test_approvals_granted_and_denied_from_other_processes_and_one_timing_out(
    redis_server: RedisServer, workers: list[CeleryWorker]
) -> None:
    handle = RunHandle(redis_server.url, "approve-1")
    deciders = [  # two approver processes, each watching the run's events for its call
        client(redis_server.url, "decide", "approve-1", "call_a", "approve"),
        client(redis_server.url, "decide", "approve-1", "call_b", "deny", "b stays"),
    ]
    for decider in deciders:
        assert decider.stdout is not None and json.loads(decider.stdout.readline()) == {"ready": True}
    start(redis_server, "approve-1", "approval", "clean up")
    events = handle.events(timeout=RUN_TIMEOUT)
    seen = read_until(events, "approval_request")
    seen += read_until(events, "approval_request")
    seen += read_until(events, "approval_request")  # call_c: nobody decides it, pending until its timeout
    assert handle.pending_approvals()["call_c"]["toolName"] == "delete"
    seen += read_until(events, "agent_end")
    requests = [e for e in seen if e["type"] == "approval_request"]
    assert [(e["toolCallId"], e["args"]) for e in requests] == [(f"call_{n}", {"name": n}) for n in "abc"]
    assert [json.loads(d.communicate(timeout=RUN_TIMEOUT)[0]) for d in deciders] == [{"decided": True}] * 2
    late = client(redis_server.url, "approve", "approve-1", "call_c")  # after its timeout: changes nothing
    assert json.loads(late.communicate(timeout=RUN_TIMEOUT)[0]) == {"decided": False}

    decisions = {e["toolCallId"]: e for e in seen if e["type"] == "approval_decision"}
    assert decisions["call_a"]["approved"] is True
    assert decisions["call_b"] == {**decisions["call_b"], "approved": False, "reason": "b stays"}
    assert decisions["call_c"]["approved"] is False and decisions["call_c"]["timedOut"] is True
    results = {e["toolCallId"]: e for e in seen if e["type"] == "tool_execution_end"}
    assert (results["call_a"]["isError"], results["call_a"]["result"]["content"][0]["text"]) == (False, "deleted a")
    assert (results["call_b"]["isError"], results["call_b"]["result"]["content"][0]["text"]) == (True, "b stays")
    assert results["call_c"]["isError"] is True
    assert results["call_c"]["result"]["content"][0]["text"] == "Approval timed out after 2 s"
    assert handle.pending_approvals() == {}


def test_fifty_concurrent_runs_on_two_workers_each_get_their_own_events_and_answer(
    redis_server: RedisServer, workers: list[CeleryWorker]
) -> None:
    runs = [f"answer-{i:02d}" for i in range(50)]
    web = client(redis_server.url, "start-many", *runs)  # sends the 50 tasks, then waits for their results
    summaries = json.loads(web.communicate(timeout=RUN_TIMEOUT)[0])
    assert [s["text"] for s in summaries] == [f"answer to question {run_id}" for run_id in runs]
    for run_id in runs:
        events = list(follow(RunHandle(redis_server.url, run_id)))
        mine = [f"question {run_id}", f"answer to question {run_id}"]
        texts = [e["message"]["content"][0]["text"] for e in events if e["type"] == "message_end"]
        assert texts == mine
        deltas = [e["assistantMessageEvent"] for e in events if e["type"] == "message_update"]
        assert "".join(d.get("delta", "") for d in deltas) == mine[1]  # its own stream, no other run's
    served = [sum("succeeded" in line and "'answer-" in line for line in worker.lines) for worker in workers]
    assert sum(served) == len(runs) and min(served) > 0, served  # both workers took some
