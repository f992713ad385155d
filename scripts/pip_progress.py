"""Run a long pip command and show that it is alive: what it is doing, every few seconds.

    python scripts/pip_progress.py [--every SECONDS] LOG -- python -m pip install -v ...

``make demo`` installs llama-cpp-python this way: the first time, pip compiles llama.cpp from
source (about 10 minutes on 2 cores) and prints nothing useful meanwhile. pip's whole output
goes to LOG; every ``--every`` seconds (default 20) one line says how long it has run and what
it does: the compile step (``step 45 of 212`` from ninja's ``[45/212]`` lines, ``45%`` from
make's ``[ 45%]``) or pip's last stage (Collecting, Building wheel, Installing...). A quick
install (the wheel already in pip's cache) prints no progress line. On failure the end of LOG
is shown and pip's exit status returned. Standard library only: it runs before anything is
installed.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import threading
import time
from typing import IO, Optional

STEP = re.compile(r"^\s*\[\s*(\d+)(?:/(\d+)|%)\]")  # ninja's [45/212], make's [ 45%]
STAGE = re.compile(r"^\s*(Collecting|Processing|Obtaining|Building|Created wheel|Installing|Successfully)\b")
TAIL_LINES = 40


class Progress:
    """What the command is doing, from its output lines (fed by one thread, read by another)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.step: Optional[str] = None
        self.stage = "pip is starting"
        self.tail: list[str] = []

    def feed(self, line: str) -> None:
        with self._lock:
            self.tail = (self.tail + [line])[-TAIL_LINES:]
            step = STEP.match(line)
            if step:
                self.step = f"step {step.group(1)} of {step.group(2)}" if step.group(2) else f"{step.group(1)}%"
            elif STAGE.match(line):
                self.stage, self.step = line.strip()[:100], None

    def describe(self) -> str:
        with self._lock:
            if self.step is not None:
                return f"compiling: {self.step}"
            return self.stage


def _copy(source: IO[str], log: IO[str], progress: Progress) -> None:
    for line in source:
        log.write(line)
        log.flush()
        progress.feed(line)


def _elapsed(seconds: float) -> str:
    return f"{int(seconds) // 60}m{int(seconds) % 60:02d}s"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", help="the file that receives the command's whole output")
    parser.add_argument("--every", type=float, default=20.0, help="seconds between progress lines")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    options = parser.parse_args(argv)
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("give the command after --")
    started = time.monotonic()
    progress = Progress()
    with open(options.log, "w", encoding="utf-8") as log:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        )
        assert process.stdout is not None
        reader = threading.Thread(target=_copy, args=(process.stdout, log, progress), daemon=True)
        reader.start()
        while True:
            reader.join(options.every)
            if not reader.is_alive():
                break
            print(f"  {_elapsed(time.monotonic() - started)}  {progress.describe()}", flush=True)
        status = process.wait()
    if status != 0:
        print(f"failed after {_elapsed(time.monotonic() - started)} (exit status {status}); the end of {options.log}:")
        print("".join(progress.tail), end="", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
