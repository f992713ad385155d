"""``python -m benchmarks`` (``make bench``): run the scenarios and print the table.

Options: ``--only stream,args`` runs some scenarios (stream, args, turns, parallel, fanout, concurrent, otel,
sessions, effects, compaction, output, first_request, import, remote); ``--tiny`` uses the smoke-test sizes;
``--repeats N`` changes the number of timed runs; ``--profile`` runs the selection under
cProfile and prints the top functions instead of timing it. The exit status is 1 if a target or a check failed.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import os
import platform
import pstats
import sys

from .scenarios import FULL, TINY, run_all


def main(argv: list = None) -> int:  # type: ignore[assignment]
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated scenarios to run")
    parser.add_argument("--tiny", action="store_true", help="smoke-test sizes")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per figure (median)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the run")
    args = parser.parse_args(argv)
    sizes = TINY if args.tiny else FULL
    if args.repeats is not None:
        sizes = dataclasses.replace(sizes, repeats=args.repeats, args_repeats=args.repeats, otel_repeats=args.repeats)
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        report = run_all(sizes, only)
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(40)
    else:
        report = run_all(sizes, only)
    title = (
        f"piagent benchmarks: Python {platform.python_version()} on {platform.system()}, "
        f"{os.cpu_count()} CPUs; medians of {sizes.repeats} runs; floor = bare requests + json.loads loop"
    )
    print(report.render(title))
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
