"""Opening and reading files that may be hostile: a FIFO, a device, a huge file.

Only a regular file is read (a FIFO would block, ``/dev/zero`` never ends), and at most a
bound of it. Opening never blocks: ``O_NONBLOCK`` makes opening a FIFO return at once.
"""

from __future__ import annotations

import os
import stat

from .exceptions import InvalidValueError

__all__ = ["open_regular", "read_bounded", "read_regular"]

_CHUNK = 1 << 20


def open_regular(path: str, flags: int = os.O_RDONLY, mode: int = 0o600) -> int:
    """``os.open(path, flags)`` for a regular file; InvalidValueError for anything else
    (the descriptor is closed then). OSError as ``os.open`` raises it."""
    fd = os.open(path, flags | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)
    kind = os.fstat(fd).st_mode
    if not stat.S_ISREG(kind):
        os.close(fd)
        what = "a directory" if stat.S_ISDIR(kind) else "a FIFO" if stat.S_ISFIFO(kind) else "not a regular file"
        raise InvalidValueError(f"{path} is {what}, not a regular file")
    return fd


def read_bounded(fd: int, limit: int, path: str) -> bytes:
    """Everything from ``fd``'s offset to its end; InvalidValueError past ``limit`` bytes
    (a larger file is refused before reading; one that grows is never held past the bound)."""
    if os.fstat(fd).st_size <= limit:
        parts: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(_CHUNK, limit + 1 - total))
            if not chunk:
                return b"".join(parts)
            parts.append(chunk)
            total += len(chunk)
    raise InvalidValueError(f"{path} is larger than {limit:,} bytes, the most piagent reads of it")


def read_regular(path: str, limit: int) -> bytes:
    """The whole regular file at ``path`` (:func:`open_regular`, :func:`read_bounded`)."""
    fd = open_regular(path)
    try:
        return read_bounded(fd, limit, path)
    finally:
        os.close(fd)
