"""One agent run at a time per session, across threads and processes (docs/sessions.md#one-writer-at-a-time).

A run claims its session with a POSIX record lock (``lockf``) on one byte of a lock file
beside the session, at an offset derived from the session's key: the operating system
releases it when the process ends, however it ends. Record locks belong to a process, so
threads are told apart by a registry of the locks this process holds; and since closing any
descriptor of a file drops every record lock the process has on it, each lock file is
opened once per process and closed only when none of its locks is held.
"""

from __future__ import annotations

import hashlib
import os
import threading
from typing import Callable

from ..exceptions import SessionBusyError, SessionError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the registry alone (one process)
    fcntl = None  # type: ignore[assignment]

__all__ = ["claim_run"]

_registry = threading.Lock()
_held: dict[tuple[str, int], object] = {}  # (lock file, offset) claimed by this process -> its claim
_files: dict[str, list[int]] = {}  # lock file -> [descriptor, locks held through it]


def claim_run(lock_path: str, key: str, name: str, mode: int = 0o600) -> Callable[[], None]:
    """Claim the run lock ``key`` of ``lock_path`` at once, or raise :class:`SessionBusyError`
    naming the session ``name``. Returns the release (idempotent, from any thread).

    A lock file made here gets the permissions ``mode``, whatever the umask."""
    path = os.path.realpath(lock_path)
    offset = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:7], "big")
    claim = object()
    with _registry:
        if (path, offset) in _held:
            raise _busy(name)
        fd = _open(path, mode)
        try:
            if fcntl is not None:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
        except OSError:  # EAGAIN or EACCES: another process holds it
            _close(path)
            raise _busy(name) from None
        _held[(path, offset)] = claim

    def release() -> None:
        with _registry:
            if _held.get((path, offset)) is not claim:
                return  # released already (or in a forked child, which never held it)
            del _held[(path, offset)]
            if fcntl is not None:
                fcntl.lockf(_files[path][0], fcntl.LOCK_UN, 1, offset)
            _close(path)

    return release


def _forget_after_fork() -> None:
    """A forked child holds none of its parent's record locks (and the registry's lock may be taken)."""
    global _registry
    _registry = threading.Lock()
    _held.clear()
    _files.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _busy(name: str) -> SessionBusyError:
    return SessionBusyError(
        f"session {name} is being written by another agent's run (one agent writes a session at a time): "
        "try again once that run has ended"
    )


def _open(path: str, mode: int) -> int:
    entry = _files.get(path)
    if entry is None:
        try:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
                if hasattr(os, "fchmod"):  # the umask may have taken permissions away
                    os.fchmod(fd, mode)
            except FileExistsError:
                fd = os.open(path, os.O_RDWR)
        except OSError as exc:
            raise SessionError(f"cannot open the session's lock file {path}: {exc.strerror}") from None
        entry = _files[path] = [fd, 0]
    entry[1] += 1
    return entry[0]


def _close(path: str) -> None:
    entry = _files[path]
    entry[1] -= 1
    if entry[1] == 0:
        os.close(entry[0])
        del _files[path]
