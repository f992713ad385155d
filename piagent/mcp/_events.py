"""Server-sent events with every field MCP needs: ``id`` and ``retry`` as well as ``data``.

piagent's provider SSE reader (piagent/ai/providers/_sse.py) drops ``id:`` and ``retry:``,
which an MCP client needs to resume a broken stream; this reader keeps them. Lines end in
LF, CRLF or CR; an event is dispatched at a blank line; comments are skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Optional

__all__ = ["SseEvent", "iter_events"]


@dataclass
class SseEvent:
    """One event: its ``data`` (lines joined with LF), ``event`` name, ``id`` and ``retry`` (ms)."""

    data: str
    event: Optional[str] = None
    id: Optional[str] = None
    retry: Optional[int] = None


def _lines(chunks: Iterable[bytes]) -> Iterator[str]:
    buffer = b""
    for chunk in chunks:
        if not chunk:
            continue
        buffer += chunk
        while True:
            cut = min((i for i in (buffer.find(b"\n"), buffer.find(b"\r")) if i >= 0), default=-1)
            if cut < 0 or (buffer[cut : cut + 1] == b"\r" and cut == len(buffer) - 1):
                break  # a CR at the very end may be the first half of CRLF
            end = cut + 2 if buffer[cut : cut + 2] == b"\r\n" else cut + 1
            yield buffer[:cut].decode("utf-8", "replace")
            buffer = buffer[end:]
    if buffer:
        yield buffer.rstrip(b"\r").decode("utf-8", "replace")
        yield ""


def iter_events(chunks: Iterable[bytes]) -> Iterator[SseEvent]:
    """Yield an :class:`SseEvent` per dispatched event (also events that carry only ``id``/``retry``)."""
    data: list[str] = []
    event: Optional[str] = None
    event_id: Optional[str] = None
    retry: Optional[int] = None
    seen = False
    for line in _lines(chunks):
        if not line:
            if seen:
                yield SseEvent("\n".join(data), event, event_id, retry)
            data, event, event_id, retry, seen = [], None, None, None, False
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        seen = True
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            event_id = value
        elif name == "retry" and value.isdigit():
            retry = int(value)
