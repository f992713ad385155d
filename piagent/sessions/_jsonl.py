"""``JsonlSession``: one session per JSONL file, exactly pi's file format.

Appends only ever add bytes at the end of the file, flushed and fsynced before they return
(docs/sessions.md#jsonl-files). Writers (threads, processes) take an exclusive ``flock`` on the
file for each append; readers take a shared one. Two exceptions to "append only", both under
the lock and both documented: a torn last line left by a writer that was killed mid-write is
cut off before the next append, and a version 1 or 2 file is migrated to version 3 (written
to a temporary file, fsynced, then renamed over the old one) before its first append.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from collections.abc import Sequence
from typing import Any, Callable, Optional

from .._files import open_regular, read_bounded
from ..exceptions import InvalidValueError, SessionBusyError, SessionError, SessionFormatError
from ._format import CURRENT_VERSION, check_header, dumps, migrate, parse_lines
from ._runlock import claim_run
from ._session import Session
from ._waiting import poll

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows (docs/sessions.md#jsonl-files)
    fcntl = None  # type: ignore[assignment]  # JsonlStore refuses to start without it

__all__ = ["DEFAULT_LOCK_TIMEOUT", "MAX_SESSION_BYTES", "JsonlSession", "JsonlStore"]

logger = logging.getLogger("piagent.sessions")

#: Seconds a writer or reader waits for another writer's lock before SessionBusyError.
DEFAULT_LOCK_TIMEOUT = 10.0
#: The largest session file piagent reads (a load, a migration, a listing).
MAX_SESSION_BYTES = 256 * 1024 * 1024

Record = dict[str, Any]


class _FileLock:
    """``flock`` on an open file, polled until a deadline (a stopped writer must not hang us forever)."""

    def __init__(self, fd: int, exclusive: bool, timeout: float, path: str) -> None:
        self.fd, self.path, self.timeout, self.exclusive = fd, path, timeout, exclusive

    def __enter__(self) -> None:
        mode = (fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB
        if not poll(lambda: _try_flock(self.fd, mode), self.timeout):
            raise SessionBusyError(f"{self.path}: another writer held the session's lock for over {self.timeout:g} s")

    def __exit__(self, *exc: Any) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)


def _try_flock(fd: int, mode: int) -> bool:
    try:
        fcntl.flock(fd, mode)
    except BlockingIOError:
        return False
    return True


def _split(data: bytes, path: str) -> list[bytes]:
    """The file's lines; a last line without its newline is dropped with a warning unless it is whole JSON."""
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    if tail.strip():
        if _whole_json(tail):
            lines.append(tail)
        else:
            logger.warning("%s: skipped a torn last line (%d bytes): its writer stopped mid-write", path, len(tail))
    return lines


def _whole_json(line: bytes) -> bool:
    try:
        parse_lines([line], "")
    except SessionError:
        return False
    return True


