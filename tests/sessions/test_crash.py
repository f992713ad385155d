"""Crash safety for real: agents recording into a session file are killed with SIGKILL at 50 random points.

A zygote process (tests/sessions/crash_child.py) forks each agent run; the run stops at every
checkpoint (each event: mid-stream between deltas, each tool start in a parallel batch, each
``message_end`` after its append) until the test lets it go on. The test kills it either right
at a checkpoint or a random few milliseconds after letting it go (inside an append, an fsync,
a tool). Then the file must load, hold every message reported ended exactly once, and a fresh
process must resume with ``continue_()`` and finish the conversation.

``PIAGENT_CRASH_SEED`` replays a run; the figures are printed (``pytest -s``).
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from piagent.sessions import JsonlSession

from .crash_child import FINAL

CHILD = Path(__file__).with_name("crash_child.py")
ROOT = Path(__file__).resolve().parents[2]
KILLS = 50


class Zygote:
    def __init__(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def ask(self, command: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


class Child:
    """One forked run; it stops at checkpoint ``stop_at`` (0: never) until told to go on."""

    def __init__(self, zygote: Zygote, mode: str, path: Path, directory: Path, name: str, stop_at: int = 0) -> None:
        events, control = directory / f"{name}.events", directory / f"{name}.control"
        os.mkfifo(events)
        os.mkfifo(control)
        self.zygote = zygote
        self.pid = int(zygote.ask(f"{mode} {path} {events} {control}"))
        self.events = open(events)  # noqa: SIM115 - closed in finish()
        self.control = open(control, "wb", buffering=0)  # noqa: SIM115 - likewise
        self.control.write(f"{stop_at}\n".encode())
        self.ended: list[dict[str, Any]] = []
        self.points: list[str] = []

    def run_to_stop(self) -> str:
        """Read reports up to "stopped" or the end; returns that last line."""
        while True:
            line = self.events.readline().rstrip("\n")
            if line.startswith("ended "):
                self.ended.append(json.loads(line[len("ended ") :]))
            if not line or line in ("stopped",) or line.startswith("finished"):
                return line
            self.points.append(line.split(" ", 1)[0])

    def go(self) -> None:
        self.control.write(b"g")

    def kill(self) -> None:
        self.zygote.ask(f"kill {self.pid}")

    def finish(self) -> int:
        """After the child ended (or was killed): read its last reports, reap it, return its exit status."""
        while self.run_to_stop() not in ("",) and not self.events.closed:
            pass
        self.events.close()
        with contextlib.suppress(BrokenPipeError):
            self.control.close()
        return int(self.zygote.ask(f"wait {self.pid}"))


def stored_messages(path: Path) -> list[dict[str, Any]]:
    return [entry["message"] for entry in JsonlSession(path).entries() if entry["type"] == "message"]


def canonical(message: dict[str, Any]) -> str:
    return json.dumps(message, sort_keys=True)


def test_agents_killed_at_50_random_points_lose_no_ended_message_and_resume(
    memory_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tmp_path = memory_dir  # a SIGKILL loses no page cache: the disk's fsync would only slow the test
    seed = int(os.environ.get("PIAGENT_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    zygote = Zygote()
    figures: collections.Counter[str] = collections.Counter()
    started = time.monotonic()
    try:
        # an uninterrupted run: how many checkpoints a whole conversation has
        whole = Child(zygote, "run", tmp_path / "whole.jsonl", tmp_path, "whole")
        assert whole.run_to_stop() == "finished stop" and whole.finish() == 0
        checkpoints = len(whole.points)
        assert stored_messages(tmp_path / "whole.jsonl") == whole.ended

        n = kills = 0
        while kills < KILLS:
            n += 1
            path = tmp_path / f"session-{n}.jsonl"
            stop_at, exact = rng.randrange(1, checkpoints + 1), rng.random() < 0.5
            child = Child(zygote, "run", path, tmp_path, f"run-{n}", stop_at)
            assert child.run_to_stop() == "stopped", f"seed {seed}: the run ended before its checkpoint"
            if not exact:
                child.go()
                time.sleep(rng.uniform(0, 0.001))  # the kill's random moment is the input, not a wait for a result
            child.kill()
            status = child.finish()
            assert status in (-9, 0)
            if status == 0:  # it finished within the random delay: not a kill
                figures["finished before the kill"] += 1
                continue
            kills += 1
            figures[f"killed at {child.points[-1]}{'' if exact else ' (+random delay)'}"] += 1

            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="piagent.sessions"):
                stored = stored_messages(path) if path.exists() else []
            figures["torn last lines skipped"] += sum("torn" in r.message for r in caplog.records)
            keys = [canonical(m) for m in stored]
            assert len(set(keys)) == len(keys), f"seed {seed}, kill {n}: a message was stored twice"
            assert [canonical(m) for m in child.ended] == keys[: len(child.ended)], f"seed {seed}, kill {n}: lost"
            assert len(stored) - len(child.ended) in (0, 1)  # at most the message whose report the kill cut off
            figures[f"resumed after a {stored[-1]['role'] if stored else 'empty'} message"] += 1

            resumed = Child(zygote, "resume", path, tmp_path, f"resume-{n}")
            assert resumed.run_to_stop().startswith("finished")
            assert resumed.finish() == 0
            final = stored_messages(path)
            keys = [canonical(m) for m in final]
            assert len(set(keys)) == len(keys)
            assert keys[: len(stored)] == [canonical(m) for m in stored]  # the resumed run only appended
            assert final[-1]["role"] == "assistant" and final[-1]["content"][0]["text"].startswith(FINAL)
            assert [m["role"] for m in final].count("user") == 1
    finally:
        zygote.close()
    figures["seconds"] = round(time.monotonic() - started)
    print(f"\ncrash test (seed {seed}, {checkpoints} checkpoints per run): {dict(sorted(figures.items()))}")
