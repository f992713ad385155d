"""``run_command``: a shell command in a subprocess, bounded in time and output.

The command runs in a new session (its own process group). When the call's signal aborts
(the run was aborted, or the tool's ``timeout=`` expired) or the command outlives its own
``timeout``, the whole process group is killed with SIGKILL. The call then ends whatever the
command left behind: a process that escaped the group (``setsid cmd &``) and still holds the
output open is no longer read (it is not killed: piagent cannot find it). Output (stdout and
stderr interleaved) keeps its last ``max_output_bytes`` bytes, with a note saying what was cut.
A non-zero exit status is an error result that carries the output and the status.

Processes: on Linux the command's session is counted every :data:`_COUNT_EVERY` seconds (from
``/proc``); once more than ``max_processes`` are found, every process of the session is killed
with SIGKILL and the call is an error. This holds for root too (``RLIMIT_NPROC`` does not: it
is per user and root ignores it). Between two counts a fork bomb can go past the bound;
processes that left the session (``setsid``) are neither counted nor killed.

The command's environment is an allowlist (:func:`command_environment`): ``PATH``, ``HOME``,
the locale and a few others, plus the variables named in ``inherit`` (README "Limits and
safety"); a secret in any other variable never reaches it, whatever its name.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import signal as signals
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from typing import IO, Annotated, Callable, Optional

from ..abort import AbortSignal
from ..decorator import tool
from ..exceptions import InvalidValueError
from ..types import AgentTool

__all__ = ["ALLOWED_VARIABLES", "command_environment", "run_command"]

_CHUNK = 65536
_DRAIN_AFTER_EXIT = 2.0
"""Seconds to wait for the output pipe to close after the shell exits (background children
may hold it open; they are killed after that)."""
_DRAIN_AFTER_KILL = 0.5
"""Seconds to wait for the pipe to close after the group was killed, before reading stops."""
_COUNT_EVERY = 0.05
"""Seconds between two counts of the command's processes."""
ALLOWED_VARIABLES = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR")
"""The variables a command inherits by default, with every ``LC_*`` locale variable."""
_LOCALE = re.compile(r"LC_[A-Z]+\Z")


def command_environment(environ: Optional[Mapping[str, str]] = None, inherit: Iterable[str] = ()) -> dict[str, str]:
    """The variables of ``environ`` (default ``os.environ``) a command may see: those of
    :data:`ALLOWED_VARIABLES`, ``LC_*``, and those named in ``inherit``; nothing else."""
    source = os.environ if environ is None else environ
    names = set(ALLOWED_VARIABLES) | set(inherit)
    return {name: value for name, value in source.items() if name in names or _LOCALE.match(name)}


def run_command(
    cwd: os.PathLike[str] | str | None = None,
    *,
    timeout: float = 120.0,
    max_output_bytes: int = 50_000,
    env: Optional[dict[str, str]] = None,
    inherit: Iterable[str] = (),
    max_processes: int = 64,
) -> AgentTool:
    """A ``run_command`` tool running ``/bin/sh -c <command>`` in ``cwd``.

    ``timeout``: seconds before the command is killed; ``max_output_bytes``: how much of the
    output's tail the model sees; ``env``: the command's whole environment, as given (default:
    the allowlist of :func:`command_environment` plus the variables named in ``inherit``,
    taken at each call); ``max_processes``: how many processes the command may run at once
    (Linux; see the module docstring).
    """
    if not timeout > 0:
        raise InvalidValueError("timeout must be a positive number of seconds")
    if max_output_bytes < 1:
        raise InvalidValueError("max_output_bytes must be positive")
    if max_processes < 1:
        raise InvalidValueError("max_processes must be positive")
    inherited = tuple(inherit)
    directory = None if cwd is None else os.fspath(cwd)
    if directory is not None and not os.path.isdir(directory):
        raise InvalidValueError(f"cwd {directory!r} is not an existing directory")

    @tool(name="run_command")
    def run(command: Annotated[str, "The shell command line to run."], signal: AbortSignal) -> str:
        """Run a shell command and return its combined stdout and stderr."""
        environment = command_environment(inherit=inherited) if env is None else env
        return _run(command, directory, environment, timeout, max_output_bytes, max_processes, signal)

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
    env: dict[str, str],
    timeout: float,
    limit: int,
    max_processes: int,
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
    try:
        ended = _watch(process, lambda seconds: _exited(process, seconds), timeout, max_processes)
        timed_out, too_many = ended is None, ended is True
        if timed_out:
            _kill_group(process)
            process.wait()
    finally:
        remove_listener()
    remove_wake = signal.add_listener(output.wake.set)  # an abort ends this wait at once
    drain = _DRAIN_AFTER_KILL if timed_out or too_many or signal.aborted else _DRAIN_AFTER_EXIT
    too_many = _watch(process, output.wake.wait, drain, max_processes) is True or too_many
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
    if too_many:
        raise RuntimeError(
            f"{text}\n\nCommand killed: it ran more than {max_processes} processes at once (max_processes)"
        )
    if timed_out:
        raise TimeoutError(f"{text}\n\nCommand timed out after {timeout:g} seconds and was killed")
    if process.returncode != 0:
        raise RuntimeError(f"{text}\n\nCommand exited with code {process.returncode}")
    return text


def _exited(process: subprocess.Popen[bytes], seconds: float) -> bool:
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def _watch(
    process: subprocess.Popen[bytes], done: Callable[[float], bool], seconds: float, max_processes: int
) -> Optional[bool]:
    """Wait up to ``seconds`` for ``done`` (called with how long it may wait), counting the
    command's processes meanwhile: False when done, True when there were more than
    ``max_processes`` (all killed then), None when the time ran out."""
    deadline = time.monotonic() + seconds
    counting = os.path.isdir("/proc")
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        if done(min(left, _COUNT_EVERY) if counting else left):
            return False
        if counting and len(_session_members(process.pid)) > max_processes:
            _kill_session(process)
            process.wait()
            return True


def _session_members(session: int) -> list[int]:
    """The processes of ``session`` (from ``/proc``; those that vanish meanwhile are left out)."""
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[0] not in (b"Z", b"X") and int(fields[3]) == session:
            members.append(int(name))
    return members


def _kill_session(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's group, then whatever else of its session is left, until none is."""
    _kill_group(process)
    for _ in range(100):
        members = _session_members(process.pid)
        if not members:
            return
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signals.SIGKILL)
        time.sleep(_COUNT_EVERY / 10)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the command's process group (the process alone where groups do not exist)."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(process.pid, signals.SIGKILL)
        else:  # pragma: no cover - Windows
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass  # already gone
