"""Proof under chaos with Celery workers and Redis (docs/effects.md#the-proof-under-chaos).

Runs of tests/effects' ledger agent (it charges a, b and c into a ledger file outside piagent)
are started as Celery tasks (``start_run``), several at once, on real worker processes (thread
pool). Each worker life SIGKILLs itself at a random checkpoint (tests_remote/chaos_agent.py):
every run it holds dies wherever it is, its task is delivered again (``acks_late``) to a worker
started in its place, which resumes it from the session (``run_pending``), until every run
finished. Then each run's ledger and transcript are checked: no ``"never"`` effect twice, each
one in the transcript with its result or reported interrupted, every run finished.

``PIAGENT_CHAOS_CELERY_RUNS`` sets the runs (default 200), ``PIAGENT_CHAOS_SEED`` the seed.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis
from celery import Celery

from piagent.remote._keys import RunKeys
from piagent.remote.celery_task import agent_task, resend_if_lost, start_run
from piagent.sessions import JsonlSession
from tests.effects.ledger_child import FINAL, PROMPT
from tests.effects.zygote import settled

from . import chaos_agent
from .processes import CeleryWorker
from .redis_server import RedisServer

RUNS = int(os.environ.get("PIAGENT_CHAOS_CELERY_RUNS", "200"))
SEED = int(os.environ.get("PIAGENT_CHAOS_SEED", "2026"))
WORKERS = 2  # worker processes alive at once
CONCURRENCY = 4  # runs a worker holds at once
IN_FLIGHT = 8  # runs started and not finished
RUNS_PER_LIFE = 5  # a worker life is killed within about this many runs' checkpoints
VISIBILITY = 2.0  # seconds before the broker delivers a dead worker's task again
STALL = 10.0  # seconds between two checks that a run's task message is not lost
DEADLINE = float(os.environ.get("PIAGENT_CHAOS_DEADLINE", "600"))  # seconds for all the runs: a bound, not a measure


def checkpoints_of_a_whole_run(folder: Path) -> int:
    """The checkpoints one run passes when nothing kills it (an agent in this process, no Redis)."""
    os.environ["PIAGENT_TEST_SESSIONS"] = str(folder)
    try:
        chaos_agent.build_agent("reference").prompt(PROMPT)
    finally:
        del os.environ["PIAGENT_TEST_SESSIONS"]
    return len((folder / "reference.trace").read_text().splitlines())


def kill_plan(rng: random.Random, points: int) -> str:
    """A worker life's PIAGENT_CHAOS_KILL_AT: half at a random checkpoint of its first runs, half
    at a random effect's window (just before or just after one)."""
    if rng.random() < 0.5:
        return str(rng.randint(1, points * RUNS_PER_LIFE))
    return f"{rng.choice(['before effect', 'after effect'])}:{rng.randint(1, 3 * RUNS_PER_LIFE)}"


def chaos_task(redis_url: str) -> Any:
    """The task as the web process sees it: the same name and broker as tests_remote.celery_app's."""
    base = redis_url.rsplit("/", 1)[0]
    app = Celery("piagent_chaos_client", broker=f"{base}/1", backend=f"{base}/2")
    return agent_task(app, chaos_agent.build_agent, redis_url, name="tests.run_chaos")


def killed_runs(folder: Path, killed: list[int]) -> Counter:
    """Where each run was when a worker life holding it was killed, by kind of checkpoint (its
    label's first word): the checkpoint that killed it, or the last one it passed in that life,
    unless that was its ``agent_end`` (it had finished there)."""
    killers = {}  # pid -> (run id, label) of the checkpoint that killed it
    for line in (folder / "kills").read_text().splitlines():
        pid, run_id, label = line.split(" ", 2)
        killers[int(pid)] = (run_id, label)
    died_at: Counter = Counter()
    for trace in folder.glob("chaos-*.trace"):
        lines = trace.read_text().splitlines()
        for pid in killed:
            last = [line.split(" ")[1] for line in lines if line.startswith(f"{pid} ")][-1:]
            if killers.get(pid, ("", ""))[0] == trace.stem:
                died_at[killers[pid][1].split(" ")[0]] += 1
            elif last and last[0] != "agent_end":
                died_at[last[0]] += 1
    return died_at


