"""examples/celery_app end to end, run the way its README says: from a copy of the example's
folder, with its reports/ made there, a real worker started there (``celery -A tasks worker``)
and each client command (start, events, steer, approve, deny, abort) a separate ``python
client.py`` process with nothing set but the README's ``REDIS_URL``."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
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


def readme_commands() -> list[str]:
    """The lines of the README's shell block, comments dropped."""
    text = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```sh\n(.*?)```", text, re.DOTALL)
    assert block is not None
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def readme_line(prefix: str) -> str:
    """The README's command that starts with ``prefix``."""
    matching = [line for line in readme_commands() if line.startswith(prefix)]
    assert matching, f"the README has no command {prefix!r}"
    return matching[0]


def readme(prefix: str, call: str = "") -> list[str]:
    """The README's command that starts with ``prefix``, as argv, its ``call_...`` replaced by ``call``."""
    return [call if arg == "call_..." else arg for arg in shlex.split(readme_line(prefix))]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the example's folder (``cd examples/celery_app``), with the README's reports made in it."""
    assert readme_commands()[0] == "cd examples/celery_app"
    copy = tmp_path_factory.mktemp("checkout") / "celery_app"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("__pycache__", "reports", "conversations.db*"))
    subprocess.run(readme_line("mkdir -p reports"), shell=True, cwd=copy, check=True, timeout=TIMEOUT)
    return copy


@pytest.fixture(scope="module")
def environment(redis_server: RedisServer) -> dict[str, str]:
    return {"REDIS_URL": redis_server.url}  # the README's "export REDIS_URL=..." (the server is on a free port)


@pytest.fixture(scope="module")
def worker(redis_server: RedisServer, folder: Path, environment: dict[str, str]) -> Iterator[CeleryWorker]:
    assert readme_line("celery ").startswith("celery -A tasks worker --pool threads")
    started = CeleryWorker(redis_server.url, "example", concurrency=8, app="tasks", workdir=folder, env=environment)
    try:
        yield started
    finally:
        started.stop()


def client(folder: Path, environment: dict[str, str], argv: list[str]) -> subprocess.Popen[str]:
    assert argv[:2] == ["python", "client.py"]
    env = {k: v for k, v in os.environ.items() if k not in ("REPORTS_DIR", "SESSIONS_DB", "PIAGENT_MODEL")}
    command = [sys.executable, *argv[1:]]
    return subprocess.Popen(command, cwd=folder, env=dict(env, **environment), stdout=subprocess.PIPE, text=True)


def run(folder: Path, environment: dict[str, str], argv: list[str]) -> dict[str, Any]:
    process = client(folder, environment, argv)
    output, _ = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0
    return json.loads(output)  # type: ignore[no-any-return]


def follow(process: subprocess.Popen[str]) -> Iterator[dict[str, Any]]:
    assert process.stdout is not None
    for line in process.stdout:
        yield json.loads(line)


def test_the_readme_commands_start_steer_approve_deny_and_follow_two_runs(
    worker: CeleryWorker, folder: Path, environment: dict[str, str]
) -> None:
    watcher = client(folder, environment, readme("python client.py events conv-1"))
    assert "task" in run(folder, environment, readme("python client.py start conv-1"))
    steered = False
    end = None
    for event in follow(watcher):
        if event["type"] == "agent_start" and not steered:
            steered = "entry" in run(folder, environment, readme("python client.py steer conv-1"))
        elif event["type"] == "approval_request":  # the approval step, reached as the README runs it
            call, name = event["toolCallId"], event["args"]["name"]
            verdict = "approve" if name == "a.tmp" else "deny"
            assert run(folder, environment, readme(f"python client.py {verdict}", call)) == {"decided": True}
        elif event["type"] == "agent_end":
            end = event
    assert watcher.wait(TIMEOUT) == 0 and end is not None
    assert sorted(path.name for path in (folder / "reports").iterdir()) == ["b.tmp", "c.pdf"]
    final = end["messages"][-1]["content"][0]["text"]
    assert final.startswith("Done:") and "Keep last year's files" in final
    results = [m for m in end["messages"] if m["role"] == "toolResult" and m["toolName"] == "delete_report"]
    assert [(m["isError"], m["content"][0]["text"]) for m in results] == [
        (False, "deleted a.tmp"),
        (True, "not that one"),
    ]

    # the next start continues the conversation; events (no --since) follows the new run, not the last
    watcher = client(folder, environment, readme("python client.py events conv-1"))
    run(folder, environment, readme('python client.py start conv-1 "And'))
    seen = []
    for event in follow(watcher):
        seen.append(event)
        if event["type"] == "approval_request":  # b.tmp again
            denied = run(folder, environment, readme("python client.py deny", event["toolCallId"]))
            assert denied == {"decided": True}
    assert watcher.wait(TIMEOUT) == 0
    assert seen[0]["type"] == "agent_start" and seen[-1]["type"] == "agent_end"
    assert seen[-1]["messages"][0]["content"][0]["text"] == "And the other folder?"
    assert not any(e["eventId"] == end["eventId"] for e in seen)
    transcript = SqliteSession(str(folder / "conversations.db"), "conv-1").messages()
    users = [m.content[0].text for m in transcript if m.role == "user"]
    assert users == ["Clean up the reports folder", "Keep last year's files", "And the other folder?"]


def test_abort_a_run_from_its_own_process(worker: CeleryWorker, folder: Path, environment: dict[str, str]) -> None:
    assert readme("python client.py abort") == ["python", "client.py", "abort", "conv-1"]
    watcher = client(folder, environment, ["python", "client.py", "events", "conv-2"])
    run(folder, environment, ["python", "client.py", "start", "conv-2", "Clean up the reports folder"])
    aborted = None
    for event in follow(watcher):
        if event["type"] == "message_update" and aborted is None:
            aborted = run(folder, environment, ["python", "client.py", "abort", "conv-2"])
        elif event["type"] == "agent_end":
            assert event["messages"][-1]["stopReason"] == "aborted"
    assert aborted == {"aborted": True}
    assert watcher.wait(TIMEOUT) == 0
