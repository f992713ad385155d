"""``RunHandle``: drive and watch a run from any process (see docs/remote.md#the-run-handle)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any, Optional, Union

import redis

from ..ai.nesting import MAX_RECORD_DEPTH, loads, loads_each
from ..exceptions import InvalidTypeError, InvalidValueError
from ._keys import RUN_TTL_MS, RunKeys, client_for, entries_of, redis_errors, stream_id, write_with_ttl
from ._scripts import ABORT, DECIDE

__all__ = ["RunHandle"]

logger = logging.getLogger("piagent.remote")

READ_SLICE_MS = 1000  # events() blocks on Redis in slices this long (it checks its timeout between them)
READ_COUNT = 500  # events fetched per XREAD
DECISION_TTL_MS = 60_000  # an unclaimed decision expires (the worker takes it within milliseconds)


class RunHandle:
    """One run (a conversation) seen from any process: steer it, approve its tools, follow its events.

    ``redis_url`` is a ``redis://`` URL (handles and attachments given the same URL share one
    connection pool) or a ``redis.Redis`` client built with ``decode_responses=True`` (shared,
    never closed by the handle). Every method is one or two atomic Redis commands; a handle is
    safe from any thread. Redis errors raise
    :class:`~piagent.remote.RemoteError`.
    """

    def __init__(self, redis_url: Union[str, redis.Redis], run_id: str) -> None:
        self.keys = RunKeys(run_id)
        self._redis = client_for(redis_url)
        self._abort = self._redis.register_script(ABORT)
        self._decide = self._redis.register_script(DECIDE)

    @property
    def run_id(self) -> str:
        return self.keys.run_id

    # -- messages ---------------------------------------------------------------------------

    def steer(self, text: str) -> str:
        """Queue a steering message (injected before the run's next model call); returns its entry id.

        Delivered exactly once, in the order of this handle's calls; kept for the next worker
        that attaches if none is attached now (for ``RUN_TTL_MS``, a week, after the run's last
        activity: docs/remote.md#keys).
        """
        return self._send("steer", text)

    def follow_up(self, text: str) -> str:
        """Queue a follow-up message (run once the agent has nothing left to do); returns its entry id."""
        return self._send("follow_up", text)

    def _send(self, kind: str, text: str) -> str:
        if not isinstance(text, str):
            raise InvalidTypeError(f"{kind}() takes the message text as a str, got {type(text).__name__}")
        timestamp = str(int(time.time() * 1000))  # the message's own timestamp (kept by the worker)
        with self._errors(kind):
            entry = ("kind", kind, "text", text, "timestamp", timestamp)
            return str(write_with_ttl(self._redis, self.keys, "XADD", self.keys.control, "*", *entry))

    # -- control ----------------------------------------------------------------------------

    def abort(self, reason: str = "Aborted from another process") -> bool:
        """Abort the attached worker's run (it ends within 100 ms); False if no worker is attached.

        An abort sent while no worker is attached is not kept: it would end the next run.
        """
        with self._errors("abort"):
            return bool(self._abort(keys=[self.keys.owner, self.keys.control], args=[str(reason), RUN_TTL_MS]))

    def approve(self, tool_call_id: str) -> bool:
        """Let a pending tool call run; False if it was not pending (decided already, timed out, unknown)."""
        return self._decision(tool_call_id, {"approved": True})

    def deny(self, tool_call_id: str, reason: Optional[str] = None) -> bool:
        """Block a pending tool call (the model sees ``reason``); False if it was not pending."""
        return self._decision(tool_call_id, {"approved": False, "reason": reason})

    def pending_approvals(self) -> dict[str, dict[str, Any]]:
        """The tool calls waiting for a decision: ``{tool_call_id: {"toolName", "args", ...}}``."""
        with self._errors("pending_approvals"):
            raw = self._redis.hgetall(self.keys.approvals)
        pending = {}
        for call_id, request in raw.items():
            parsed = _json_object(_loaded(request, "approval request"), "approval request", repr(call_id), self.run_id)
            if parsed is not None:
                pending[str(call_id)] = parsed
        return pending

    def _decision(self, tool_call_id: str, decision: dict[str, Any]) -> bool:
        if not isinstance(tool_call_id, str) or not tool_call_id:
            raise InvalidValueError(f"tool_call_id must be a non-empty str, got {tool_call_id!r}")
        with self._errors("approve" if decision["approved"] else "deny"):
            keys = [self.keys.approvals, self.keys.decision(tool_call_id)]
            return bool(self._decide(keys=keys, args=[tool_call_id, json.dumps(decision), DECISION_TTL_MS]))

    # -- events -----------------------------------------------------------------------------

    def events(self, since: Optional[str] = None, timeout: Optional[float] = None) -> Iterator[dict[str, Any]]:
        """Yield the run's events, oldest first, blocking for new ones: each event's ``to_dict()``
        with its stream entry id added as ``"eventId"``.

        ``since``: an ``eventId`` already seen (resume after it; e.g. SSE's Last-Event-ID), None
        for the oldest event kept (the stream is capped). ``timeout``: stop after that many
        seconds without a new event (None: wait forever). The iterator never ends on its own
        otherwise: stop at the ``agent_end`` you are waiting for.
        """
        last = "0-0" if since is None else since
        seen = stream_id(last)  # a clear ValueError for something that is not an entry id
        idle_since = time.monotonic()
        while True:
            block = READ_SLICE_MS
            if timeout is not None:
                left = timeout - (time.monotonic() - idle_since)
                if left <= 0:
                    return
                block = max(1, min(block, int(left * 1000)))
            with self._errors("events"):
                reply = self._redis.xread({self.keys.events: last}, count=READ_COUNT, block=block)
            for entry_id, fields in entries_of(reply):
                last = entry_id
                events = self._events_in(entry_id, fields or {}, seen)
                yield from events
                if events:
                    idle_since = time.monotonic()

    def last_event_id(self) -> Optional[str]:
        """The ``eventId`` of the newest event kept, None when there is none: taken before sending
        a message, ``events(since=...)`` then follows only what comes after (that message's run)."""
        with self._errors("last_event_id"):
            newest = self._redis.xrevrange(self.keys.events, count=1)  # an entry's id is its last event's
        return str(newest[0][0]) if newest else None

    def _events_in(self, entry_id: str, fields: dict[str, str], seen: tuple[int, int]) -> list[dict[str, Any]]:
        """The events of an events entry newer than the id ``seen``, each with its ``eventId``.

        An ``events`` entry holds a batch, one JSON a line, numbered up to the entry's id (those
        up to ``seen`` are left out: a resume inside the batch); an ``event`` entry (written by an
        older worker) holds one event, whose id is the entry's. A bad event is skipped.
        """
        batch = fields.get("events")
        texts = [fields.get("event") or "{}"] if batch is None else batch.split("\n")
        ms, last = stream_id(entry_id)
        first = last - len(texts) + 1
        if first < 0:
            logger.warning("skipped events entry %s of run %r: its id numbers fewer events", entry_id, self.run_id)
            return []
        start = seen[1] - first + 1 if ms == seen[0] and seen[1] >= first else 0
        events, run_id = [], self.run_id
        for i, value in enumerate(loads_each(texts[start:], "event", MAX_RECORD_DEPTH), first + start):
            event_id = f"{ms}-{i}"
            event = _json_object(value, "event", event_id, run_id, typed=True)
            if event is not None:
                event["eventId"] = event_id
                events.append(event)
        return events

    # -- plumbing ---------------------------------------------------------------------------

    def _errors(self, operation: str) -> redis_errors:
        return redis_errors(f"{operation}() on run {self.run_id!r}")

    def close(self) -> None:
        """Nothing to release: the connections belong to the URL's shared pool (or to the client given)."""

    def __enter__(self) -> RunHandle:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<RunHandle run_id={self.run_id!r}>"


def _loaded(text: Any, what: str) -> Any:
    """The JSON value of ``text``, or the ValueError that refuses it (as ``loads_each`` gives)."""
    try:
        return loads(str(text), what, MAX_RECORD_DEPTH)
    except ValueError as exc:
        return exc


def _json_object(value: Any, what: str, key: str, run_id: str, typed: bool = False) -> Optional[dict[str, Any]]:
    """``value`` (the ``what`` named ``key`` of run ``run_id``, read as :func:`_loaded` does) if a
    JSON object (with a string ``type`` if ``typed``), or None with a warning (anyone who can
    write the run's keys can write anything there: one bad entry is skipped, never the end of
    the reader)."""
    if isinstance(value, dict) and (not typed or isinstance(value.get("type"), str)):
        return value
    if isinstance(value, ValueError):
        problem = f"not JSON ({str(value)[:200]})"
    else:
        problem = "it has no type" if isinstance(value, dict) else "not a JSON object"
    logger.warning("skipped %s %s of run %r: %s", what, key, run_id, problem)
    return None
