"""Key names, stream ids and Redis clients shared by both sides (see docs/remote.md#keys).

Every key of a run shares the hash tag ``{run_id}``, so a run lives on one Redis Cluster slot
and the Lua scripts may touch all of its keys.
"""

from __future__ import annotations

from typing import Any, Optional, Union

import redis

from ..exceptions import InvalidTypeError, InvalidValueError
from .errors import RemoteError

__all__ = [
    "RUN_TTL_MS",
    "RunKeys",
    "check_run_id",
    "client_for",
    "entries_of",
    "redis_errors",
    "stream_id",
    "write_with_ttl",
]

MAX_RUN_ID_CHARS = 200
SOCKET_TIMEOUT = 10.0  # seconds; longer than every blocking read (1 s slices)
CONNECT_TIMEOUT = 5.0
GROUP = "worker"  # the control stream's consumer group
CONSUMER = "owner"  # its only consumer: the worker holding the run's lease

RUN_TTL_MS = 7 * 24 * 3600 * 1000
"""How long a run's state (the control stream with its consumer group, the ``delivering`` notes,
the pending ``approvals``, the ``intents``) lives after its last write or attach, and a kept
approval (``approved:<id>``) after it was taken; a worker attached to the run renews the state's
expiry as it ages. A week, for a run resumed after an outage (docs/remote.md#keys,
docs/effects.md#remote-runs)."""


def check_run_id(run_id: Any) -> str:
    if not isinstance(run_id, str) or not run_id or len(run_id) > MAX_RUN_ID_CHARS:
        raise InvalidValueError(
            f"run_id must be a non-empty str of at most {MAX_RUN_ID_CHARS} characters, got {run_id!r}"
        )
    if any(ch in run_id for ch in "{}") or not run_id.isprintable():
        raise InvalidValueError(f"run_id must be printable and without braces, got {run_id!r}")
    return run_id


class RunKeys:
    """The Redis keys of one run."""

    __slots__ = ("approvals", "control", "delivering", "events", "events_top", "intents", "owner", "prefix", "run_id")

    def __init__(self, run_id: str) -> None:
        self.run_id = check_run_id(run_id)
        self.prefix = f"piagent:{{{run_id}}}:"
        self.control = self.prefix + "control"  # stream: steer, follow_up, abort (consumer group)
        self.events = self.prefix + "events"  # capped stream: every agent event, as JSON
        self.events_top = self.prefix + "events:top"  # the last event id given (PX as the stream)
        self.owner = self.prefix + "owner"  # the attached worker's lease token (PX)
        self.delivering = self.prefix + "delivering"  # hash: control entry id -> transcript index
        self.approvals = self.prefix + "approvals"  # hash: tool call id -> pending request (JSON)
        self.intents = self.prefix + "intents"  # hash: tool call id -> its intent (JSON), docs/effects.md

    def state(self) -> list[str]:
        """The keys whose expiry attaching sets and a live worker renews (RUN_TTL_MS)."""
        return [self.control, self.delivering, self.approvals, self.intents]

    def decision(self, tool_call_id: str) -> str:
        """List holding the one decision on a pending tool call."""
        return self.prefix + "decision:" + tool_call_id

    def approved(self, tool_call_id: str) -> str:
        """List holding an approval taken but not used yet: it outlives a crash until the call's intent uses it."""
        return self.prefix + "approved:" + tool_call_id


_clients: dict[str, redis.Redis] = {}  # URL -> the process's client for it (one connection pool)


def client_for(redis_url: Union[str, redis.Redis]) -> redis.Redis:
    """The client (decoding to str) for a URL, or the given client.

    Every handle and attachment given the same URL shares one client, so one connection pool:
    a run costs no connection set-up once the pool holds idle connections (redis-py's pool
    starts afresh in a forked child). Connections are kept for the process's lifetime.
    """
    if isinstance(redis_url, str):
        client = _clients.get(redis_url)
        if client is None:  # no lock (a fork could copy it held): a racing thread's spare client is never used
            built = redis.Redis.from_url(
                redis_url, decode_responses=True, socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=CONNECT_TIMEOUT
            )
            client = _clients.setdefault(redis_url, built)
        return client
    if isinstance(redis_url, redis.Redis):
        if not redis_url.get_connection_kwargs().get("decode_responses"):
            raise InvalidValueError(
                "a redis.Redis client given to piagent.remote must be built with decode_responses=True"
            )
        return redis_url
    raise InvalidTypeError(f"redis_url must be a redis:// URL or a redis.Redis client, got {type(redis_url).__name__}")


def write_with_ttl(client: redis.Redis, keys: RunKeys, command: str, key: str, *args: Any) -> Any:
    """``command key *args`` (``key`` one of ``keys.state()``) and the expiry of every state key of
    the run (``RUN_TTL_MS`` from now) in one ``MULTI``: one round trip, no key left without an
    expiry, and the run's state expiring as one, a week after its last write (a ``delivering``
    note never lapses before the pending entry it is about); the command's reply."""
    pipe = client.pipeline(transaction=True)
    pipe.execute_command(command, key, *args)
    for name in keys.state():
        pipe.pexpire(name, RUN_TTL_MS)
    return pipe.execute()[0]


def entries_of(reply: Any) -> list[tuple[str, Optional[dict[str, str]]]]:
    """The ``(entry id, fields)`` of an XREAD/XREADGROUP reply, every stream's in turn.

    Fields are None for an entry deleted while it stayed in a consumer's pending list.
    """
    return [(str(entry_id), fields) for _, entries in reply or () for entry_id, fields in entries]


def stream_id(entry_id: str) -> tuple[int, int]:
    """A stream entry id ``"<ms>-<seq>"`` as a comparable pair."""
    ms, _, seq = str(entry_id).partition("-")
    if not ms.isdigit() or not (seq or "0").isdigit():
        raise InvalidValueError(f'expected a stream entry id like "1700000000000-0", got {entry_id!r}')
    return int(ms), int(seq or 0)


class redis_errors:  # noqa: N801 -- used as a context manager, named like one
    """Turn redis-py's errors into :class:`RemoteError` naming the operation (the cause is chained)."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: Optional[BaseException], tb: Any) -> None:
        if isinstance(exc, redis.RedisError):
            raise RemoteError(f"{self.what} failed: {type(exc).__name__}: {exc}") from exc
