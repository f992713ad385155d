"""Durable transcripts in pi's session format (version 3): JSONL files, SQLite, or your own store.

    from piagent import Agent
    from piagent.sessions import JsonlSession

    agent = Agent(model="anthropic:claude-sonnet-4-5", session=JsonlSession("chat.jsonl"))
    agent.prompt("Hello")          # every ended message is on disk before the next model call

A session is a tree of entries; ``messages()`` is the context of its current branch,
``fork(entry_id)`` continues from an earlier entry. The format, the stores and their
guarantees are described in docs/sessions.md.
"""

from __future__ import annotations

from ..exceptions import SessionBusyError, SessionError, SessionFormatError
from ._context import SessionContext, StoredMessage, convert_to_llm
from ._directory import SessionInfo, list_sessions, most_recent_session, new_session_path, session_dir
from ._format import CURRENT_VERSION
from ._jsonl import DEFAULT_LOCK_TIMEOUT, JsonlSession, JsonlStore
from ._session import Session, SessionStore
from ._sqlite import SqliteSession, SqliteStore

__all__ = [
    "CURRENT_VERSION",
    "DEFAULT_LOCK_TIMEOUT",
    "JsonlSession",
    "JsonlStore",
    "Session",
    "SessionBusyError",
    "SessionContext",
    "SessionError",
    "SessionFormatError",
    "SessionInfo",
    "SessionStore",
    "SqliteSession",
    "SqliteStore",
    "StoredMessage",
    "convert_to_llm",
    "list_sessions",
    "most_recent_session",
    "new_session_path",
    "session_dir",
]