class JsonlStore:
    """The :class:`~piagent.sessions.SessionStore` of one JSONL file (see the module docstring)."""

    def __init__(self, path: Any, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> None:
        if fcntl is None:  # pragma: no cover - Windows
            raise SessionError("JsonlSession needs POSIX file locks (Linux, macOS); on Windows use SqliteSession")
        self.path = os.path.abspath(os.fspath(path))
        self.lock_timeout = lock_timeout
        self._fd: Optional[int] = None
        self._version_checked = False
        self._lock = threading.Lock()  # one append at a time through this store's descriptor
        self._seen: Optional[tuple[int, int]] = None  # (inode, size) after this store's last load or append

    def load(self) -> list[Record]:
        try:
            fd = _open_session_file(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._seen = None
            return []
        try:
            with _FileLock(fd, False, self.lock_timeout, self.path):
                data = _read_session_file(fd, self.path)
            self._seen = (os.fstat(fd).st_ino, len(data))
        finally:
            os.close(fd)
        return parse_lines(_split(data, self.path), self.path)

    def changed(self) -> bool:
        """Did the file change since this store's last ``load()`` or ``append()`` (another writer)?"""
        try:
            status = os.stat(self.path)
        except FileNotFoundError:
            return self._seen is not None
        return self._seen != (status.st_ino, status.st_size)

    def append(self, header: Record, entries: Sequence[Record]) -> None:
        payload = "".join(dumps(entry) + "\n" for entry in entries).encode("utf-8")
        with self._lock:
            while True:
                fd = self._open()
                with _FileLock(fd, True, self.lock_timeout, self.path):
                    # None: the path now names another file (a migration renamed it over this one)
                    prefix = self._prepare(fd, header) if self._is_current_file(fd) else None
                    if prefix is not None:
                        before = os.fstat(fd)
                        _write_all(fd, prefix + payload)
                        os.fsync(fd)
                        if self._seen == (before.st_ino, before.st_size) or prefix:  # else: others wrote first
                            self._seen = (before.st_ino, before.st_size + len(prefix) + len(payload))
                        if prefix:  # the file is new: its name must survive a power cut too
                            _fsync_directory(os.path.dirname(self.path))
                        return
                self._reopen()

    def claim_run(self) -> Callable[[], None]:
        """Claim the session for one agent run (the lock file ``PATH.lock``, beside the file a symlink names)."""
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        return claim_run(os.path.realpath(self.path) + ".lock", "", self.path)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __repr__(self) -> str:
        return self.path

    # -- internals -------------------------------------------------------------------------

    def _open(self) -> int:
        if self._fd is None:
            directory = os.path.dirname(self.path)
            os.makedirs(directory, exist_ok=True)
            self._fd = _open_session_file(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        return self._fd

    def _reopen(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._version_checked = False

    def _is_current_file(self, fd: int) -> bool:
        try:
            return os.stat(self.path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            return False

    def _prepare(self, fd: int, header: Record) -> Optional[bytes]:
        """Under the lock, before an append: what to write first (the header of a new file).

        None when the file was just migrated (renamed over): the append must reopen the path.
        """
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            size = self._mend_tail(fd, size)
        if size == 0:
            self._version_checked = True
            return (dumps(header) + "\n").encode("utf-8")
        if not self._version_checked:
            if self._migrate_if_old(fd, size):
                return None
            self._version_checked = True
        return b""

    def _mend_tail(self, fd: int, size: int) -> int:
        """Cut off a torn last line (or end a whole one with its newline); returns the new size."""
        start = max(0, size - 65536)
        while True:
            chunk = os.pread(fd, size - start, start)
            cut = chunk.rfind(b"\n")
            if cut >= 0 or start == 0:
                break
            start = max(0, start - 65536)
        line_start = start + cut + 1 if cut >= 0 else 0
        tail = os.pread(fd, size - line_start, line_start)
        if _whole_json(tail):
            _write_all(fd, b"\n")
            return size + 1
        logger.warning("%s: cut off a torn last line (%d bytes) before appending", self.path, len(tail))
        os.ftruncate(fd, line_start)
        return line_start

    def _migrate_if_old(self, fd: int, size: int) -> bool:
        """Rewrite a version 1 or 2 file as version 3 (atomically); True if it did."""
        end, first = 0, b""
        while b"\n" not in first and end < size:  # the header line, however long
            end = min(size, end + 65536)
            first = os.pread(fd, end, 0)
        if parse_lines([first.split(b"\n", 1)[0]], self.path)[0].get("version") == CURRENT_VERSION:
            return False
        os.lseek(fd, 0, os.SEEK_SET)
        lines = [line for line in _split(_read_session_file(fd, self.path), self.path) if line.strip()]
        records = parse_lines(lines, self.path)
        check_header(records, self.path)
        migrate(records)
        target = os.path.realpath(self.path)  # through a symlink: replace the file, keep the link
        directory = os.path.dirname(target)
        handle, temporary = tempfile.mkstemp(prefix=".migrating-", suffix=".jsonl", dir=directory)
        try:
            _write_all(handle, b"".join(_migrated_line(line, record) + b"\n" for line, record in zip(lines, records)))
            os.fsync(handle)
            os.replace(temporary, target)
        except BaseException:
            os.close(handle)
            os.unlink(temporary)
            raise
        os.close(handle)
        _fsync_directory(directory)
        logger.info("%s: migrated to session format version %d", self.path, CURRENT_VERSION)
        return True


def _migrated_line(line: bytes, record: Record) -> bytes:
    """A migrated record's line, keeping the original bytes of everything the migration left alone.

    (Python and JavaScript print some numbers differently: re-encoding would change them.)
    """
    original = json.loads(line.decode("utf-8", "replace"))
    if original == record:
        return line.strip()
    if "id" not in original and "parentId" not in original and record.get("type") != "session":
        extended = dict(original, id=record["id"], parentId=record["parentId"])
        if extended == record:
            ids = f',"id":{json.dumps(record["id"])},"parentId":{json.dumps(record["parentId"])}}}'
            return line.strip()[:-1] + ids.encode("utf-8")
    return dumps(record).encode("utf-8")


def _open_session_file(path: str, flags: int) -> int:
    """``os.open`` for a session file: SessionFormatError if it is not a regular file (a FIFO
    would block, ``/dev/zero`` never ends)."""
    try:
        return open_regular(path, flags)
    except InvalidValueError as exc:
        raise SessionFormatError(f"{exc}: a session is a regular file") from None


def _read_session_file(fd: int, path: str) -> bytes:
    """The file from its current offset, at most :data:`MAX_SESSION_BYTES` (else SessionFormatError)."""
    try:
        return read_bounded(fd, MAX_SESSION_BYTES, path)
    except InvalidValueError as exc:
        raise SessionFormatError(str(exc)) from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_directory(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms that cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


class JsonlSession(Session):
    """A session in one JSONL file, in pi's format; created on its first append.

    ``JsonlSession(path)`` loads the file if it exists (migrating versions 1 and 2 in memory),
    else starts a new session with the id ``session_id`` (default: a fresh one). ``lock_timeout``
    bounds the wait for another writer (default :data:`DEFAULT_LOCK_TIMEOUT` seconds).
    """

    def __init__(
        self,
        path: Any,
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        cwd: Optional[str] = None,
        session_id: Optional[str] = None,
    ) -> None:
        self._file = JsonlStore(path, lock_timeout=lock_timeout)
        super().__init__(self._file, session_id=session_id, cwd=cwd)

    @property
    def path(self) -> str:
        return self._file.path
