"""``SqliteSession``: many sessions in one SQLite database (docs/sessions.md#sqlite).

Two tables: ``piagent_sessions`` (one row per session: its id and header) and
``piagent_session_entries`` (one row per entry: session id, position, entry id, the entry's
JSON). The database runs in WAL mode with ``synchronous=FULL``: a committed append survives a
crash of the process and of the machine. Each append is one ``BEGIN IMMEDIATE`` transaction,
so appends from many threads and processes are serialised by SQLite's write lock.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from collections.abc import Sequence
from typing import Any, Callable, Optional

from ..exceptions import InvalidValueError, SessionBusyError, SessionError
from ._format import dumps, parse_lines
from ._jsonl import DEFAULT_LOCK_TIMEOUT
from ._runlock import claim_run
from ._session import Session
from ._waiting import poll

__all__ = ["SqliteSession", "SqliteStore"]

Record = dict[str, Any]

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS piagent_sessions (id TEXT PRIMARY KEY, header TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS piagent_session_entries ("
    " session_id TEXT NOT NULL REFERENCES piagent_sessions(id),"
    " position INTEGER NOT NULL, entry_id TEXT NOT NULL, entry TEXT NOT NULL,"
    " PRIMARY KEY (session_id, position))",
)


class SqliteStore:
    """The :class:`~piagent.sessions.SessionStore` of one session in a SQLite database.

    One connection per store, shared by its threads under a lock; ``lock_timeout`` is
    SQLite's busy timeout (seconds), after which an append raises :class:`SessionBusyError`.
    """

    def __init__(self, path: Any, session_id: str, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise InvalidValueError(f"session_id must be a non-empty string, got {session_id!r}")
        self.path = os.fspath(path)
        self.session_id = session_id
        self._lock = threading.Lock()
        self._seen = 0  # entries stored after this store's last load or append
        try:
            self._db = sqlite3.connect(self.path, timeout=lock_timeout, isolation_level=None, check_same_thread=False)
            _use_wal(self._db, repr(self), lock_timeout)
            self._db.execute("PRAGMA synchronous=FULL")
            with self._transaction():
                for statement in _SCHEMA:
                    self._db.execute(statement)
        except sqlite3.DatabaseError as exc:
            raise SessionError(f"{self.path}: cannot open as a session database: {exc}") from None

    def load(self) -> list[Record]:
        with self._lock, self._transaction("BEGIN"):
            row = self._db.execute("SELECT header FROM piagent_sessions WHERE id = ?", (self.session_id,)).fetchone()
            if row is None:
                return []
            rows = self._db.execute(
                "SELECT entry FROM piagent_session_entries WHERE session_id = ? ORDER BY position", (self.session_id,)
            ).fetchall()
            self._seen = len(rows)
        return parse_lines([row[0]] + [entry for (entry,) in rows], repr(self))

    def append(self, header: Record, entries: Sequence[Record]) -> None:
        with self._lock:
            with self._transaction():
                self._db.execute(
                    "INSERT OR IGNORE INTO piagent_sessions (id, header) VALUES (?, ?)",
                    (self.session_id, dumps(header)),
                )
                last = self._last_position()
                self._db.executemany(
                    "INSERT INTO piagent_session_entries (session_id, position, entry_id, entry) VALUES (?, ?, ?, ?)",
                    [(self.session_id, last + n, entry["id"], dumps(entry)) for n, entry in enumerate(entries, 1)],
                )
            if last == self._seen:  # else other writers' entries came first: not seen yet
                self._seen = last + len(entries)

    def changed(self) -> bool:
        """Were entries appended since this store's last ``load()`` or ``append()`` (another writer)?"""
        with self._lock:
            return self._last_position() != self._seen

    def _last_position(self) -> int:
        (last,) = self._db.execute(
            "SELECT COALESCE(MAX(position), 0) FROM piagent_session_entries WHERE session_id = ?",
            (self.session_id,),
        ).fetchone()
        return int(last)

    def claim_run(self) -> Callable[[], None]:
        """Claim the session for one agent run (``PATH-piagent.lock``, beside the file a symlink names)."""
        if self.path in ("", ":memory:"):  # a private database: no other connection can write it
            return lambda: None
        path = os.path.realpath(self.path)
        try:  # the database's permissions, as SQLite gives its -wal and -shm files
            mode = stat.S_IMODE(os.stat(path).st_mode) & 0o666
        except OSError:
            mode = 0o600
        return claim_run(path + "-piagent.lock", self.session_id, repr(self), mode)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"{self.path}#{self.session_id}"

    def _transaction(self, begin: str = "BEGIN IMMEDIATE") -> _Transaction:
        return _Transaction(self._db, begin, repr(self))


class _Transaction:
    def __init__(self, db: sqlite3.Connection, begin: str, name: str) -> None:
        self.db, self.begin, self.name = db, begin, name

    def __enter__(self) -> None:
        try:
            self.db.execute(self.begin)
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                raise SessionBusyError(f"{self.name}: the database stayed locked by another writer ({exc})") from None
            raise

    def __exit__(self, kind: Optional[type], exc: Optional[BaseException], tb: Any) -> None:
        if kind is not None:
            self._rollback()  # the body's error is the one raised
            return
        try:
            self.db.execute("COMMIT")
        except sqlite3.Error as error:
            # A failed COMMIT may leave the transaction open (SQLITE_BUSY does): end it, or
            # every later BEGIN on this connection fails ("within a transaction").
            self._rollback()
            kind_of_error = SessionBusyError if _is_busy(error) else SessionError
            raise kind_of_error(
                f"{self.name}: the change could not be committed and was rolled back ({error})"
            ) from None

    def _rollback(self) -> None:
        """ROLLBACK if a transaction is still open (SQLite ends one itself after some errors)."""
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")


def _use_wal(db: sqlite3.Connection, name: str, timeout: float) -> None:
    """``PRAGMA journal_mode=WAL``, waiting up to ``timeout`` seconds for the database's lock.

    While a fresh database is still in rollback-journal mode, another connection's write lock
    (the process converting it, say) makes the pragma fail at once: SQLite's busy timeout does
    not apply to it, so it is tried again until the timeout.
    """

    def attempt() -> bool:
        try:
            db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                return False
            raise
        return True

    if not poll(attempt, timeout):
        raise SessionBusyError(f"{name}: the database stayed locked by another connection for over {timeout:g} s")


def _is_busy(error: sqlite3.Error) -> bool:
    return isinstance(error, sqlite3.OperationalError) and ("locked" in str(error) or "busy" in str(error))


class SqliteSession(Session):
    """The session ``session_id`` in the SQLite database at ``path``, created on its first append."""

    def __init__(
        self, path: Any, session_id: str, *, lock_timeout: float = DEFAULT_LOCK_TIMEOUT, cwd: Optional[str] = None
    ) -> None:
        self._database = SqliteStore(path, session_id, lock_timeout=lock_timeout)
        super().__init__(self._database, session_id=session_id, cwd=cwd)

    @property
    def path(self) -> str:
        return self._database.path
