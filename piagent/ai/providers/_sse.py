"""Server-sent events (the ``text/event-stream`` format) from a stream of byte chunks.

Lines end in LF or CRLF (a lone CR, allowed by the standard, is not used by any LLM API). An
event is the ``data:`` lines up to a blank line, joined with LF; ``event:`` names it; comments
(``:``), ``id:`` and ``retry:`` are ignored. A last event not followed by a blank line is still
delivered. Work is linear in the bytes received, and no line or event may exceed
``max_event_bytes`` (a :class:`~piagent.exceptions.ProviderStreamError` ends the stream).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Optional

from ...exceptions import ProviderStreamError

__all__ = ["iter_sse"]

SseEvent = tuple[Optional[str], bytes]


def _too_large(what: str, limit: int) -> ProviderStreamError:
    return ProviderStreamError(f"The stream sent {what} larger than max_event_bytes={limit:,} bytes")


def iter_sse(chunks: Iterable[bytes], max_event_bytes: int = 16 * 1024 * 1024) -> Iterator[SseEvent]:
    """Yield ``(event name or None, data bytes)`` for every event in ``chunks``."""
    tail: list[bytes] = []  # the start of a line that has not ended yet
    tail_size = 0
    name: Optional[str] = None
    data: list[bytes] = []
    data_size = 0
    for chunk in chunks:
        if not chunk:
            continue
        if (
            not tail
            and not data
            and chunk.startswith(b"data: ")
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk.endswith(b"\n\n")
            and len(chunk) <= max_event_bytes
        ):  # the usual case: the chunk is exactly one single-line event
            yield name, chunk[6:-2]
            name = None
            continue
        if b"\n" not in chunk:  # more of a long line: keep it, join it once when it ends
            tail.append(chunk)
            tail_size += len(chunk)
            if tail_size > max_event_bytes:
                raise _too_large("a line", max_event_bytes)
            continue
        lines = chunk.split(b"\n")
        if tail:
            tail.append(lines[0])
            lines[0] = b"".join(tail)
            tail = []
        last = lines.pop()
        tail_size = len(last)
        if last:
            tail.append(last)
        for line in lines:
            if len(line) > max_event_bytes:
                raise _too_large("a line", max_event_bytes)
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if data:
                    yield name, data[0] if len(data) == 1 else b"\n".join(data)
                    data = []
                    data_size = 0
                name = None
            elif line.startswith(b"data:"):
                value = line[6:] if line.startswith(b"data: ") else line[5:]
                data_size += len(value) + 1
                if data_size > max_event_bytes:
                    raise _too_large("an event", max_event_bytes)
                data.append(value)
            elif line.startswith(b"event:"):
                name = line[6:].strip().decode("utf-8", "replace")
            # ":" comments, "id:" and "retry:" carry nothing a provider needs
    if tail:
        line = b"".join(tail).rstrip(b"\r")
        if line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
    if data:
        yield name, b"\n".join(data)
