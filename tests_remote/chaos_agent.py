"""The agent of the Celery chaos test (test_chaos_celery.py), built by a worker for each task.

It is tests/effects/ledger_child.py's agent (``charge`` a, b and c into a ledger file outside
piagent, a ``"safe"`` ``lookup``) on the session ``<dir>/<run id>.jsonl``, ``<dir>`` being
``PIAGENT_TEST_SESSIONS``. Every checkpoint of every run of this worker process (each agent
event, after the session stored what it records; each tool's start; just before and just after
each effect) is counted and appended to the run's ``<run id>.trace`` as ``<pid> <label>``.
``PIAGENT_CHAOS_KILL_AT`` says when the process SIGKILLs itself, killing every run it holds at
whatever point each one is: ``N`` at its Nth checkpoint, ``LABEL:N`` at the Nth whose label
starts with LABEL (``after effect:3``); unset, never. Before it does, it appends
``<pid> <run id> <label>`` to ``<dir>/kills``.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from piagent import Agent
from piagent.sessions import JsonlSession
from tests.effects.ledger_child import ledger_agent

KILL_AT = os.environ.get("PIAGENT_CHAOS_KILL_AT", "")


class ProcessCheckpoints:
    """Counts the checkpoints of all the process's runs (one lock: the kill happens holding it)."""

    lock = threading.Lock()
    hits = 0
    labelled = 0

    def __init__(self, trace: Path) -> None:
        self.trace = trace
        self.label, _, count = KILL_AT.rpartition(":")
        self.kill_at = int(count or 0)

    def hit(self, label: str) -> None:
        with self.lock:
            line = f"{os.getpid()} {label}\n".encode()
            fd = os.open(self.trace, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
            ProcessCheckpoints.hits += 1
            if self.label and label.startswith(self.label):
                ProcessCheckpoints.labelled += 1
            reached = ProcessCheckpoints.labelled if self.label else ProcessCheckpoints.hits
            if self.kill_at and reached == self.kill_at:
                kills = os.open(self.trace.parent / "kills", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                os.write(kills, f"{os.getpid()} {self.trace.stem} {label}\n".encode())
                os.kill(os.getpid(), signal.SIGKILL)


def build_agent(run_id: str) -> Agent:
    folder = Path(os.environ["PIAGENT_TEST_SESSIONS"])
    session = JsonlSession(folder / f"{run_id}.jsonl")
    return ledger_agent(session, ProcessCheckpoints(folder / f"{run_id}.trace"), str(folder / f"{run_id}.ledger"))
