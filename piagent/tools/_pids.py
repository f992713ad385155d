"""A kernel bound on a command's processes: a pids cgroup of its own, where one can be made.

Linux's pids controller refuses a ``fork()`` past ``pids.max`` in the cgroup, for root too, so
a fork bomb never gets past the bound (counting from ``/proc`` sees it only afterwards, and
costs a scan of every process on the machine each time). :meth:`PidsCgroup.create` makes a
child of this process's own pids cgroup (cgroup v1's ``pids`` hierarchy, or cgroup v2 when
``pids`` is in its ``cgroup.subtree_control``); it needs write access there (root, or a
delegated cgroup) and gives None otherwise, and the caller counts from ``/proc`` instead.

The command enters the cgroup itself before it runs (:meth:`wrap`), so nothing it starts is
outside. A cgroup still holding processes when the command is done (a server started in the
background, processes killed a moment ago and not yet reaped) is left to them; a later
:meth:`create` removes it once they are gone.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import threading
import time
from typing import Optional

__all__ = ["PidsCgroup"]

_ROOT = "/sys/fs/cgroup"
_PREFIX = "piagent-"
_names = itertools.count()
_active: set[str] = set()  # this process's cgroups whose command is running
_active_lock = threading.Lock()
_REMOVE_WAIT = 0.2
"""Seconds :meth:`PidsCgroup.remove` waits for processes killed a moment ago to be reaped."""


class PidsCgroup:
    """A cgroup of at most ``limit`` tasks: the pids controller counts threads as well as
    processes (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def create(cls, limit: int) -> Optional[PidsCgroup]:
        """A new cgroup bounded to ``limit`` tasks, or None where none can be made."""
        parent = _own_pids_cgroup()
        if parent is None:
            return None
        _remove_abandoned(parent)
        path = os.path.join(parent, f"{_PREFIX}{os.getpid()}-{next(_names)}")
        try:
            os.mkdir(path)
        except OSError:
            return None
        cgroup = cls(path)
        with _active_lock:
            _active.add(path)
        try:
            _write(os.path.join(path, "pids.max"), str(limit))
        except OSError:
            cgroup.remove()
            return None
        return cgroup

    def wrap(self, command: str) -> list[str]:
        """The argv running ``command`` as ``/bin/sh -c`` does, once its shell is in the cgroup."""
        enter = 'echo $$ > "$0" && exec /bin/sh -c "$1"'
        return ["/bin/sh", "-c", enter, os.path.join(self.path, "cgroup.procs"), command]

    def refused_a_fork(self) -> bool:
        """Whether a process of the cgroup was refused a ``fork()`` for the bound."""
        try:
            with open(os.path.join(self.path, "pids.events")) as events:
                return any(line.split()[:1] == ["max"] and line.split()[1] != "0" for line in events)
        except (OSError, IndexError):
            return False

    def members(self) -> list[int]:
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as procs:
                return [int(line) for line in procs if line.strip()]
        except (OSError, ValueError):
            return []

    def kill(self) -> None:
        """SIGKILL every process of the cgroup, until none is left (a bounded number of rounds).

        The bound drops to 0 first, so no fork succeeds meanwhile: otherwise each killed
        process frees a place that a process not yet killed (a shell retrying its fork, one
        whose fork had failed and that went on) takes with a new one."""
        with contextlib.suppress(OSError):
            _write(os.path.join(self.path, "pids.max"), "0")
        for _ in range(100):
            members = self.members()
            if not members:
                return
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.005)

    def remove(self) -> None:
        """Remove the cgroup if it has no process left (else it stays, see the module docstring).

        Processes just killed may hold it for a moment (until they are reaped): up to
        :data:`_REMOVE_WAIT` seconds are given to them."""
        with _active_lock:
            _active.discard(self.path)
        deadline = time.monotonic() + _REMOVE_WAIT
        while True:
            try:
                os.rmdir(self.path)
                return
            except OSError:
                if self.members() or time.monotonic() > deadline:
                    return
            time.sleep(0.01)


def _own_pids_cgroup() -> Optional[str]:
    """The directory of this process's pids cgroup, if it can hold bounded children."""
    try:
        with open("/proc/self/cgroup") as own:
            lines = [line.rstrip("\n").split(":", 2) for line in own]
    except OSError:
        return None
    for fields in lines:
        if len(fields) == 3 and "pids" in fields[1].split(","):  # cgroup v1
            path = os.path.join(_ROOT, "pids", fields[2].lstrip("/"))
            return path if os.access(path, os.W_OK) else None
    for fields in lines:
        if len(fields) == 3 and fields[0] == "0" and fields[1] == "":  # cgroup v2
            path = os.path.join(_ROOT, fields[2].lstrip("/"))
            try:
                with open(os.path.join(path, "cgroup.subtree_control")) as control:
                    enabled = "pids" in control.read().split()
            except OSError:
                return None
            return path if enabled and os.access(path, os.W_OK) else None
    return None


def _remove_abandoned(parent: str) -> None:
    """Remove the cgroups left under ``parent`` by earlier commands, of this process or of
    piagent processes that have ended, once they are empty (``rmdir`` refuses others)."""
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            owner = name[len(_PREFIX) :].split("-", 1)[0]
            if not (name.startswith(_PREFIX) and owner.isdigit()):
                continue
            path = os.path.join(parent, name)
            with _active_lock:
                ours = int(owner) == os.getpid() and path not in _active
            if ours or not _alive(int(owner)):
                with contextlib.suppress(OSError):
                    os.rmdir(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)
