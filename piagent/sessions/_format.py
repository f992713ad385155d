"""pi's session format, version 3: records, ids, timestamps, parsing and the v1/v2 migrations.

A session is a header record followed by entries (docs/sessions.md#the-format). Records are
plain dicts in pi's camelCase JSON; this module never drops or rewrites a field it does not
know, so entries written by pi (or by a newer piagent) are written back unchanged.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import uuid
from collections.abc import Container, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any, Optional, Union

from ..ai.nesting import MAX_RECORD_DEPTH, check_depth, loads, may_be_deeper
from ..exceptions import SessionFormatError

__all__ = [
    "CURRENT_VERSION",
    "ENTRY_TYPES",
    "check_header",
    "dumps",
    "iso_to_ms",
    "make_header",
    "migrate",
    "new_entry_id",
    "new_session_id",
    "now_iso",
    "parse_lines",
]

logger = logging.getLogger("piagent.sessions")

CURRENT_VERSION = 3
#: The entry types pi defines; any other type is kept as it is (docs/sessions.md#entries).
ENTRY_TYPES = (
    "message",
    "model_change",
    "thinking_level_change",
    "compaction",
    "branch_summary",
    "custom",
    "custom_message",
    "label",
    "session_info",
)

Record = dict[str, Any]


def now_iso() -> str:
    """The current UTC time as pi writes it: ISO 8601 with milliseconds and a ``Z``."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_to_ms(stamp: Any) -> int:
    """An entry's ISO timestamp as epoch milliseconds (0 if it is missing or unreadable)."""
    if not isinstance(stamp, str):
        return 0
    try:
        return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return 0


def new_session_id() -> str:
    """A UUID version 7 (time-ordered, as pi's session ids are)."""
    millis = int(time.time() * 1000) & ((1 << 48) - 1)
    value = (millis << 80) | int.from_bytes(os.urandom(10), "big") & ((1 << 80) - 1)
    value = (value & ~(0xF << 76)) | (0x7 << 76)  # version 7
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # RFC 4122 variant
    return str(uuid.UUID(int=value))


def new_entry_id(*taken: Container[str]) -> str:
    """Eight hex digits in none of ``taken``, like pi's entry ids."""
    for _ in range(100):
        candidate = uuid.uuid4().hex[:8]
        if all(candidate not in ids for ids in taken):
            return candidate
    return str(uuid.uuid4())


def dumps(record: Record) -> str:
    """One record as one line of compact JSON (no newline), as ``JSON.stringify`` writes it.

    SessionFormatError for a record nested deeper than :data:`MAX_RECORD_DEPTH` levels (it
    could not be read back)."""
    what = f"a session {record.get('type', 'record')} entry"
    try:
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    except RecursionError:
        raise SessionFormatError(f"{what} is nested deeper than {MAX_RECORD_DEPTH} levels") from None
    if may_be_deeper(text, MAX_RECORD_DEPTH):
        check_depth(record, what, MAX_RECORD_DEPTH, SessionFormatError)
    return text


def make_header(session_id: str, cwd: str, parent_session: Optional[str] = None) -> Record:
    header: Record = {
        "type": "session",
        "version": CURRENT_VERSION,
        "id": session_id,
        "timestamp": now_iso(),
        "cwd": cwd,
    }
    if parent_session:
        header["parentSession"] = parent_session
    return header


def parse_lines(lines: Sequence[Union[bytes, str]], source: str) -> list[Record]:
    """Parse JSONL lines (without their newlines), or rows; the caller has removed a torn last line.

    Blank lines are skipped. A line that is not a JSON object, or nested deeper than
    :data:`MAX_RECORD_DEPTH` levels, raises :class:`SessionFormatError` naming ``source`` and the
    line number: the file was damaged, and refusing keeps it intact (docs/sessions.md#damaged-files).
    Bytes that are not UTF-8 are read as U+FFFD, as pi reads them.
    """
    records: list[Record] = []
    for number, line in enumerate(lines, 1):
        try:
            text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
            record = loads(text, f"{source}, line {number}", MAX_RECORD_DEPTH, SessionFormatError)
        except SessionFormatError:
            raise
        except ValueError as exc:
            if not line.strip():
                continue
            raise SessionFormatError(f"{source}, line {number}: not JSON ({exc})") from None
        if type(record) is not dict:
            raise SessionFormatError(f"{source}, line {number}: not a JSON object")
        records.append(record)
    return records


def check_header(records: list[Record], source: str) -> Record:
    """The header (first record) after checking it is one piagent can read."""
    header = records[0]
    if header.get("type") != "session" or not isinstance(header.get("id"), str):
        raise SessionFormatError(
            f"{source}: not a pi session (the first record must be a header with type 'session' and an id)"
        )
    version = header.get("version", 1)
    if not isinstance(version, int) or version < 1:
        raise SessionFormatError(f"{source}: the header's version must be a positive integer, got {version!r}")
    if version > CURRENT_VERSION:
        raise SessionFormatError(
            f"{source}: session format version {version} is newer than this piagent reads ({CURRENT_VERSION}); "
            "upgrade piagent"
        )
    for number, record in enumerate(records[1:], 2):
        if record.get("type") == "session":
            raise SessionFormatError(f"{source}, record {number}: a second session header")
    return header


def migrate(records: list[Record]) -> bool:
    """Bring header + entries to version 3 in place, the way pi does; True if anything changed.

    v1 → v2: every entry gets an ``id`` and the previous entry as ``parentId`` (a v1 session
    is a single line of entries); a compaction's ``firstKeptEntryIndex`` (an index into the
    records, header included) becomes ``firstKeptEntryId``. The ids are derived from the
    session id and the entry's position, so loading the same v1 file twice gives the same ids.
    v2 → v3: the message role ``hookMessage`` is renamed ``custom``.
    """
    header = records[0]
    version = header.get("version", 1)
    if version >= CURRENT_VERSION:
        return False
    if version < 2:
        _add_tree(records, str(header["id"]))
    for record in records[1:]:
        message = record.get("message") if record.get("type") == "message" else None
        if isinstance(message, dict) and message.get("role") == "hookMessage":
            message["role"] = "custom"
    header["version"] = CURRENT_VERSION
    return True


def _add_tree(records: list[Record], session_id: str) -> None:
    taken: set[str] = set()
    parent: Optional[str] = None
    for position, record in enumerate(records[1:], 1):
        entry_id = _derived_id(session_id, position, taken)
        taken.add(entry_id)
        record["id"] = entry_id
        record["parentId"] = parent
        parent = entry_id
    for record in records[1:]:
        if record.get("type") == "compaction" and isinstance(record.get("firstKeptEntryIndex"), int):
            index = record.pop("firstKeptEntryIndex")
            if 0 < index < len(records):
                record["firstKeptEntryId"] = records[index]["id"]


def _derived_id(session_id: str, position: int, taken: Iterable[str]) -> str:
    digest = hashlib.sha1(f"{session_id}:{position}".encode()).hexdigest()
    for width in (8, 12, 16, 40):
        if digest[:width] not in taken:
            return digest[:width]
    return str(uuid.uuid4())  # pragma: no cover - a 160-bit collision
