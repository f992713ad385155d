"""``run_command``: a shell command in a subprocess, bounded in time and output.

The command runs in a new session (its own process group). When the call's signal aborts
(the run was aborted, or the tool's ``timeout=`` expired) or the command outlives its own
``timeout``, the whole process group is killed with SIGKILL. Output (stdout and stderr
interleaved) keeps its last ``max_output_bytes`` bytes, with a note saying what was cut.
A non-zero exit status is an error result that carries the output and the status.
"""

from __future__ import annotations

import os
import signal as signals
import subprocess
import threading
from typing import IO, Annotated, Optional

from ..abort import AbortSignal
from ..decorator import tool
from ..types import AgentTool

__all__ = ["run_command"]

_CHUNK = 65536
_DRAIN_AFTER_EXIT = 2.0
"""Seconds to wait for the output pipe to close after the shell exits (background children
may hold it open; they are killed after that)."""


def run_command(
    cwd: os.PathLike[str] | str | None = None,
    *,
    timeout: float = 120.0,
    max_output_bytes: int = 50_000,
    env: Optional[dict[str, str]] = None,
) -> AgentTool:
    """A ``run_command`` tool running ``/bin/sh -c <command>`` in ``cwd``.

    ``timeout``: seconds before the command is killed; ``max_output_bytes``: how much of the
    output's tail the model sees; ``env``: the environment (default: inherited).
    """
    if not timeout > 0:
        raise ValueError("timeout must be a positive number of seconds")
    if max_output_bytes < 1:
        raise ValueError("max_output_bytes must be positive")
    directory = None if cwd is None else os.fspath(cwd)
    if directory is not None and not os.path.isdir(directory):
        raise ValueError(f"cwd {directory!r} is not an existing directory")

    @tool(name="run_command")
    def run(command: Annotated[str, "The shell command line to run."], signal: AbortSignal) -> str:
        """Run a shell command and return its combined stdout and stderr."""
        return _run(command, directory, env, timeout, max_output_bytes, signal)

    return run


class _Tail:
    """Reads a pipe to its end on a thread of its own, keeping the last ``limit`` bytes."""

    def __init__(self, pipe: IO[bytes], limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._data = bytearray()
        self._pipe = pipe
        self.thread = threading.Thread(target=self._read, name="piagent-run-command-output", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            chunk = self._pipe.read1(_CHUNK) if hasattr(self._pipe, "read1") else self._pipe.read(_CHUNK)
            if not chunk:
                break
            self.total += len(chunk)
            self._data += chunk
            if len(self._data) > 2 * self.limit:
                del self._data[: len(self._data) - self.limit]
        self._pipe.close()

    def text(self) -> str:
        data = bytes(self._data[-self.limit :])
        text = data.decode("utf-8", errors="replace").strip("\n")
        if self.total > self.limit:
            text = f"[Output truncated: showing the last {self.limit} of {self.total} bytes]\n{text}"
        return text or "(no output)"


def _run(
    command: str,
    cwd: Optional[str],
    env: Optional[dict[str, str]],
    timeout: float,
    limit: int,
    signal: AbortSignal,
) -> str:
    signal.throw_if_aborted()
    process = subprocess.Popen(
        command,
        shell=True,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    assert process.stdout is not None
    output = _Tail(process.stdout, limit)
    remove_listener = signal.add_listener(lambda: _kill_group(process))
    timed_out = False
    try:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(process)
            process.wait()
    finally:
        remove_listener()
    output.thread.join(_DRAIN_AFTER_EXIT)
    if output.thread.is_alive():  # background processes still hold the pipe open
        _kill_group(process)
        output.thread.join()
    text = output.text()
    if signal.aborted:
        raise RuntimeError(f"{text}\n\nCommand aborted")
    if timed_out:
        raise TimeoutError(f"{text}\n\nCommand timed out after {timeout:g} seconds and was killed")
    if process.returncode != 0:
        raise RuntimeError(f"{text}\n\nCommand exited with code {process.returncode}")
    return text


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's process group (the process alone where groups do not exist)."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signals.SIGKILL)
        else:  # pragma: no cover - Windows
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass  # already gone
