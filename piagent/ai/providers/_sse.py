"""Server-sent events (the ``text/event-stream`` format) from a stream of byte chunks.

The one SSE reader of piagent: the providers' streams and MCP's Streamable HTTP both use it.
Lines end in LF, CRLF or a lone CR, as the standard allows (a chunk with a CR in it is first
rewritten to LF line ends, so the usual chunk costs one search for CR). An event is the
``data:`` lines up to a blank line, joined with LF; ``event:`` names it; comments (``:``) are
skipped; ``id:`` and ``retry:`` are kept in ``fields`` when the caller passes an
:class:`SseFields` (MCP resumes a broken stream with them), else ignored. A last event not
followed by a blank line is still delivered. Work is linear in the bytes received, and no line
or event may exceed ``max_event_bytes`` (:class:`SseTooLargeError`, a
:class:`~piagent.exceptions.ProviderStreamError`, ends the stream).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Optional

from ...exceptions import ProviderStreamError

__all__ = ["SseFields", "SseTooLargeError", "iter_sse"]

SseEvent = tuple[Optional[str], bytes]


class SseFields:
    """What a stream said besides its events, as the standard keeps it for reconnecting.

    ``last_id``: the last event id, set when the event that carried it is dispatched (also one
    with no data: a "priming" event); ``retry``: the last ``retry:`` value (milliseconds).
    """

    __slots__ = ("last_id", "retry")

    def __init__(self) -> None:
        self.last_id: Optional[str] = None
        self.retry: Optional[int] = None


class SseTooLargeError(ProviderStreamError):
    """A line or an event over ``max_event_bytes``."""


def _too_large(what: str, limit: int) -> SseTooLargeError:
    return SseTooLargeError(f"The stream sent {what} larger than max_event_bytes={limit:,} bytes")


def iter_sse(
    chunks: Iterable[bytes], max_event_bytes: int = 16 * 1024 * 1024, fields: Optional[SseFields] = None
) -> Iterator[SseEvent]:
    """Yield ``(event name or None, data bytes)`` for every event in ``chunks``; ``fields``
    (if given) follows the stream's ``id:`` and ``retry:`` lines."""
    tail: list[bytes] = []  # the start of a line that has not ended yet
    tail_size = 0
    event_id: Optional[str] = None  # of the event being read (``fields`` only)
    name: Optional[str] = None
    data: list[bytes] = []
    data_size = 0
    cr_ended = False  # the last chunk ended in CR: an LF that starts the next one is its CRLF's
    for chunk in chunks:
        if cr_ended and chunk[:1] == b"\n":
            chunk = chunk[1:]
            cr_ended = False
        if not chunk:
            continue
        if 13 in chunk:  # a CR; an int is searched for at once (b"\r" in chunk first fails as an int)
            cr_ended = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        elif cr_ended:
            cr_ended = False
        if (
            not tail
            and not data
            and event_id is None
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
            if not line:
                if event_id is not None and fields is not None:
                    fields.last_id, event_id = event_id, None
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
            elif fields is not None:  # ":" comments are skipped; "id:" and "retry:" kept if asked
                field, _, value = line.partition(b":")
                value = value[1:] if value.startswith(b" ") else value
                if field == b"id" and b"\0" not in value:
                    event_id = value.decode("utf-8", "replace")
                elif field == b"retry" and value.isdigit():
                    fields.retry = int(value)
    if tail:
        line = b"".join(tail)
        if line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
    if event_id is not None and fields is not None:
        fields.last_id = event_id
    if data:
        yield name, b"\n".join(data)
