"""The memory half of the concurrent scenario, run in a fresh process per measure.

``python -m benchmarks.concurrent piagent|floor BASE_URL RUNS TURNS [held]`` builds the side's
runs (:func:`benchmarks.scenarios.concurrent_runs`), starts them all at once and prints how much
the process's peak resident memory (``VmHWM``) grew over its resident memory just before: what
the runs added, thread stacks, sockets and allocator arenas included. One run goes first, so
that the modules a first run imports are not counted. Linux only (``/proc``).

Started at once, the runs still overlap only as long as they last: a side whose runs end
sooner has fewer in flight at its peak. With ``held``, every run waits in its second tool call
until all of them are there, and the growth of resident memory (``VmRSS``) is taken at that
moment: what one run in flight holds, on each side, with all of them in flight.
"""

from __future__ import annotations

import sys
import threading

from .scenarios import concurrent_runs

HELD_CALL = "call_turn_1"  # the tool call each run waits in (the second turn's)
HOLD_TIMEOUT = 60.0  # seconds the runs wait for one another (a run that failed never comes)


def _status(field: str) -> int:
    """A ``/proc/self/status`` size field, in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def main(argv: list[str]) -> int:
    side, base, runs, turns = argv[0], argv[1], int(argv[2]), int(argv[3])
    held = argv[4:] == ["held"]
    if held and turns < 2:
        print("held: the runs wait in their second tool call, so they need at least 2 turns", file=sys.stderr)
        return 2
    concurrent_runs(base, 1, turns)[side]()  # one run first: imports and caches are not the runs' memory
    all_there = threading.Barrier(runs + 1, timeout=HOLD_TIMEOUT)  # a run gone wrong breaks it: no hang
    added: list[int] = []

    def hold(tool_call_id: str) -> None:
        if tool_call_id == HELD_CALL:
            all_there.wait()  # every run is in its tool call
            all_there.wait()  # measured: go on

    run = concurrent_runs(base, runs, turns, hold if held else None)[side]

    def measure() -> None:
        all_there.wait()
        added.append(_status("VmRSS") - before)
        all_there.wait()

    before = _status("VmRSS")
    if held:
        threading.Thread(target=measure, daemon=True).start()
    results = run()
    if not all(results):
        print(f"{side}: {results.count(False)} of {runs} runs went wrong", file=sys.stderr)
        return 1
    if held and not added:
        print(f"{side}: the runs were never all in their tool call at once", file=sys.stderr)
        return 1
    print(added[0] if held else _status("VmHWM") - before)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
