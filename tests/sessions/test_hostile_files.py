"""Hostile files as sessions and schemas: a FIFO, ``/dev/zero``, a huge file, deep nesting,
a symlink, bytes that are not UTF-8. Each is refused with an error naming the file and the
bound (or read the way pi reads it); none blocks, eats memory or raises RecursionError.

What could hang or eat memory before the fix runs in a child bounded in time and memory.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from piagent import Agent
from piagent.ai.types import UserMessage
from piagent.cli import main
from piagent.exceptions import InvalidValueError
from piagent.sessions import JsonlSession, SessionFormatError, SqliteSession, list_sessions, session_dir
from tests.support.bounded import run_bounded

from .test_format import header, message_entry, write_lines

DEEP = 5000
WITH_A_MODEL = ["--no-session", "--model", "openai:gpt-4o", "--api-key", "not-used"]  # no request is made


def deep(levels: int = DEEP) -> str:
    return "[" * levels + "]" * levels


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def open_in_a_child(path: Path) -> subprocess.CompletedProcess[str]:
    """``JsonlSession(path)`` in a child of 256 MiB at most, printing what it refused."""
    code = f"""
        from piagent.sessions import JsonlSession, SessionFormatError
        try:
            JsonlSession({str(path)!r})
        except SessionFormatError as exc:
            print("refused:", exc)
    """
    return run_bounded(code)


# --------------------------------------------------------------------------- not a regular file


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_fifo_or_dev_zero_as_a_session_path_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    path = fifo(tmp_path / "s.jsonl") if kind == "fifo" else Path(kind)
    done = open_in_a_child(path)
    what = "a FIFO" if kind == "fifo" else "not a regular file"
    assert f"refused: {path} is {what}, not a regular file: a session is a regular file" in done.stdout, done.stderr


def test_a_session_file_larger_than_the_bound_is_refused_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    with open(path, "wb") as file:  # sparse: no disk, no memory
        file.truncate(256 * 1024 * 1024 + 1)
    done = open_in_a_child(path)
    assert f"refused: {path} is larger than 268,435,456 bytes" in done.stdout, done.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
def test_listings_and_continue_skip_fifos_and_devices_in_the_sessions_folder(tmp_path: Path) -> None:
    directory = Path(session_dir(str(tmp_path), {"PIAGENT_SESSIONS_DIR": str(tmp_path / "store")}))
    directory.mkdir(parents=True)
    good = write_lines(directory / "good.jsonl", header(), message_entry("a", None, text="the real one"))
    fifo(directory / "zz-fifo.jsonl")
    (directory / "zz-zero.jsonl").symlink_to("/dev/zero")
    done = run_bounded(
        f"""
        from piagent.sessions import list_sessions, most_recent_session
        print([info.first_message for info in list_sessions({str(directory)!r})])
        print(most_recent_session({str(directory)!r}))
        """
    )
    assert done.stdout.splitlines() == ["['the real one']", str(good)], done.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs")
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_fifo_or_dev_zero_as_schema_is_a_usage_error(tmp_path: Path, kind: str) -> None:
    path = fifo(tmp_path / "schema.json") if kind == "fifo" else Path(kind)
    done = run_bounded(
        f"""
        import sys
        from piagent.cli import main
        sys.exit(main([*{WITH_A_MODEL!r}, "--schema", {str(path)!r}, "q"]))
        """
    )
    assert done.returncode == 2, done.stderr
    assert f"--schema {path}: {path} is" in done.stderr and "not a regular file" in done.stderr


def test_a_schema_file_larger_than_the_bound_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps({"type": "object", "description": "x" * (1024 * 1024)}))
    err = io.StringIO()
    assert main([*WITH_A_MODEL, "--schema", str(path), "q"], stdout=io.StringIO(), stderr=err) == 2
    assert "is larger than 1,048,576 bytes" in err.getvalue()


# --------------------------------------------------------------------------- deep nesting


def test_a_deeply_nested_line_names_the_file_the_line_and_the_bound(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "s.jsonl", header(), '{"type": "custom", "data": ' + deep() + "}")
    with pytest.raises(SessionFormatError, match=f"{path}, line 2 is nested deeper than 200 levels"):
        JsonlSession(path)
    nested_201 = json.dumps({"type": "custom", "id": "a", "parentId": None, "data": json.loads(deep(200))})
    path = write_lines(tmp_path / "t.jsonl", header(), nested_201)  # within Python's reach, past the bound
    with pytest.raises(SessionFormatError, match="line 2 is nested deeper than 200 levels"):
        JsonlSession(path)


def test_appending_a_deeply_nested_entry_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = JsonlSession(path)
    session.append_message(UserMessage("first"))
    size = path.stat().st_size
    with pytest.raises(SessionFormatError, match="a session custom entry is nested deeper than 200 levels"):
        session.append_entry("custom", customType="x", data=json.loads(deep(900)))
    with pytest.raises(SessionFormatError, match="nested deeper than 200 levels"):
        session.append_entry("custom", customType="x", data=json.loads(deep(250)))
    assert path.stat().st_size == size and len(JsonlSession(path).entries()) == 1


def test_a_deep_or_truncated_sqlite_row_is_a_session_error_naming_the_database(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    session = SqliteSession(path, session_id="s1")
    session.append_message(UserMessage("hi"))
    session.close()
    for bad, problem in [
        ('{"type": "custom", "data": ' + deep() + "}", "nested deeper than 200 levels"),
        ('{"ty', "not JSON"),
    ]:
        with sqlite3.connect(path) as db:
            db.execute("UPDATE piagent_session_entries SET entry = ?", (bad,))
        with pytest.raises(SessionFormatError, match=f"{path}#s1, line 2.*{problem}"):
            SqliteSession(path, session_id="s1")


def test_a_deeply_nested_schema_file_is_a_usage_error_naming_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "schema.json"
    path.write_text('{"type": "object", "default": ' + deep() + "}")
    err = io.StringIO()
    assert main([*WITH_A_MODEL, "--schema", str(path), "q"], stdout=io.StringIO(), stderr=err) == 2
    assert f"--schema {path}: the schema is nested deeper than 100 levels" in err.getvalue()


def test_list_sessions_skips_a_deeply_nested_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "s.jsonl", header(), '{"type": "custom", "data": ' + deep() + "}")
    path.write_text(path.read_text() + json.dumps(message_entry("a", None, text="still listed")) + "\n")
    (info,) = list_sessions(str(tmp_path))
    assert info.first_message == "still listed" and info.message_count == 1


def test_a_deeply_nested_output_type_schema_is_refused_naming_the_bound() -> None:
    schema: dict = {"type": "string"}
    for _ in range(DEEP):
        schema = {"type": "object", "properties": {"a": schema}}
    with pytest.raises(InvalidValueError, match="the output_type schema is nested deeper than 100 levels"):
        Agent(output_type=schema)


# --------------------------------------------------------------------------- symlinks and bytes


def test_migrating_a_session_reached_through_a_symlink_keeps_the_link(tmp_path: Path) -> None:
    real = write_lines(tmp_path / "real.jsonl", header(2), message_entry("a", None))
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    session = JsonlSession(link)
    session.append_message(UserMessage("migrates"))
    session.append_message(UserMessage("then appends"))
    assert link.is_symlink() and os.readlink(link) == str(real)
    lines = real.read_text().splitlines()
    assert json.loads(lines[0])["version"] == 3 and len(lines) == 4
    assert len(JsonlSession(real).entries()) == 3


def test_a_whole_last_record_with_invalid_utf8_and_no_newline_is_kept_by_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    record = (
        json.dumps(message_entry("a", None, text="caf\u00e9"), ensure_ascii=False)
        .encode()
        .replace(b"\xc3\xa9", b"\xe9")
    )
    path.write_bytes(json.dumps(header()).encode() + b"\n" + record)  # Latin-1 é, no newline
    session = JsonlSession(path)
    assert session.entries()[0]["message"]["content"][0]["text"] == "caf\ufffd"  # as pi reads it
    session.append_message(UserMessage("next"))
    assert path.read_bytes().split(b"\n")[1] == record
    assert [e["id"] for e in JsonlSession(path).entries()][0] == "a"
