"""examples/celery_app end to end: a real worker runs it; start, events, steer, approve, deny and
abort are each a separate ``client.py`` process, as in its README."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from piagent.sessions import SqliteSession

from .processes import ROOT, CeleryWorker
from .redis_server import RedisServer

EXAMPLE = ROOT / "examples" / "celery_app"
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("reports")
    for name in ("a.tmp", "b.tmp", "keep.pdf"):
        (folder / name).write_text(name)
    return folder


@pytest.fixture(scope="module")
def environment(redis_server: RedisServer, reports: Path) -> dict[str, str]:
    database = reports.parent / "conversations.db"
    return {"REDIS_URL": redis_server.url, "REPORTS_DIR": str(reports), "SESSIONS_DB": str(database)}


@pytest.fixture(scope="module")
def worker(redis_server: RedisServer, environment: dict[str, str]) -> Iterator[CeleryWorker]:
    started = CeleryWorker(redis_server.url, "example", concurrency=4, app="tasks", workdir=EXAMPLE, env=environment)
    try:
        yield started
    finally:
        started.stop()


def client(environment: dict[str, str], *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, **environment)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    command = [sys.executable, str(EXAMPLE / "client.py"), *args]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


def run(environment: dict[str, str], *args: str) -> dict[str, Any]:
    process = client(environment, *args)
    output, _ = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0
    return json.loads(output)  # type: ignore[no-any-return]


def follow(process: subprocess.Popen[str]) -> Iterator[dict[str, Any]]:
    assert process.stdout is not None
    for line in process.stdout:
        yield json.loads(line)


def test_start_steer_approve_deny_and_follow_a_run_each_from_its_own_process(
    worker: CeleryWorker, environment: dict[str, str], reports: Path
) -> None:
    watcher = client(environment, "events", "conv-1")
    assert "task" in run(environment, "start", "conv-1", "Clean up the reports folder")
    steered = False
    end = None
    for event in follow(watcher):
        if event["type"] == "agent_start" and not steered:
            steered = "entry" in run(environment, "steer", "conv-1", "Keep last year's files")
        elif event["type"] == "approval_request":
            call, name = event["toolCallId"], event["args"]["name"]
            verdict = ["approve", "conv-1", call] if name == "a.tmp" else ["deny", "conv-1", call, "keep", "b"]
            assert run(environment, *verdict) == {"decided": True}
        elif event["type"] == "agent_end":
            end = event
    assert watcher.wait(TIMEOUT) == 0 and end is not None
    assert sorted(path.name for path in reports.iterdir()) == ["b.tmp", "keep.pdf"]
    final = end["messages"][-1]["content"][0]["text"]
    assert final.startswith("Done:") and "Keep last year's files" in final
    results = [m for m in end["messages"] if m["role"] == "toolResult" and m["toolName"] == "delete_report"]
    assert [(m["isError"], m["content"][0]["text"]) for m in results] == [(False, "deleted a.tmp"), (True, "keep b")]

    # the conversation is in the session: the next start continues it
    watcher = client(environment, "events", "conv-1", "--since", end["eventId"])
    run(environment, "start", "conv-1", "And now?")
    for event in follow(watcher):
        if event["type"] == "approval_request":  # b.tmp again
            assert run(environment, "deny", "conv-1", event["toolCallId"], "still", "no") == {"decided": True}
        elif event["type"] == "agent_end":
            again = event
    assert watcher.wait(TIMEOUT) == 0
    transcript = SqliteSession(environment["SESSIONS_DB"], "conv-1").messages()
    users = [m.content[0].text for m in transcript if m.role == "user"]
    assert users == ["Clean up the reports folder", "Keep last year's files", "And now?"]
    assert again["messages"][0]["content"][0]["text"] == "And now?"


def test_abort_a_run_from_its_own_process(worker: CeleryWorker, environment: dict[str, str]) -> None:
    watcher = client(environment, "events", "conv-2")
    run(environment, "start", "conv-2", "Clean up the reports folder")
    aborted = None
    for event in follow(watcher):
        if event["type"] == "message_update" and aborted is None:
            aborted = run(environment, "abort", "conv-2")
        elif event["type"] == "agent_end":
            assert event["messages"][-1]["stopReason"] == "aborted"
    assert aborted == {"aborted": True}
    assert watcher.wait(TIMEOUT) == 0
