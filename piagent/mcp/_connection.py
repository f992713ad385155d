"""JSON-RPC over one transport: request ids, waiting, cancellation and inbound dispatch.

Many threads may call :meth:`Connection.request` at once: each request gets its own id and
waiter, and the transport's reader thread(s) hand every incoming message to
:meth:`Connection.deliver`, which wakes the waiter whose id matches (requests are
multiplexed; no caller ever reads the wire). A request ends with its result, the server's
error (:class:`MCPRemoteError`), its timeout (:class:`MCPTimeoutError`), its abort signal
(:class:`~piagent.AbortedError`, at once) or the connection's end (:class:`MCPConnectionError`);
a timeout, an abort and a Ctrl-C while waiting cancel it on the server too.
Server-to-client requests are answered on a few threads of their own
(:data:`ANSWER_THREADS`), so a slow callback never blocks the reader; at most
:data:`MAX_SERVER_REQUESTS` wait or run at once, and more are refused at once with an error.
A message that cannot be parsed (not JSON, or nested too deeply for Python's parser) fails the
requests in flight and the connection stays; anything else going wrong in a reader ends the
connection (:meth:`Connection.broken`), so no request ever waits for a reader that is gone.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from typing import Any, Callable, Optional, Union

from ..abort import AbortedError, AbortSignal
from ._errors import MCPConnectionError, MCPError, MCPProtocolError, MCPRemoteError, MCPTimeoutError
from ._protocol import INTERNAL_ERROR, METHOD_NOT_FOUND
from ._workers import Workers

__all__ = [
    "ANSWER_THREADS",
    "MAX_MESSAGE_BYTES",
    "MAX_SERVER_REQUESTS",
    "Connection",
    "DeadlinePassed",
    "RequestHandler",
    "passed",
    "time_left",
]

logger = logging.getLogger("piagent.mcp")

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""One message from the server (a stdio line, an HTTP body or SSE event, inflated): a larger one ends the exchange."""
ANSWER_THREADS = 4
"""Threads that answer the server's requests (``ping``, ``sampling/createMessage``...) of one connection."""
MAX_SERVER_REQUESTS = 64
"""Server requests waiting for an answer or being answered at once; more get an error at once."""

RequestId = Union[str, int]
RequestHandler = Callable[[str, dict], dict]
"""``handler(method, params) -> result``; raise :class:`MCPRemoteError` to answer with an error."""


class DeadlinePassed(MCPTimeoutError):
    """A transport stopped reading for a request whose deadline passed (the connection ends it
    with its own :class:`MCPTimeoutError`, naming the method)."""


def passed(deadline: Optional[float]) -> bool:
    """Whether the monotonic ``deadline`` (None: none) has passed."""
    return deadline is not None and time.monotonic() >= deadline


def time_left(deadline: Optional[float]) -> Optional[float]:
    """Seconds until ``deadline`` for a blocking call (None: no bound; never 0, which means "do not block")."""
    return None if deadline is None else max(0.001, deadline - time.monotonic())


class _Pending:
    """One request's outcome, settled once (the first outcome wins) and waited for by its caller.

    Two plain locks rather than a ``threading.Event``: settling wakes the caller with one lock
    release, where an Event's condition also hands its own lock over between the two threads.
    """

    __slots__ = ("_claimed", "_unanswered", "outcome", "on_progress")

    def __init__(self, on_progress: Optional[Callable[[dict], None]]) -> None:
        self._claimed = threading.Lock()  # taken by the first settle()
        self._unanswered = threading.Lock()  # held until that settle() has stored its outcome
        self._unanswered.acquire()
        self.outcome: Any = None  # the result dict, or the exception to raise
        self.on_progress = on_progress

    @property
    def settled(self) -> bool:
        """Whether an outcome claimed it (it may be stored a moment later: :meth:`wait` for it)."""
        return self._claimed.locked()

    def settle(self, outcome: Any) -> None:
        if self._claimed.acquire(blocking=False):
            self.outcome = outcome
            self._unanswered.release()

    def wait(self, deadline: Optional[float]) -> bool:
        """Whether it is settled by the monotonic ``deadline`` (None: no bound)."""
        while True:
            left = time_left(deadline)
            if self._unanswered.acquire(timeout=-1 if left is None else left):
                break
            if passed(deadline):
                return False
        self._unanswered.release()  # settled for good: a later wait returns at once
        return True


