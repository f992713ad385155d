"""``run_command``: a shell command in a subprocess, bounded in time and output.

The command runs in a new session (its own process group). When the call's signal aborts
(the run was aborted, or the tool's ``timeout=`` expired) or the command outlives its own
``timeout``, the whole process group is killed with SIGKILL. The call then ends whatever the
command left behind: a process that escaped the group (``setsid cmd &``) and still holds the
output open is no longer read (it is not killed: piagent cannot find it). Output (stdout and
stderr interleaved) keeps its last ``max_output_bytes`` bytes, with a note saying what was cut.
A non-zero exit status is an error result that carries the output and the status.

By default the command inherits the environment without the variables that hold secrets
(:func:`command_environment`): provider keys and every variable named ``*_KEY``, ``*_TOKEN``,
``*_SECRET``, ``*_PASSWORD``, ``*_PASSWD`` or ``*_CREDENTIALS`` (README "Limits and safety").
"""

from __future__ import annotations

import os
import selectors
import signal as signals
import subprocess
import threading
from collections.abc import Mapping
from typing import IO, Annotated, Optional

from ..abort import AbortSignal
from ..ai.env import known_key_vars
from ..decorator import tool
from ..exceptions import InvalidValueError
from ..types import AgentTool

__all__ = ["command_environment", "run_command"]

_CHUNK = 65536
_DRAIN_AFTER_EXIT = 2.0
"""Seconds to wait for the output pipe to close after the shell exits (background children
may hold it open; they are killed after that)."""
_DRAIN_AFTER_KILL = 0.5
"""Seconds to wait for the pipe to close after the group was killed, before reading stops."""
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIALS")
"""A variable whose name, upper-cased, is one of these words or ends with ``_`` and one of
them holds a secret (README "Limits and safety")."""


def _is_secret_name(name: str) -> bool:
    """Whether ``name`` looks like a secret's variable: ``KEY``, ``TOKEN``, ``SECRET``,
    ``PASSWORD``, ``PASSWD`` or ``CREDENTIALS``, alone or after an underscore at its end, in
    any case (``AWS_SECRET_ACCESS_KEY``, ``db_password``; not ``KEYBOARD`` nor ``MONKEY``)."""
    upper = name.upper()
    return any(upper == word or upper.endswith("_" + word) for word in _SECRET_WORDS)


def command_environment(environ: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """``environ`` (default ``os.environ``) without the variables that hold secrets: those a
    provider reads its key from, and any whose name ends with ``_KEY``, ``_TOKEN``,
    ``_SECRET``, ``_PASSWORD``, ``_PASSWD`` or ``_CREDENTIALS`` or is one of those words
    (:func:`_is_secret_name`)."""
    source = os.environ if environ is None else environ
    known = known_key_vars()
    return {name: value for name, value in source.items() if name not in known and not _is_secret_name(name)}


def run_command(
    cwd: os.PathLike[str] | str | None = None,
    *,
    timeout: float = 120.0,
    max_output_bytes: int = 50_000,
    env: Optional[dict[str, str]] = None,
) -> AgentTool:
    """A ``run_command`` tool running ``/bin/sh -c <command>`` in ``cwd``.

    ``timeout``: seconds before the command is killed; ``max_output_bytes``: how much of the
    output's tail the model sees; ``env``: the command's whole environment, as given (default:
    the inherited one without secrets, :func:`command_environment`, taken at each call).
    """
    if not timeout > 0:
        raise InvalidValueError("timeout must be a positive number of seconds")
    if max_output_bytes < 1:
        raise InvalidValueError("max_output_bytes must be positive")
    directory = None if cwd is None else os.fspath(cwd)
    if directory is not None and not os.path.isdir(directory):
        raise InvalidValueError(f"cwd {directory!r} is not an existing directory")

    @tool(name="run_command")
    def run(command: Annotated[str, "The shell command line to run."], signal: AbortSignal) -> str:
        """Run a shell command and return its combined stdout and stderr."""
        return _run(command, directory, env, timeout, max_output_bytes, signal)

    return run


class _Tail:
    """Reads a pipe on a thread of its own until it closes or :meth:`stop`, keeping the last
    ``limit`` bytes."""

    def __init__(self, pipe: IO[bytes], limit: int) -> None:
        self.limit = limit
        self.total = 0
        self.stopped = False
        self.wake = threading.Event()  # set when reading ended (or by whoever wants the wait over)
        self._data = bytearray()
        self._pipe = pipe
        self._wake_read, self._wake_write = os.pipe()
        self.thread = threading.Thread(target=self._read, name="piagent-run-command-output", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        fd = self._pipe.fileno()
        # a selector, not select.select(): that one refuses descriptors numbered 1024 and up,
        # which a process with many files or sockets open hands out
        selector = selectors.DefaultSelector()
        try:
            selector.register(fd, selectors.EVENT_READ)
            selector.register(self._wake_read, selectors.EVENT_READ)
            while True:
                ready = {key.fd for key, _ in selector.select()}
                if self._wake_read in ready:
                    return
                chunk = os.read(fd, _CHUNK)
                if not chunk:
                    return
                self.total += len(chunk)
                self._data += chunk
                if len(self._data) > 2 * self.limit:
                    del self._data[: len(self._data) - self.limit]
        finally:
            selector.close()
            self._pipe.close()
            os.close(self._wake_read)
            self.wake.set()

    def stop(self) -> None:
        """Stop reading now (a process that escaped the group still holds the pipe open)."""
        self.stopped = True
        os.write(self._wake_write, b"x")

    def close(self) -> None:
        os.close(self._wake_write)

    def text(self) -> str:
        data = bytes(self._data[-self.limit :])
        text = data.decode("utf-8", errors="replace").strip("\n")
        if self.total > self.limit:
            text = f"[Output truncated: showing the last {self.limit} of {self.total} bytes]\n{text}"
        if self.stopped:
            text += "\n[Output no longer read: a background process that left the command's group still holds it open]"
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
        env=command_environment() if env is None else env,
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
    remove_wake = signal.add_listener(output.wake.set)  # an abort ends this wait at once
    output.wake.wait(_DRAIN_AFTER_KILL if timed_out or signal.aborted else _DRAIN_AFTER_EXIT)
    remove_wake()
    if output.thread.is_alive():  # background processes still hold the pipe open
        _kill_group(process)
        output.thread.join(_DRAIN_AFTER_KILL)
    if output.thread.is_alive():  # one escaped the group (a new session): stop reading
        output.stop()
        output.thread.join()
    output.close()
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
