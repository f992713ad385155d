"""The sessions scenario: loading a real pi session, and appending to small and large sessions.

* load: ``JsonlSession(path)`` on the 2.3 MB pi fixture (read, parse, migrate v1, index)
  against the floor, ``json.loads`` over the file's lines (read included); target <= 2x.
* append: one ``append_message`` (write + fsync) to a session of ``small`` entries and to one
  of ``large`` entries (timed in rounds, best runs compared); O(1) means the ratio stays near
  1, whatever the size; target <= 2x.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from piagent.ai.types import UserMessage
from piagent.sessions import JsonlSession, StoredMessage

from .measure import Report, Rounds, Row, ms, times

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "sessions" / "data" / "before-compaction.jsonl"


def _json_lines(path: Path) -> list[Any]:
    return [json.loads(line) for line in path.read_bytes().split(b"\n") if line]


def _session_of(directory: str, name: str, entries: int) -> JsonlSession:
    """A session file of ``entries`` message entries, written directly, then opened."""
    path = os.path.join(directory, name)
    with open(path, "w", encoding="utf-8") as file:
        file.write(json.dumps({"type": "session", "version": 3, "id": name, "timestamp": "", "cwd": ""}) + "\n")
        parent = None
        for n in range(entries):
            message = {"role": "user", "content": f"message {n} " + "x" * 400, "timestamp": n}
            entry = {"type": "message", "id": f"e{n}", "parentId": parent, "timestamp": "", "message": message}
            file.write(json.dumps(entry) + "\n")
            parent = f"e{n}"
    return JsonlSession(path)


def bench_sessions(sizes: Any, report: Report) -> None:
    session = JsonlSession(FIXTURE)
    context = session.messages()
    ok = len(session.entries()) == 1002 and isinstance(context[0], StoredMessage)
    report.check("sessions", "pi fixture: 1,002 entries, context from its last compaction", ok, failure=len(context))

    load = Rounds({"piagent": lambda: JsonlSession(FIXTURE), "floor": lambda: _json_lines(FIXTURE)}, sizes.repeats)
    ratio = load.ratio("piagent", "floor")
    report.add(
        Row(
            "sessions",
            "load the 2.3 MB pi session",
            ms(load.median("piagent").wall),
            ms(load.median("floor").wall),
            times(ratio),
            "<= 2.00x floor",
            ratio <= 2.0,
        )
    )

    small_size, large_size = sizes.session_sizes
    with tempfile.TemporaryDirectory() as directory:
        small = _session_of(directory, "small.jsonl", small_size)
        large = _session_of(directory, "large.jsonl", large_size)
        appends = Rounds(
            {
                "small": lambda: small.append_message(UserMessage("one more")),
                "large": lambda: large.append_message(UserMessage("one more")),
            },
            sizes.session_appends,
        )
        ok = len(JsonlSession(large.path).entries()) == large_size + sizes.session_appends + 1  # +1: the warm-up
    report.check("sessions", "every append stored", ok)
    ratio = appends.best_ratio("large", "small")
    report.add(
        Row(
            "sessions",
            f"append (write + fsync) at {large_size:,} vs {small_size:,} entries",
            ms(min(t.wall for t in appends.timings["large"])),
            ms(min(t.wall for t in appends.timings["small"])),
            times(ratio),
            "<= 2.00x (O(1))",
            ratio <= 2.0,
        )
    )