class Connection:
    """JSON-RPC 2.0 client side over ``transport`` (see :mod:`piagent.mcp._stdio` / ``_http``).

    ``on_notification(method, params)`` gets every server notification other than progress;
    ``on_request(method, params)`` answers server requests. ``cancel_by_notification`` says
    whether an abandoned request is cancelled with ``notifications/cancelled`` (stdio and
    the handshake era) or only by the transport closing its stream (stateless HTTP).
    """

    def __init__(
        self,
        transport: Any,
        on_notification: Callable[[str, dict], None],
        on_request: RequestHandler,
    ) -> None:
        self.transport = transport
        self.on_notification = on_notification
        self.on_request = on_request
        self.cancel_by_notification = True
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[RequestId, _Pending] = {}
        self._progress: dict[RequestId, _Pending] = {}
        self._closed: Optional[MCPError] = None
        self._answers = Workers("mcp-answer", ANSWER_THREADS, MAX_SERVER_REQUESTS)
        transport.open(self)

    @property
    def closed(self) -> Optional[MCPError]:
        """None while usable; else why it ended."""
        return self._closed

    def request(
        self,
        method: str,
        params: Optional[dict] = None,
        *,
        timeout: Optional[float],
        signal: Optional[AbortSignal] = None,
        on_progress: Optional[Callable[[dict], None]] = None,
        headers: Optional[dict] = None,
    ) -> dict:
        """Send a request and wait for its result (see the module docstring for how it ends)."""
        if self._closed is not None:
            raise self._closed
        request_id = next(self._ids)
        params = dict(params or {})
        pending = _Pending(on_progress)
        if on_progress is not None:
            meta = dict(params.get("_meta") or {})
            meta["progressToken"] = request_id
            params["_meta"] = meta
        with self._lock:
            self._pending[request_id] = pending
            if on_progress is not None:
                self._progress[request_id] = pending
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        remove_listener: Callable[[], None] = lambda: None  # noqa: E731 -- a no-op until a signal gives one
        if signal is not None:

            def abort() -> None:
                pending.settle(AbortedError(signal.reason or "aborted"))
                self.transport.cancel(request_id)  # whatever reads the answer stops now

            remove_listener = signal.add_listener(abort)
        try:
            deadline = None if timeout is None else time.monotonic() + timeout
            self.transport.send(message, headers=headers, request_id=request_id, deadline=deadline)
            if not pending.wait(deadline):
                pending.settle(MCPTimeoutError(f"{method}: no answer within {timeout:g} s"))
                pending.wait(None)  # an answer that claimed it first is stored a moment later
        except KeyboardInterrupt:  # a Ctrl-C while waiting: the request is abandoned as an abort would
            self._abandon(request_id, "interrupted")
            raise
        finally:
            remove_listener()
            with self._lock:
                self._pending.pop(request_id, None)
                self._progress.pop(request_id, None)
        outcome = pending.outcome
        if isinstance(outcome, BaseException):
            if isinstance(outcome, (AbortedError, MCPTimeoutError)):
                self._abandon(request_id, str(outcome))
            raise outcome
        return outcome  # a result dict (deliver() checks it)

    def notify(self, method: str, params: Optional[dict] = None, headers: Optional[dict] = None) -> None:
        message: dict = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.transport.send(message, headers=headers)

    def _abandon(self, request_id: RequestId, reason: str) -> None:
        """Tell the server to stop: close the request's stream and/or send notifications/cancelled."""
        if self._closed is not None:
            return
        self.transport.cancel(request_id)
        if self.cancel_by_notification:
            try:
                self.notify("notifications/cancelled", {"requestId": request_id, "reason": reason})
            except MCPError as exc:
                logger.debug("could not send notifications/cancelled: %s", exc)

    # -- called by the transport's reader threads -------------------------------------------

    def receive(self, data: bytes) -> None:
        """Parse one message (a stdio line, an SSE event's data, a JSON body) and route it."""
        try:
            message = json.loads(data)
        except ValueError:
            self.garbage(data[:200].decode("utf-8", "replace"))
            return
        except RecursionError:
            self.garbage(f"a message of {len(data):,} bytes nested too deeply to parse")
            return
        try:
            for one in message if isinstance(message, list) else [message]:  # a list: a JSON-RPC batch
                self.deliver(one)
        except RecursionError:  # parsed, but too deep for what routing does with it
            self.garbage(f"a message of {len(data):,} bytes nested too deeply to handle")

    def deliver(self, message: Any) -> None:
        """Route one message from the server (a parsed JSON value)."""
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.garbage(json.dumps(message)[:200])
            return
        method = message.get("method")
        if isinstance(method, str):
            raw_params = message.get("params")
            params: dict = raw_params if isinstance(raw_params, dict) else {}
            if "id" in message:
                if not self._answers.submit(self._answer, message["id"], method, params):
                    busy = MCPRemoteError(INTERNAL_ERROR, f"too many requests at once (at most {MAX_SERVER_REQUESTS})")
                    self._send_answer(message["id"], method, busy)
            elif method == "notifications/progress":
                with self._lock:
                    pending = self._progress.get(params.get("progressToken", ""))
                if pending is not None and pending.on_progress is not None:
                    _call_quietly(pending.on_progress, params)
            else:
                _call_quietly(self.on_notification, method, params)
            return
        request_id = message.get("id")
        with self._lock:
            pending = self._pending.get(request_id) if isinstance(request_id, (str, int)) else None
        if pending is None:
            logger.debug("MCP response for an unknown or abandoned request: %.200s", message)
        elif isinstance(message.get("error"), dict):
            error = message["error"]
            pending.settle(MCPRemoteError(_int(error.get("code")), str(error.get("message", "")), error.get("data")))
        elif isinstance(message.get("result"), dict):
            pending.settle(message["result"])
        else:
            pending.settle(MCPProtocolError(f"malformed JSON-RPC response: {json.dumps(message)[:200]}"))

    def waiting(self, request_id: RequestId) -> bool:
        """Whether a caller still waits for the answer to ``request_id``."""
        with self._lock:
            pending = self._pending.get(request_id)
        return pending is not None and not pending.settled

    def fail(self, request_id: RequestId, error: BaseException) -> None:
        """End one request with ``error`` (a transport-level failure of its exchange)."""
        with self._lock:
            pending = self._pending.get(request_id)
        if pending is not None:
            pending.settle(error)

    def garbage(self, text: str) -> None:
        """The server sent something that is not JSON-RPC: fail the requests in flight with it."""
        logger.warning("MCP server sent a line that is not JSON-RPC: %.200s", text)
        error = MCPProtocolError(f"the server sent something that is not JSON-RPC: {text[:200]!r}")
        with self._lock:
            pending = list(self._pending.values())
        for waiter in pending:
            waiter.settle(error)

    def broken(self, error: MCPError) -> None:
        """The channel ended: every request in flight and every later one fails with ``error``."""
        with self._lock:
            if self._closed is None:
                self._closed = error
            pending = list(self._pending.values())
        for waiter in pending:
            waiter.settle(error)

    def _answer(self, request_id: Any, method: str, params: dict) -> None:
        try:
            outcome: Union[dict, MCPRemoteError] = self.on_request(method, params)
        except MCPRemoteError as exc:
            outcome = exc
        except Exception as exc:
            logger.exception("answering the MCP server's %s request failed", method)
            outcome = MCPRemoteError(INTERNAL_ERROR, str(exc))
        self._send_answer(request_id, method, outcome)

    def _send_answer(self, request_id: Any, method: str, outcome: Union[dict, MCPRemoteError]) -> None:
        response: dict = {"jsonrpc": "2.0", "id": request_id}
        if isinstance(outcome, MCPRemoteError):
            response["error"] = {"code": outcome.code, "message": outcome.message}
            if outcome.data is not None:
                response["error"]["data"] = outcome.data
        else:
            response["result"] = outcome
        try:
            self.transport.send(response)
        except MCPError as exc:
            logger.warning("could not answer the MCP server's %s request: %s", method, exc)

    def close(self) -> None:
        self.broken(MCPConnectionError("the MCP client is closed"))
        self.transport.close()


def not_supported(method: str, hint: str) -> MCPRemoteError:
    return MCPRemoteError(METHOD_NOT_FOUND, f"{method} is not supported by this client ({hint})")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else INTERNAL_ERROR


def _call_quietly(callback: Callable[..., Any], *args: Any) -> None:
    try:
        callback(*args)
    except Exception:  # a user callback must not kill the reader thread
        logger.exception("MCP notification callback raised")
