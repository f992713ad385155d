"""Where session files live per user and per working directory, laid out like pi's.

``<root>/--<cwd with / as ->--/<UTC time>_<session id>.jsonl``, with ``root`` the
``PIAGENT_SESSIONS_DIR`` environment variable or ``~/.piagent/sessions``
(docs/sessions.md#session-directories).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any, Optional

from .._files import open_regular
from ..ai.nesting import MAX_RECORD_DEPTH, loads
from ..exceptions import InvalidValueError
from ._format import iso_to_ms, now_iso
from ._jsonl import MAX_SESSION_BYTES

__all__ = ["SessionInfo", "list_sessions", "most_recent_session", "new_session_path", "session_dir"]


def session_dir(cwd: str, environ: Optional[Mapping[str, str]] = None) -> str:
    """The directory holding the sessions started in ``cwd`` (not created here)."""
    environ = os.environ if environ is None else environ
    root = environ.get("PIAGENT_SESSIONS_DIR") or os.path.join(os.path.expanduser("~"), ".piagent", "sessions")
    safe = "--" + re.sub(r"[/\\:]", "-", re.sub(r"^[/\\]", "", os.path.abspath(cwd))) + "--"
    return os.path.join(root, safe)


def new_session_path(directory: str, session_id: str) -> str:
    """The path of a new session file in ``directory``, named as pi names it: the time, then the session's id.

    Give the same id to the session: ``JsonlSession(new_session_path(d, sid), session_id=sid)``.
    """
    return os.path.join(directory, f"{re.sub(r'[:.]', '-', now_iso())}_{session_id}.jsonl")


@dataclass
class SessionInfo:
    """A summary of one session file, for listings."""

    path: str
    id: str
    cwd: str
    name: Optional[str]
    modified_ms: int
    message_count: int
    first_message: str


def _open(path: str) -> Optional[IO[bytes]]:
    """A session file to read, or None for what is not a regular file of at most
    :data:`MAX_SESSION_BYTES` bytes (a FIFO, ``/dev/zero``, a huge file: left out of listings)."""
    try:
        fd = open_regular(path)
    except (OSError, InvalidValueError):
        return None
    if os.fstat(fd).st_size > MAX_SESSION_BYTES:
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def _record(line: bytes) -> Any:
    """The JSON of one line, or None if it is not JSON or nested too deep."""
    try:
        return loads(line, "a session line", MAX_RECORD_DEPTH)
    except ValueError:  # InvalidValueError too
        return None


def _header(path: str) -> Optional[dict[str, Any]]:
    file = _open(path)
    if file is None:
        return None
    with file:
        header = _record(file.readline(MAX_SESSION_BYTES))
    if isinstance(header, dict) and header.get("type") == "session" and isinstance(header.get("id"), str):
        return header
    return None


def _session_files(directory: str) -> list[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    paths = [os.path.join(directory, name) for name in names if name.endswith(".jsonl")]
    return [path for path in paths if _header(path) is not None]


def most_recent_session(directory: str) -> Optional[str]:
    """The session file in ``directory`` modified last, or None."""
    paths = _session_files(directory)
    return max(paths, key=lambda path: os.stat(path).st_mtime_ns) if paths else None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return " ".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def list_sessions(directory: str) -> list[SessionInfo]:
    """Every session file in ``directory``, the most recently active first.

    Reads the files without the session machinery (a listing never fails on one bad file:
    unreadable lines are left out of its counts).
    """
    infos = []
    for path in _session_files(directory):
        header = _header(path) or {}
        count, first, name, last = 0, "", None, iso_to_ms(header.get("timestamp"))
        file = _open(path)
        if file is None:
            continue
        with file:
            file.readline()
            for line in file:
                entry = _record(line)
                if not isinstance(entry, dict):
                    continue
                if entry.get("type") == "session_info":
                    name = (entry.get("name") or "").strip() or None
                message = entry.get("message") if entry.get("type") == "message" else None
                if not isinstance(message, dict):
                    continue
                count += 1
                if message.get("role") in ("user", "assistant") and isinstance(message.get("timestamp"), int):
                    last = max(last, message["timestamp"])
                if not first and message.get("role") == "user":
                    first = _text(message.get("content"))
        infos.append(SessionInfo(path, header["id"], str(header.get("cwd", "")), name, last, count, first))
    infos.sort(key=lambda info: info.modified_ms, reverse=True)
    return infos
