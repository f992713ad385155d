"""Proof under chaos: agents SIGKILLed at random points, resumed until done, never repeat an effect.

Each run is a fresh session whose agent charges three items (a ledger file outside piagent,
docs/effects.md#the-proof-under-chaos): the process is killed at a random checkpoint, resumed
(and maybe killed again) until the run finishes. ``PIAGENT_CHAOS_RUNS`` sets the runs per store
(default 100: 200 in all) and ``PIAGENT_CHAOS_SEED`` the seed.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from .ledger_child import FINAL
from .zygote import Zygote, settled

RUNS = int(os.environ.get("PIAGENT_CHAOS_RUNS", "100"))
SEED = int(os.environ.get("PIAGENT_CHAOS_SEED", "2026"))
MAX_RESUMES = 8  # resumes that may be killed again; the ninth runs to its end


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    process = Zygote()
    yield process
    process.close()


def checkpoints_of_a_whole_run(zygote: Zygote, store: str, directory: Path) -> int:
    trace = directory / "reference.trace"
    assert zygote.run(store, directory / f"reference.{store}", directory / "reference.ledger", trace) == 0
    return len(trace.read_text().splitlines())


@pytest.mark.parametrize("store", ["jsonl", "sqlite"])
def test_agents_killed_at_random_points_never_repeat_an_effect_and_every_run_finishes(
    zygote: Zygote, memory_dir: Path, store: str
) -> None:
    rng = random.Random(f"{SEED}-{store}")
    points = checkpoints_of_a_whole_run(zygote, store, memory_dir)
    kills: Counter = Counter()
    effects = duplicates = interrupted = 0
    for run in range(RUNS):
        session, ledger, trace = (memory_dir / f"{run}.{name}" for name in (store, "ledger", "trace"))
        kill_at = rng.randint(1, points)
        for attempt in range(MAX_RESUMES + 2):
            status = zygote.run(store, session, ledger, trace, kill_at)
            if status == 0:
                break
            assert status == -9, f"run {run}: the agent process failed ({status}); see its stderr"
            kills[trace.read_text().splitlines()[-1].split(" ")[0:2][0]] += 1
            kill_at = rng.randint(1, points) if attempt < MAX_RESUMES and rng.random() < 0.5 else 0
        else:
            pytest.fail(f"run {run} did not finish")
        found = settled(store, session, ledger)
        assert found.final == FINAL, f"run {run} did not finish: {found.final!r}"
        counted = found.audit(run)
        effects, duplicates, interrupted = effects + counted[0], duplicates + counted[1], interrupted + counted[2]
    print(
        f"\n{store}: {RUNS} runs, {sum(kills.values())} kills at {len(kills)} kinds of point {dict(kills)}, "
        f"{effects} effects, {interrupted} reported interrupted, {duplicates} duplicates"
    )
    assert duplicates == 0
    assert kills["after"] > 0 and kills["before"] > 0  # the windows that matter were hit
