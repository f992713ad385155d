"""Drives tests/effects/ledger_child.py: one zygote process, one forked agent process per run."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


class Zygote:
    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.effects.ledger_child"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def run(self, store: str, session: Path, ledger: Path, trace: Path, kill_at: object = 0) -> int:
        """One agent process on ``session``; its exit status (-9: it was killed at checkpoint ``kill_at``)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{store} {session} {ledger} {trace} {str(kill_at).replace(' ', '+')}\n")
        answer = self.process.stdout.readline()
        assert answer, "the zygote died"
        return int(answer)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


def session_records(store: str, path: Path) -> list[dict[str, Any]]:
    from piagent.sessions import JsonlSession, SqliteSession

    session = JsonlSession(path) if store == "jsonl" else SqliteSession(path, "run-1")
    try:
        return session.entries()
    finally:
        session.close()


@dataclass
class Settled:
    """What one finished session says about its tool calls, next to the ledger's effects."""

    effects: Counter = field(default_factory=Counter)  # key -> times it happened
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # call id -> toolResult record
    final: str = ""

    def audit(self, run: Any) -> tuple[int, int, int]:
        """``(effects, duplicates, reported interrupted)``, after checking the chaos rules: every
        effect is in the transcript with its result or reported interrupted, and every result
        saying it charged is an effect that happened."""
        interrupted = 0
        for key in self.effects:
            result = self.results[key.split(":", 1)[1]]
            text = result["content"][0]["text"]
            assert text.startswith("charged ") or (result["isError"] and "was interrupted" in text), (run, text)
            interrupted += result["isError"]
        for call_id, result in self.results.items():
            if result["toolName"] == "charge" and not result["isError"]:
                assert any(key.endswith(f":{call_id}") for key in self.effects), (run, call_id)
        effects = sum(self.effects.values())
        return effects, sum(count - 1 for count in self.effects.values()), interrupted


def settled(store: str, session: Path, ledger: Path) -> Settled:
    found = Settled()
    if ledger.exists():
        found.effects.update(line.split()[0] for line in ledger.read_text().splitlines())
    for entry in session_records(store, session):
        message = entry.get("message") if entry["type"] == "message" else None
        if message and message["role"] == "toolResult":
            found.results[message["toolCallId"]] = message
        elif message and message["role"] == "assistant":
            found.final = "".join(b.get("text", "") for b in message["content"] if b["type"] == "text")
    return found


def result_text(record: dict[str, Any]) -> str:
    return json.dumps(record["content"])