def stuck(folder: Path, run_ids: list[str], workers: list[CeleryWorker]) -> str:
    """What the runs still unfinished at the deadline had done, and what the workers said of them."""
    lines = [f"runs still unfinished: {run_ids}"]
    for run_id in run_ids:
        trace = folder / f"{run_id}.trace"
        lines.append(f"{run_id}: {trace.read_text().splitlines()[-3:] if trace.exists() else 'never started'}")
        lines += [f"  {line.rstrip()}" for one in workers for line in one.lines if run_id in line][-5:]
    return "\n".join(lines)


@pytest.mark.timeout(DEADLINE + 120)
def test_celery_workers_killed_at_random_points_never_repeat_an_effect_and_every_run_finishes(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    print(f"\nseed {SEED} (PIAGENT_CHAOS_SEED), {RUNS} runs (PIAGENT_CHAOS_CELERY_RUNS)")
    folder = tmp_path / "runs"
    folder.mkdir()
    points = checkpoints_of_a_whole_run(tmp_path)
    task = chaos_task(redis_server.url)
    started_at = time.monotonic()

    def worker(number: int) -> CeleryWorker:
        env = {"PIAGENT_TEST_SESSIONS": str(folder), "PIAGENT_CHAOS_KILL_AT": kill_plan(rng, points)}
        return CeleryWorker(redis_server.url, f"w{number}", CONCURRENCY, VISIBILITY, env=env)

    workers = [worker(n) for n in range(WORKERS)]
    killed: list[int] = []  # the pids of the worker lives that ended in a SIGKILL
    waiting = [f"chaos-{n}" for n in range(RUNS)]
    running: dict[str, Any] = {}
    checked: dict[str, float] = {}  # when each running run's task was last checked
    lost = 0  # task messages the broker lost with a killed worker (docs/remote.md#celery)
    lives = WORKERS
    try:
        while waiting or running:
            while waiting and len(running) < IN_FLIGHT:
                run_id = waiting.pop(0)
                running[run_id] = start_run(task, run_id, PROMPT)
                checked[run_id] = time.monotonic()
            for run_id, result in list(running.items()):
                if result.ready():
                    del running[run_id]
                elif time.monotonic() - checked[run_id] > STALL:  # a sweeper's round
                    again = resend_if_lost(task, run_id, result)
                    if again is not None:
                        running[run_id] = again
                        lost += 1
                    checked[run_id] = time.monotonic()
            for n, one in enumerate(workers):
                if one.process.poll() is not None:
                    assert one.process.returncode == -9, "".join(one.lines[-40:])
                    killed.append(one.process.pid)
                    workers[n] = worker(lives)
                    lives += 1
            assert time.monotonic() - started_at < DEADLINE, stuck(folder, sorted(running), workers)
            threading.Event().wait(0.05)  # polling the results and the workers, nothing more
    finally:
        for one in workers:
            one.stop()
    elapsed = time.monotonic() - started_at

    died_at = killed_runs(folder, killed)
    effects = duplicates = interrupted = unfinished = 0
    for n in range(RUNS):
        run_id = f"chaos-{n}"
        session, ledger = folder / f"{run_id}.jsonl", folder / f"{run_id}.ledger"
        found = settled("jsonl", session, ledger)
        unfinished += found.final != FINAL
        counted = found.audit(run_id)
        effects, duplicates, interrupted = effects + counted[0], duplicates + counted[1], interrupted + counted[2]
        assert not JsonlSession(session).messages()[-1].tool_calls
    print(
        f"celery: {RUNS} runs on {lives} worker lives, {len(killed)} SIGKILLs, {sum(died_at.values())} runs killed "
        f"at {len(died_at)} kinds of point {dict(died_at)}, {effects} effects, {interrupted} reported interrupted, "
        f"{duplicates} duplicates, {unfinished} unfinished, {lost} task messages lost by the broker and sent again, "
        f"{elapsed:.0f} s"
    )
    assert duplicates == 0 and unfinished == 0
    assert died_at["after"] > 0 and died_at["before"] > 0  # the windows that matter were hit


def wait_for_lease_expiry(redis_server: RedisServer, run_id: str) -> None:
    """Until the lease of a dead worker on ``run_id`` has expired (piagent.remote's LEASE, 5 s)."""
    client = redis.Redis.from_url(redis_server.url)
    owner = RunKeys(run_id).owner
    for _ in range(300):
        if not client.exists(owner):
            return
        threading.Event().wait(0.05)  # polling Redis, bounded
    raise AssertionError(f"the lease of run {run_id!r} never expired")


def test_a_task_redelivered_after_its_worker_died_just_after_an_effect_reports_the_call_interrupted(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    run_id = "chaos-redelivered"
    env = {"PIAGENT_TEST_SESSIONS": str(tmp_path), "PIAGENT_CHAOS_KILL_AT": "after effect:3"}  # c's, in batch 2
    first = CeleryWorker(redis_server.url, "first", 1, VISIBILITY, env=env)
    task = chaos_task(redis_server.url)
    result = start_run(task, run_id, PROMPT)
    try:
        assert first.process.wait(60) == -9
    finally:
        first.kill()
    assert resend_if_lost(task, run_id, result) is None  # not lost: its lease is still held
    wait_for_lease_expiry(redis_server, run_id)
    assert resend_if_lost(task, run_id, result) is None  # not lost: the broker holds it, unacknowledged
    second = CeleryWorker(redis_server.url, "second", 1, VISIBILITY, env={"PIAGENT_TEST_SESSIONS": str(tmp_path)})
    try:
        summary = result.get(timeout=60)  # the same task, delivered again
    finally:
        second.stop()
    assert summary["ran"] and summary["text"] == FINAL
    found = settled("jsonl", tmp_path / f"{run_id}.jsonl", tmp_path / f"{run_id}.ledger")
    assert sorted(found.effects.values()) == [1, 1, 1]  # a, b and c once each
    [c_key] = [key for key in found.effects if found.results[key.split(":", 1)[1]]["isError"]]
    text = found.results[c_key.split(":", 1)[1]]["content"][0]["text"]
    assert "Tool charge was interrupted" in text and "not run again" in text


def test_resend_if_lost_sends_again_only_a_task_message_the_broker_lost_and_that_task_finishes_the_run(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    run_id = "chaos-lost"
    task = chaos_task(redis_server.url)
    broker = redis.Redis.from_url(redis_server.url.rsplit("/", 1)[0] + "/1")
    result = start_run(task, run_id, PROMPT)  # no worker yet: queued
    assert resend_if_lost(task, run_id, result) is None
    [message] = [raw for raw in broker.lrange("celery", 0, -1) if run_id.encode() in raw]
    assert broker.lrem("celery", 1, message) == 1  # what a worker killed between kombu's pop and its unacked record did
    again = resend_if_lost(task, run_id, result)
    assert again is not None and again.id != result.id
    assert resend_if_lost(task, run_id, again) is None  # queued once more
    worker = CeleryWorker(redis_server.url, "sweeper", 1, VISIBILITY, env={"PIAGENT_TEST_SESSIONS": str(tmp_path)})
    try:
        assert again.get(timeout=60)["text"] == FINAL
    finally:
        worker.stop()
    assert resend_if_lost(task, run_id, again) is None  # done
    found = settled("jsonl", tmp_path / f"{run_id}.jsonl", tmp_path / f"{run_id}.ledger")
    assert sorted(found.effects.values()) == [1, 1, 1]


def test_resend_if_lost_refuses_a_broker_other_than_redis_with_a_clear_error() -> None:
    from piagent import InvalidValueError

    task = agent_task(Celery("piagent_memory", broker="memory://"), chaos_agent.build_agent, "redis://127.0.0.1:1/0")
    with pytest.raises(InvalidValueError, match="Redis broker"):
        resend_if_lost(task, "run-1", task.AsyncResult("unknown"))
