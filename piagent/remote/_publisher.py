"""A run's event publisher: events go to Redis from one thread, in order, many per round trip.

The run thread only serialises an event and queues it; the publisher thread writes everything
queued since its last write in one ``MULTI``: one script appending the events as one stream
entry (docs/remote.md#the-events-stream), then the control-stream bookkeeping that rides with
them. A failed write stops the publisher and is reported once through ``on_failure``.
"""

from __future__ import annotations

import datetime
import json
import logging
import threading
from typing import Any, Callable, Optional

import redis

from ..exceptions import InvalidValueError
from ._keys import RunKeys
from ._scripts import PUBLISH

__all__ = ["Publisher"]

logger = logging.getLogger("piagent.remote")

EVENTS_TTL_MS = 24 * 3600 * 1000  # the events stream expires a day after its last event
MAX_BATCH = 1000  # events per round trip at most
CLOSE_TIMEOUT = 10.0  # seconds close() waits for Redis

Extra = Callable[[Any], None]  # adds commands to the batch's pipeline


_ENCODER = json.JSONEncoder(default=str, check_circular=False)
_PROBE = ({"text": 'é\n"', "n": [1, -2.5], "flags": [True, False, None], "day": datetime.date(2026, 1, 2)},)
_PROBE_JSON = '[{"text": "\\u00e9\\n\\"", "n": [1, -2.5], "flags": [true, false, null], "day": "2026-01-02"}]'


def _c_encoder() -> Optional[Callable[[Any, int], Any]]:
    """CPython's C encoder built once (a private constructor: None where it is missing, or does
    not write what ``json.dumps(value, default=str)`` writes)."""
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    try:
        encode = make(None, str, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True)
        return encode if "".join(encode(_PROBE, 0)) == _PROBE_JSON else None
    except Exception:  # None, or another signature
        return None


_C_ENCODE = _c_encoder()


def encode(value: Any) -> str:
    """``json.dumps(value, default=str)`` (ASCII: no raw newline), a third cheaper for an event.

    ``json.dumps`` builds CPython's C encoder afresh for every call and tracks the containers it
    is in to refuse a circular value: here the encoder is built once, without that tracking (it
    is state shared by the threads that publish), and a circular value is refused by Python's
    recursion limit instead, as ``json.dumps`` refuses a value nested that deeply: InvalidValueError
    (a ValueError).
    """
    try:
        return "".join(_C_ENCODE(value, 0)) if _C_ENCODE else _ENCODER.encode(value)
    except RecursionError:
        raise InvalidValueError("an event that is circular or nested too deeply cannot be published") from None


class Publisher:
    def __init__(
        self, client: redis.Redis, keys: RunKeys, max_events: int, on_failure: Callable[[BaseException], None]
    ) -> None:
        self._redis = client
        self._keys = keys
        self._max_events = max_events
        self._on_failure = on_failure
        self._lock = threading.Lock()  # entered directly on the hot path (a Condition's `with` is Python code)
        self._changed = threading.Condition(self._lock)
        self._queue: list[tuple[str, Optional[Extra]]] = []
        self._failed: Optional[BaseException] = None
        self._closing = False
        self._thread = threading.Thread(target=self._run, name=f"piagent-publish-{keys.run_id}", daemon=True)
        self._thread.start()

    def publish(self, event: dict[str, Any], extra: Optional[Extra] = None) -> None:
        """Queue ``event`` (and ``extra`` commands for the same transaction)."""
        data = encode(event)
        with self._lock:
            if self._failed is not None or self._closing:
                return  # dropped: the run is ending (failure) or detached
            self._queue.append((data, extra))
            if len(self._queue) == 1:  # else the publisher has been woken already and not taken it yet
                self._changed.notify_all()

    def close(self) -> None:
        """Write what is queued, then stop the thread."""
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._thread.join(CLOSE_TIMEOUT)

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._queue or self._closing)
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                if not batch:
                    return  # closing, and everything is written
            try:
                self._write(batch)
            except redis.RedisError as exc:
                with self._changed:
                    self._failed = exc
                    self._queue = []
                self._on_failure(exc)
                return

    def _write(self, batch: list[tuple[str, Optional[Extra]]]) -> None:
        pipe = self._redis.pipeline(transaction=True)
        # EVAL with the body (not EVALSHA): a Redis restarted without the script still runs it
        events = "\n".join(data for data, _ in batch)  # no event's JSON has a raw newline (ensure_ascii)
        keys = self._keys
        pipe.eval(PUBLISH, 2, keys.events, keys.events_top, self._max_events, EVENTS_TTL_MS, events, len(batch))
        for _, extra in batch:
            if extra is not None:
                extra(pipe)
        pipe.execute()
