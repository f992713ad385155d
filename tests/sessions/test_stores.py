"""The two stores: append-only JSONL files and SQLite, under threads and processes writing at once."""

from __future__ import annotations

import fcntl
import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from piagent.ai.types import AssistantMessage, TextContent, UserMessage
from piagent.sessions import JsonlSession, Session, SessionBusyError, SessionError, SqliteSession

ROOT = Path(__file__).resolve().parents[2]
WRITER = """
import sys
from piagent.sessions import JsonlSession, SqliteSession
kind, path, name, count = sys.argv[1:5]
session = JsonlSession(path) if kind == "jsonl" else SqliteSession(path, "shared")
print("ready", flush=True)
sys.stdin.readline()  # all writers start together
for n in range(int(count)):
    session.append_entry("custom", customType=name, data={"n": n, "pad": "x" * 3000})
"""


def run_writers(kind: str, path: Path, writers: int, count: int) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, kind, str(path), f"w{i}", str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        for i in range(writers)
    ]
    for process in processes:  # every writer has loaded the (empty) session before any writes
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write(b"go\n")
        process.stdin.flush()
    for process in processes:
        assert process.wait(timeout=60) == 0


def assert_each_writer_kept_its_own_chain(session: Session, writers: int, count: int) -> None:
    entries = session.entries()
    assert len(entries) == writers * count
    for i in range(writers):
        mine = [e for e in entries if e["customType"] == f"w{i}"]
        assert [e["data"]["n"] for e in mine] == list(range(count))  # in order, none lost or doubled
        assert mine[0]["parentId"] is None  # each writer started from the empty session it loaded
        assert all(mine[k]["parentId"] == mine[k - 1]["id"] for k in range(1, count))
    assert len(session.branches()) == writers


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_processes_appending_to_one_session_at_once_are_serialised_never_interleaved(
    memory_dir: Path, kind: str
) -> None:
    path = memory_dir / ("s.jsonl" if kind == "jsonl" else "s.db")
    run_writers(kind, path, writers=3, count=40)
    session = JsonlSession(path) if kind == "jsonl" else SqliteSession(path, "shared")
    assert_each_writer_kept_its_own_chain(session, 3, 40)
    if kind == "jsonl":
        lines = path.read_bytes().split(b"\n")
        assert lines[-1] == b"" and all(json.loads(line) for line in lines[:-1])
        assert sum(1 for line in lines if b'"type":"session"' in line) == 1  # one header though all created it


def test_threads_appending_through_many_sqlite_sessions_and_one_shared_session(memory_dir: Path) -> None:
    path = memory_dir / "many.db"
    shared = SqliteSession(path, "shared")
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            own = SqliteSession(path, f"own-{i}")
            barrier.wait()
            for n in range(20):
                own.append_message(UserMessage(f"{i}-{n}"))
                shared.append_entry("custom", customType=f"w{i}", data={"n": n})
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for i in range(6):
        assert [m.content for m in SqliteSession(path, f"own-{i}").messages()] == [f"{i}-{n}" for n in range(20)]
    reloaded = SqliteSession(path, "shared").entries()
    assert len(reloaded) == 120 and len({e["id"] for e in reloaded}) == 120
    assert all(reloaded[k]["parentId"] == reloaded[k - 1]["id"] for k in range(1, 120))  # one session object: one chain


