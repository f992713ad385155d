"""Timers, medians and the result table (standard library only)."""

from __future__ import annotations

import statistics
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Tuple


@dataclass
class Timing:
    wall: float  # seconds, time.perf_counter
    cpu: float  # seconds of this process's CPU (all threads), time.process_time


def timed(fn: Callable[[], Any]) -> Tuple[Timing, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return Timing(time.perf_counter() - wall, time.process_time() - cpu), value


def median_timing(timings: List[Timing]) -> Timing:
    return Timing(statistics.median(t.wall for t in timings), statistics.median(t.cpu for t in timings))


def compare(
    run_floor: Callable[[], Any], run_piagent: Callable[[], Any], repeats: int, warmup: int = 1
) -> Tuple[Timing, Timing]:
    """Median timings of the floor and of piagent, runs interleaved so drift hits both alike."""
    for _ in range(warmup):
        run_floor()
        run_piagent()
    floor: List[Timing] = []
    piagent: List[Timing] = []
    for _ in range(repeats):
        floor.append(timed(run_floor)[0])
        piagent.append(timed(run_piagent)[0])
    return median_timing(floor), median_timing(piagent)


def peak_memory(fn: Callable[[], Any]) -> int:
    """Peak bytes allocated by Python while ``fn`` runs (tracemalloc; slows ``fn`` down)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# --------------------------------------------------------------------------- the table


@dataclass
class Row:
    """One figure: piagent's value, the floor's (if any), their ratio and the target."""

    scenario: str
    measure: str
    piagent: str
    floor: str = ""
    ratio: str = ""
    target: str = ""
    passed: Optional[bool] = None  # None: reported, no target
    check: bool = False  # a correctness check (the smoke test asserts these)


@dataclass
class Report:
    rows: List[Row] = field(default_factory=list)

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row

    def check(self, scenario: str, measure: str, ok: bool, detail: str = "") -> Row:
        return self.add(Row(scenario, measure, detail or ("yes" if ok else "no"), target="correct", passed=ok, check=True))

    @property
    def failures(self) -> List[Row]:
        return [row for row in self.rows if row.passed is False]

    def render(self, title: str) -> str:
        head = ("scenario", "measure", "piagent", "floor", "ratio", "target", "result")
        body = [
            (r.scenario, r.measure, r.piagent, r.floor, r.ratio, r.target, "" if r.passed is None else ("PASS" if r.passed else "FAIL"))
            for r in self.rows
        ]
        widths = [max(len(line[i]) for line in [head] + body) for i in range(len(head))]
        right = {2, 3, 4}

        def line(cells: Tuple[str, ...]) -> str:
            return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

        rule = "  ".join("-" * w for w in widths)
        out = [title, "", line(head), rule]
        previous = None
        for cells in body:
            if previous is not None and cells[0] != previous:
                out.append("")
            previous = cells[0]
            out.append(line(cells))
        failed = len(self.failures)
        out.append("")
        out.append(f"{sum(1 for r in self.rows if r.passed is not None) - failed} passed, {failed} failed")
        return "\n".join(out)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms"


def rate(value: float) -> str:
    return f"{value:,.0f}/s"


def times(value: float) -> str:
    return f"{value:.2f}x"


def mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.1f} MiB"
