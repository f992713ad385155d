"""Real OS processes for the remote tests: Celery workers and one-shot RunHandle clients.

``python -m tests_remote.processes steer RUN_ID PREFIX COUNT`` (and ``abort``, ``approve``,
``decide``, ``start``, ``start-many``) is one client process; it prints what it did as JSON lines.
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
from typing import Any, Optional

ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT = 60.0


class CeleryWorker:
    """``celery worker`` (thread pool) in its own process; ``kill()`` is SIGKILL."""

    def __init__(
        self,
        redis_url: str,
        name: str,
        concurrency: int = 8,
        visibility: Optional[float] = None,
        app: str = "tests_remote.celery_app",
        workdir: Path = ROOT,
        env: Optional[dict[str, str]] = None,
    ) -> None:
        env = dict(os.environ, PIAGENT_TEST_REDIS_URL=redis_url, **(env or {}))
        if visibility is not None:
            env["PIAGENT_TEST_VISIBILITY"] = str(visibility)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        command = [
            sys.executable, "-m", "celery", "--workdir", str(workdir), "-A", app, "worker", "--pool", "threads",
            "--concurrency", str(concurrency), "-n", f"{name}@%h", "--without-gossip", "--without-mingle",
            "--without-heartbeat", "--loglevel", "INFO",
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        self.lines: list[str] = []
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(READY_TIMEOUT):
            self.kill()
            raise RuntimeError("celery worker did not start:\n" + "".join(self.lines[-30:]))

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            if " ready." in line:
                self._ready.set()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


def read_until(events: Iterator[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    """The events up to and including the first one of type ``kind``; AssertionError if none comes
    (the iterator's own timeout bounds the wait)."""
    seen = []
    for event in events:
        seen.append(event)
        if event["type"] == kind:
            return seen
    raise AssertionError(f"no {kind} event came")


def client(redis_url: str, *args: str) -> subprocess.Popen[str]:
    """Start one client process (see the module docstring); read its output with communicate()."""
    env = dict(os.environ, PIAGENT_TEST_REDIS_URL=redis_url)
    return subprocess.Popen(
        [sys.executable, "-m", "tests_remote.processes", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )


def main(argv: list[str]) -> None:
    from piagent.remote import RunHandle

    from .scenarios import redis_url

    command, run_id, *rest = argv
    with RunHandle(redis_url(), run_id) as handle:
        if command == "steer":
            prefix, count = rest[0], int(rest[1])
            for k in range(count):
                handle.steer(f"{prefix}-{k}")
            print(json.dumps({"sent": count}), flush=True)
        elif command == "abort":
            sent_at = time.time()
            print(json.dumps({"sentAt": sent_at, "attached": handle.abort("stop pressed")}), flush=True)
        elif command == "approve":
            print(json.dumps({"decided": handle.approve(rest[0])}), flush=True)
        elif command == "decide":  # an approver watching the run: decides rest[0] once it is requested
            call, verdict = rest[0], rest[1]
            print(json.dumps({"ready": True}), flush=True)
            for event in handle.events(timeout=60):
                if event["type"] == "approval_request" and event["toolCallId"] == call:
                    decided = handle.approve(call) if verdict == "approve" else handle.deny(call, rest[2])
                    print(json.dumps({"decided": decided}), flush=True)
                    break
        elif command == "start-many":  # a web process starting runs (run_id, more ids...) and waiting
            from piagent.remote.celery_task import start_run

            from .celery_app import run_conversation

            results = [start_run(run_conversation, one, f"question {one}") for one in [run_id, *rest]]
            print(json.dumps([result.get(timeout=60) for result in results]), flush=True)
        elif command == "start":
            from piagent.remote.celery_task import start_run

            from .celery_app import run_conversation, run_with_approval

            task = run_with_approval if rest and rest[0] == "approval" else run_conversation
            result = start_run(task, run_id, rest[-1] if rest else "go")
            print(json.dumps({"task": result.id}), flush=True)
        else:
            raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