def test_an_append_never_rewrites_what_the_file_holds(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = JsonlSession(path)
    session.append_message(UserMessage("one"))
    inode, first = path.stat().st_ino, path.read_bytes()
    session.append_message(UserMessage("two"))
    assert path.stat().st_ino == inode and path.read_bytes().startswith(first)
    assert JsonlSession(path).header == session.header
    assert oct(path.stat().st_mode & 0o777) == "0o600"  # transcripts are private to their user


def test_a_writer_holding_the_lock_too_long_makes_an_append_fail_clearly_and_write_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    JsonlSession(path).append_message(UserMessage("one"))
    before = path.read_bytes()
    session = JsonlSession(path, lock_timeout=0.2)
    with open(path, "rb") as other:
        fcntl.flock(other.fileno(), fcntl.LOCK_EX)  # another writer, stuck
        with pytest.raises(SessionBusyError, match=r"held the session's lock for over 0\.2 s"):
            session.append_message(UserMessage("two"))
    assert path.read_bytes() == before and len(session.entries()) == 1
    session.append_message(UserMessage("two"))  # the lock is free again
    assert len(JsonlSession(path).entries()) == 2


def test_a_locked_sqlite_database_is_a_clear_error(memory_dir: Path) -> None:
    import sqlite3

    path = memory_dir / "s.db"
    session = SqliteSession(path, "a", lock_timeout=0.2)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(SessionBusyError, match="stayed locked"):
            session.append_message(UserMessage("x"))
    finally:
        other.execute("ROLLBACK")
        other.close()
    session.append_message(UserMessage("x"))
    assert len(SqliteSession(path, "a").entries()) == 1


OPENER = """
import sqlite3, sys
connect = sqlite3.connect
def traced(*args, **kwargs):  # prints each statement as it starts, so the test sees a retry
    db = connect(*args, **kwargs)
    db.set_trace_callback(lambda sql: print(sql, flush=True))
    return db
sqlite3.connect = traced
from piagent.sessions import SqliteSession
SqliteSession(sys.argv[1], "s").append_entry("custom", customType="opened")
print("opened", flush=True)
"""


def test_a_fresh_database_another_process_is_converting_is_opened_once_its_lock_is_free(memory_dir: Path) -> None:
    """A fresh database is in rollback-journal mode until its first connection makes it WAL; that
    connection's write lock made ``PRAGMA journal_mode=WAL`` of a second process fail at once."""
    import sqlite3

    path = memory_dir / "fresh.db"
    converting = sqlite3.connect(path, isolation_level=None)  # as a process creating the database does
    converting.execute("BEGIN IMMEDIATE")
    opener = subprocess.Popen(
        [sys.executable, "-c", OPENER, str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert opener.stdout is not None and opener.stderr is not None
    try:
        tries = 0
        while tries < 2:  # refused once and trying again: it is waiting, within its lock timeout
            line = opener.stdout.readline()
            assert line, f"the opener gave up while the lock was held: {opener.stderr.read()}"
            tries += line.strip() == "PRAGMA journal_mode=WAL"
    finally:
        converting.execute("COMMIT")
        converting.close()
    rest, errors = opener.communicate(timeout=60)
    assert opener.returncode == 0, errors
    assert rest.splitlines()[-1] == "opened"
    assert [e["customType"] for e in SqliteSession(path, "s").entries()] == ["opened"]


def test_a_file_that_is_not_a_database_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "not.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(SessionError, match="cannot open as a session database"):
        SqliteSession(path, "a")
    with pytest.raises(ValueError, match="session_id must be a non-empty string"):
        SqliteSession(tmp_path / "ok.db", "")


FILE_SIZE_LIMITED = """
import os, resource, signal, sys
from piagent.ai.types import AssistantMessage, TextContent, UserMessage
from piagent.sessions import SqliteSession
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG
path, size = sys.argv[1], int(sys.argv[2])
session = SqliteSession(path, "a")
session.append_message(UserMessage("one"))
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path + "-wal") + 1000, hard))
try:
    session.append_message(UserMessage("x" * size))
except Exception as exc:
    print(type(exc).__name__, exc)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
session.append_message(UserMessage("two"))  # on the same connection
print([entry["message"]["content"] for entry in SqliteSession(path, "a").entries()])
"""


def append_past_a_file_size_limit(path: Path, size: int) -> list[str]:
    """In a child process whose file size limit (RLIMIT_FSIZE) the append of ``size`` characters
    exceeds: a real write failure. Returns what it printed: the error, then the stored messages."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", FILE_SIZE_LIMITED, str(path), str(size)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_failed_sqlite_commit_is_a_session_error_and_later_appends_on_the_connection_work(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    error, stored = append_past_a_file_size_limit(path, 200_000)  # written to the WAL at COMMIT
    assert error == f"SessionError {path}#a: the change could not be committed and was rolled back (disk I/O error)"
    assert stored == "['one', 'two']"


def test_a_write_failing_inside_an_sqlite_append_raises_its_own_error_not_a_failed_rollback(
    tmp_path: Path,
) -> None:
    """SQLite rolls back itself after an I/O error; a second ROLLBACK would hide the cause."""
    error, stored = append_past_a_file_size_limit(tmp_path / "s.db", 5_000_000)  # spills from the page cache
    assert error == "OperationalError disk I/O error"
    assert stored == "['one', 'two']"


class ListStore:
    """A store of one's own, as docs/sessions.md#stores describes it: two methods."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def load(self) -> list[dict[str, Any]]:
        return [json.loads(json.dumps(r)) for r in self.records]

    def append(self, header: dict[str, Any], entries: Any) -> None:
        if not self.records:
            self.records.append(dict(header))
        self.records.extend(dict(e) for e in entries)


def test_a_store_of_ones_own_gets_the_whole_session_behaviour() -> None:
    store = ListStore()
    session = Session(store, session_id="mine")
    a = session.append_message(UserMessage("a"))
    session.append_message(UserMessage("b"))
    session.fork(a)
    session.append_message(UserMessage("c"))
    again = Session(store)
    assert again.id == "mine" and store.records[0]["type"] == "session"
    assert [m.content for m in again.messages()] == ["a", "c"] and len(again.branches()) == 2


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_an_assistant_message_comes_back_from_either_store_with_its_response_model(
    kind: str, tmp_path: Path, memory_dir: Path
) -> None:
    def open_session() -> Session:
        return JsonlSession(tmp_path / "s.jsonl") if kind == "jsonl" else SqliteSession(memory_dir / "s.db", "a")

    answer = AssistantMessage(
        [TextContent("hi")], model="claude-test-4", response_id="msg_1", response_model="claude-test-4-20261101"
    )
    open_session().append_message(answer)
    assert open_session().messages() == [answer]


def test_a_sqlite_databases_lock_file_takes_the_databases_permissions(memory_dir: Path) -> None:
    """As SQLite gives its -wal and -shm files: a database shared by two users stays usable by both."""
    path = memory_dir / "shared.db"
    SqliteSession(path, "a").append_entry("custom", customType="made")
    path.chmod(0o660)  # shared with a group (the web server's and the worker's users, say)
    old = os.umask(0o022)
    try:
        SqliteSession(path, "a").begin_run()()
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(f"{path}-piagent.lock").st_mode) == 0o660
