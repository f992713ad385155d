"""Workers killed with SIGKILL: no steering or follow-up message lost or delivered twice.

* a worker process killed between a message's append to the session and its acknowledgement
  in Redis: the next worker sees it in the session and does not deliver it again;
* a Celery worker killed mid-tool-batch and mid-stream, with steering messages it had taken and
  not delivered: the task (``acks_late``) is delivered again to a second worker, which resumes
  from the session and delivers each of those messages once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from piagent.remote import RunHandle
from piagent.sessions import JsonlSession

from .processes import ROOT, CeleryWorker, client, read_until
from .redis_server import RedisServer, without_ttl

TIMEOUT = 60.0
VISIBILITY = 2.0  # seconds before the broker delivers an unacknowledged task again


@pytest.fixture
def session_dir(tmp_path: Path) -> Iterator[Path]:
    os.environ["PIAGENT_TEST_SESSIONS"] = str(tmp_path)
    try:
        yield tmp_path
    finally:
        del os.environ["PIAGENT_TEST_SESSIONS"]


def texts(path: Path) -> list[tuple[str, str]]:
    """(role, text) of each message of the session's branch, read back from disk."""
    out = []
    for message in JsonlSession(path).messages():
        blocks = [b for b in message.content if getattr(b, "type", None) == "text"] if message.content else []
        out.append((message.role, blocks[0].text if blocks else ""))
    return out


def worker_process(redis_url: str, run_id: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests_remote.worker_process", run_id],
        cwd=ROOT, env=dict(os.environ, PIAGENT_TEST_REDIS_URL=redis_url, **env),
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_a_message_in_the_session_whose_worker_died_before_acknowledging_it_is_not_delivered_again(
    redis_server: RedisServer, session_dir: Path
) -> None:
    run_id = "killack-1"
    handle = RunHandle(redis_server.url, run_id)
    handle.follow_up("go")
    second = handle.follow_up("second")
    killed = worker_process(redis_server.url, run_id, PIAGENT_TEST_KILL_AT="second")
    killed.communicate(timeout=TIMEOUT)
    assert killed.returncode == -signal.SIGKILL
    path = session_dir / f"{run_id}.jsonl"
    assert texts(path) == [("user", "go"), ("assistant", "answer to go"), ("user", "second")]
    control = redis.Redis.from_url(redis_server.url, decode_responses=True)
    # taken, never acknowledged ("go"'s acknowledgement rides with its event: the publisher may not have written it)
    pending = control.xpending_range(f"piagent:{{{run_id}}}:control", "worker", "-", "+", 10)
    assert second in [entry["message_id"] for entry in pending]
    assert control.hexists(f"piagent:{{{run_id}}}:delivering", second)  # the note the next worker reads
    assert without_ttl(control, run_id) == []  # kept a week for the next worker (docs/remote.md#keys), not forever

    resumed = worker_process(redis_server.url, run_id)
    output, _ = resumed.communicate(timeout=TIMEOUT)  # stdin closed: one round
    assert resumed.returncode == 0 and json.loads(output)["text"] == "answer to second"
    assert texts(path) == [
        ("user", "go"),
        ("assistant", "answer to go"),
        ("user", "second"),
        ("assistant", "answer to second"),
    ]
    assert control.xpending(f"piagent:{{{run_id}}}:control", "worker")["pending"] == 0
    assert without_ttl(control, run_id) == []


def _kill_and_resume(redis_url: str, run_id: str, kill_on: str) -> list[dict[str, Any]]:
    """Start the run on worker A, steer it twice, SIGKILL A at ``kill_on``, let worker B resume it.

    B starts once the broker's visibility timeout has passed since A took the task, so B's own
    start restores the task, whatever the kombu version's periodic restore interval.
    """
    first = CeleryWorker(redis_url, "a", concurrency=2, visibility=VISIBILITY)
    handle = RunHandle(redis_url, run_id)
    try:
        starter = client(redis_url, "start", run_id, "go")
        starter.communicate(timeout=TIMEOUT)
        events = handle.events(timeout=TIMEOUT)
        taken_at = time.monotonic()  # A has taken the task no later than its first event
        read_until(events, kill_on)
        handle.steer("steer-0")
        handle.steer("steer-1")
        control = redis.Redis.from_url(redis_url, decode_responses=True)
        for _ in range(1000):  # the reader thread takes them at once; bounded wait
            if control.xpending(f"piagent:{{{run_id}}}:control", "worker")["pending"] == 2:
                break
            control.blpop(["piagent-test-never"], timeout=0.01)
        assert control.xpending(f"piagent:{{{run_id}}}:control", "worker")["pending"] == 2
    finally:
        first.kill()
    threading.Event().wait(max(0.0, taken_at + VISIBILITY + 0.5 - time.monotonic()))  # the broker's own timeout
    second = CeleryWorker(redis_url, "b", concurrency=2, visibility=VISIBILITY)
    try:
        return read_until(events, "agent_end")
    finally:
        second.stop()


def test_a_celery_worker_killed_mid_tool_batch_is_resumed_from_the_session_without_loss_or_duplicates(
    redis_server: RedisServer, session_dir: Path
) -> None:
    run_id = "crashtools-1"
    resumed = _kill_and_resume(redis_server.url, run_id, "tool_execution_start")
    assert resumed[-1]["type"] == "agent_end"
    history = texts(session_dir / f"{run_id}.jsonl")
    users = [text for role, text in history if role == "user"]
    assert users == ["go", "steer-0", "steer-1"]
    assert history[-1] == ("assistant", "finished, having read 3 user messages")
    assert history[:2] == [("user", "go"), ("assistant", "")]  # the tool-call message, once
    assert ("assistant", "") not in history[2:]


def test_a_celery_worker_killed_mid_stream_is_resumed_from_the_session_without_loss_or_duplicates(
    redis_server: RedisServer, session_dir: Path
) -> None:
    run_id = "crashstream-1"
    _kill_and_resume(redis_server.url, run_id, "message_update")
    history = texts(session_dir / f"{run_id}.jsonl")
    assert [text for role, text in history if role == "user"] == ["go", "steer-0", "steer-1"]
    answers = [text for role, text in history if role == "assistant"]
    assert all(text.startswith("a slow answer") and text.endswith(" user messages") for text in answers)  # whole
    assert history[-1][1].endswith("after 3 user messages")
