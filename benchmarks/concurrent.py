"""The memory half of the concurrent scenario, run in a fresh process per measure.

``python -m benchmarks.concurrent piagent|floor BASE_URL RUNS TURNS`` builds the side's runs
(:func:`benchmarks.scenarios.concurrent_runs`), starts them all at once and prints how much
the process's peak resident memory (``VmHWM``) grew over its resident memory just before: what
the runs added, thread stacks, sockets and allocator arenas included. One run goes first, so
that the modules a first run imports are not counted. Linux only (``/proc``).
"""

from __future__ import annotations

import sys

from .scenarios import concurrent_runs


def _status(field: str) -> int:
    """A ``/proc/self/status`` size field, in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def main(argv: list[str]) -> int:
    side, base, runs, turns = argv[0], argv[1], int(argv[2]), int(argv[3])
    concurrent_runs(base, 1, turns)[side]()  # one run first: imports and caches are not the runs' memory
    run = concurrent_runs(base, runs, turns)[side]
    before = _status("VmRSS")
    results = run()
    if not all(results):
        print(f"{side}: {results.count(False)} of {runs} runs went wrong", file=sys.stderr)
        return 1
    print(_status("VmHWM") - before)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
