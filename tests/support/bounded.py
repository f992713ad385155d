"""Run hostile input in a child process bounded in memory and time, so that a regression
fails the test (MemoryError, a timeout) instead of taking the machine's memory or hanging."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_bounded(code: str, memory_mb: int = 256, timeout: float = 20.0, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -c code`` with at most ``memory_mb`` MiB of address space; a child still
    running after ``timeout`` seconds is killed and reported as such (returncode -9)."""

    def limit() -> None:
        size = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    environment = {**os.environ, "PYTHONPATH": ROOT, **env}
    try:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=limit,
            env=environment,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return subprocess.CompletedProcess(exc.cmd, -9, out, f"timed out after {timeout:g} s")
