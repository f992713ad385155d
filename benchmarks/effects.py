"""The effects scenario: what storing a tool call's intent costs (docs/effects.md#cost).

* one call: ``Session.record_intents([intent])`` on a ``JsonlSession`` (one append: write +
  fsync) against the floor, ``os.write`` + ``os.fsync`` of the same JSON line to a file of
  its own (no lock, no header check); target <= 2x the floor, as for the session append.
* a parallel batch of ``parallel_tools`` calls: their intents in one write, per call; target
  under 1 ms per call.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from typing import Any

from piagent import ToolIntent
from piagent.ai.types import UserMessage
from piagent.sessions import JsonlSession

from .measure import Report, Rounds, Row, ms, times


def _intent(n: int) -> ToolIntent:
    arguments = {"to": "ada@example.com", "amount": 1250, "note": "x" * 200}
    return ToolIntent(f"call_{n:06d}", "send_payment", arguments, time.time(), "bench:1", f"bench:call_{n:06d}")


def bench_effects(sizes: Any, report: Report) -> None:
    batch = sizes.parallel_tools
    counter = iter(range(10**9))
    with tempfile.TemporaryDirectory() as directory:
        session = JsonlSession(os.path.join(directory, "effects.jsonl"))
        session.append_message(UserMessage("go"))
        line = (
            json.dumps({"type": "custom", "customType": "piagent.tool_intent", "data": _intent(0).to_dict()}) + "\n"
        ).encode()
        floor_fd = os.open(os.path.join(directory, "floor.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

        def floor() -> None:
            os.write(floor_fd, line)
            os.fsync(floor_fd)

        try:
            rounds = Rounds(
                {
                    "floor": floor,
                    "one": lambda: session.record_intents([_intent(next(counter))]),
                    "batch": lambda: session.record_intents([_intent(next(counter)) for _ in range(batch)]),
                },
                sizes.session_appends,
            )
        finally:
            os.close(floor_fd)
        stored = len(JsonlSession(session.path).intents())
    expected = (sizes.session_appends + 1) * (1 + batch)  # +1: the warm-up round
    report.check("effects", "every intent stored", stored == expected, failure=stored)
    ratio = rounds.ratio("one", "floor")
    report.add(
        Row(
            "effects",
            "intent write, one call (write + fsync)",
            ms(rounds.median("one").wall),
            ms(rounds.median("floor").wall),
            times(ratio),
            "<= 2.00x floor",
            ratio <= 2.0,
        )
    )
    per_call = rounds.median("batch").wall / batch
    report.add(
        Row(
            "effects",
            f"intent write per call, batch of {batch} (one fsync)",
            ms(per_call),
            target="< 1 ms",
            passed=per_call < 0.001,
        )
    )
