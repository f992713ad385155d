"""Timers, medians and the result table (standard library only)."""

from __future__ import annotations

import statistics
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Any, Callable, Optional


@dataclass
class Timing:
    wall: float  # seconds, time.perf_counter
    cpu: float  # seconds of this process's CPU (all threads), time.process_time


def timed(fn: Callable[[], Any]) -> tuple[Timing, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return Timing(time.perf_counter() - wall, time.process_time() - cpu), value


def median_timing(timings: list[Timing]) -> Timing:
    return Timing(statistics.median(t.wall for t in timings), statistics.median(t.cpu for t in timings))


class Rounds:
    """Timings of several variants run in rounds: each round runs every variant once, back to back.

    A ratio is the median over rounds of the per-round ratio, so load that comes and goes on
    the machine (it is shared) hits both sides of each ratio alike. Each round starts one variant
    further on (with two: every other round in reverse order), so that what a place in a round
    costs hits each variant alike too (the first of two MCP clients with the same code measured
    a few per cent slower than the second, round after round).
    """

    def __init__(self, runs: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1) -> None:
        for _ in range(warmup):
            for run in runs.values():
                run()
        self.timings: dict[str, list[Timing]] = {name: [] for name in runs}
        order = list(runs.items())
        for index in range(repeats):
            start = index % len(order)
            for name, run in order[start:] + order[:start]:
                self.timings[name].append(timed(run)[0])

    def median(self, name: str) -> Timing:
        return median_timing(self.timings[name])

    def best_ratio(self, name: str, other: str) -> float:
        """``name``'s best (least disturbed) wall time divided by ``other``'s.

        Load on a shared machine only ever adds time, so the minimum is the least noisy
        estimate of a variant's own cost; used where a figure compares a variant with itself.
        """
        return min(t.wall for t in self.timings[name]) / min(t.wall for t in self.timings[other])

    def ratio(self, name: str, other: str, cpu: bool = False) -> float:
        """Median over rounds of ``name``'s time divided by ``other``'s."""
        pick = (lambda t: t.cpu) if cpu else (lambda t: t.wall)
        pairs = zip(self.timings[name], self.timings[other])
        return statistics.median(pick(a) / pick(b) for a, b in pairs)


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
    rows: list[Row] = field(default_factory=list)

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row

    def check(self, scenario: str, measure: str, ok: bool, detail: str = "", failure: Any = None) -> Row:
        """A correctness row showing ``detail``, else "yes".

        A failed check shows ``failure`` (what was seen) if given.
        """
        shown = str(failure) if not ok and failure is not None else detail or ("yes" if ok else "no")
        return self.add(Row(scenario, measure, shown, target="correct", passed=ok, check=True))

    @property
    def failures(self) -> list[Row]:
        return [row for row in self.rows if row.passed is False]

    def render(self, title: str) -> str:
        head = ("scenario", "measure", "piagent", "floor", "ratio", "target", "result")
        body = [
            (
                r.scenario,
                r.measure,
                r.piagent,
                r.floor,
                r.ratio,
                r.target,
                "" if r.passed is None else ("PASS" if r.passed else "FAIL"),
            )
            for r in self.rows
        ]
        widths = [max(len(line[i]) for line in [head] + body) for i in range(len(head))]
        right = {2, 3, 4}

        def line(cells: tuple[str, ...]) -> str:
            return "  ".join(
                c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
            ).rstrip()

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


def kib(nbytes: float) -> str:
    return f"{nbytes / 2**10:,.1f} KiB"
