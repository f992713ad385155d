"""The Streamable HTTP transport: every message a POST, answered with JSON or an SSE stream.

Each request's POST runs on the thread that sends it, which reads the answer (a JSON body
or an SSE stream) up to its deadline and hands every message to the connection (no thread is
started and nothing is handed over per call). Handshake-era extras: the
``Mcp-Session-Id`` the server assigns is sent back on every request and ended with DELETE
at close; a standalone GET stream carries server-initiated messages; a response stream that
ends before its answer is resumed with GET and ``Last-Event-ID`` after the server's
``retry`` interval (at most ``MAX_RESUMES`` times). A 404 on a request that carried a
session id means the session expired (:class:`SessionExpiredError`). Custom headers (an API
key, a bearer token) go on every request and never into logs or errors. OAuth is not
implemented. See docs/mcp.md#streamable-http.

A server is treated like any hostile HTTP server: a redirect is followed only to the same
origin and only when it keeps the method and body (307, 308), so no header, session id or
body ever reaches another host; bodies are read as they arrive, inflated by piagent piece by
piece and bounded (``MAX_MESSAGE_BYTES`` per JSON body or SSE line and event); posts nobody
waits for (notifications, answers) run on a few threads with a read timeout; every connection
in use can be shut by ``close()``, which therefore returns at once.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any, Optional

import requests

from .._interrupts import Tracker, read_body, session, socket_of
from .._redaction import shown_url
from .._untrusted_http import ACCEPT_ENCODING, Inflater, redirect_target
from ..ai.providers._sse import SseFields, SseTooLargeError, iter_sse
from ..exceptions import AbortedRequest, ProviderStreamError
from ._connection import MAX_MESSAGE_BYTES, DeadlinePassed, passed, time_left
from ._errors import MCPConnectionError, MCPError, MCPRemoteError
from ._workers import Workers

__all__ = ["HttpTransport", "SessionExpiredError", "StreamBrokenError"]

logger = logging.getLogger("piagent.mcp")

HTTP_ERROR = -32000
"""The code of the error synthesised for an HTTP error status without a JSON-RPC body."""
MAX_RESUMES = 5
"""How many times one response stream is resumed with ``Last-Event-ID`` before giving up."""
DEFAULT_RETRY_MS = 1000
"""The wait before resuming when the server sent no ``retry`` field."""
CONNECT_TIMEOUT = 10.0
"""Seconds to open a TCP connection to the server."""
LISTEN_WAIT = 5.0
"""Seconds connecting waits for the server to answer the standalone GET stream (handshake era)."""
POST_TIMEOUT = 10.0
"""Seconds a notification or an answer to the server waits for its HTTP status."""
POST_THREADS = 4
"""Threads that send notifications and answers (nobody waits for them)."""
MAX_QUEUED_POSTS = 64
"""Notifications and answers waiting or being sent; more are dropped (warned about at the 1st,
2nd, 4th, 8th... drop)."""
RESUME_CHECK = 0.5
"""Seconds between two looks at whether a request waiting to resume its stream is still wanted."""
MAX_REDIRECTS = 5
"""Same-origin 307/308 redirects followed per request; any other redirect is refused."""
ERROR_BODY_BYTES = 65_536
"""What is read of an HTTP error answer's body (for its JSON-RPC error)."""
FINISH_BYTES = 4096
"""What is read, without waiting, of a stream after its answer to find its end (and reuse its connection)."""
CLOSE_WAIT = 5.0
"""Seconds ``close()`` waits, in all, for the transport's threads once their connections are shut."""


_LISTEN = object()
"""The key of the standalone GET stream among the open streams."""


class SessionExpiredError(MCPConnectionError):
    """The server answered 404 to a request that carried its session id: start a new session."""


class StreamBrokenError(MCPConnectionError):
    """A response stream ended before its answer and could not be resumed."""


class HttpTransport:
    def __init__(self, url: str, headers: Optional[dict[str, str]] = None) -> None:
        self.url = url
        self._shown = shown_url(url)
        self._custom = dict(headers or {})
        self.session_id: Optional[str] = None
        self.protocol_header: Optional[str] = None
        self._http = session()  # piagent's shared pools, whose connections a Tracker can shut
        self._lock = threading.Lock()
        self._trackers: dict[Any, Tracker] = {}  # the connections of each exchange in flight
        self._threads: list[threading.Thread] = []
        self._closing = threading.Event()
        self._posts = Workers("mcp-http-post", POST_THREADS, MAX_QUEUED_POSTS)
        self._dropped = 0  # posts refused because MAX_QUEUED_POSTS waited

    def describe(self) -> str:
        """The URL as errors and logs show it (no user, password or query: they may hold a key)."""
        return self._shown

    def open(self, sink: Any) -> None:
        self._sink = sink

    # -- sending -------------------------------------------------------------------------------

    def send(
        self,
        message: dict,
        headers: Optional[dict] = None,
        request_id: Any = None,
        deadline: Optional[float] = None,
    ) -> None:
        """A request: POST it and read its answer here, until it is answered, cancelled, fails or
        ``deadline`` (monotonic) passes. Anything else: queued for a post thread."""
        if self._closing.is_set():
            raise MCPConnectionError("the MCP client is closed")
        if request_id is not None:
            self._exchange(message, headers or {}, request_id, deadline)
        elif not self._posts.submit(self._post_quietly, message, headers or {}):
            with self._lock:
                self._dropped += 1
                dropped = self._dropped
            if dropped & (dropped - 1) == 0:  # the 1st, 2nd, 4th, 8th...: a flood is not a flood of warnings
                logger.warning(
                    "MCP: dropped a %s: %d posts already wait (%d dropped so far)",
                    message.get("method", "response"),
                    MAX_QUEUED_POSTS,
                    dropped,
                )

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name="mcp-http", daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _headers(self, extra: Optional[dict] = None, accept: str = "application/json, text/event-stream") -> dict:
        headers = {**self._custom, "Accept": accept, "Accept-Encoding": ACCEPT_ENCODING}
        if self.session_id is not None:
            headers["Mcp-Session-Id"] = self.session_id
        if self.protocol_header is not None:
            headers["MCP-Protocol-Version"] = self.protocol_header
        headers.update(extra or {})
        return headers

    def _request(
        self, method: str, headers: dict, body: Optional[bytes] = None, read_timeout: Optional[float] = None
    ) -> requests.Response:
        """One HTTP request to the server, following same-origin 307/308 redirects only."""
        url = self.url
        for _ in range(MAX_REDIRECTS + 1):
            response = self._http.request(
                method,
                url,
                data=body,
                headers=headers,
                stream=True,
                timeout=(CONNECT_TIMEOUT, read_timeout),
                allow_redirects=False,
            )
            if not response.is_redirect:
                return response
            response.close()
            url, refusal = redirect_target(url, response)
            if refusal is not None:
                raise MCPConnectionError(
                    f"the MCP server at {self._shown} answered with {refusal}: refused, piagent follows only "
                    "same-origin 307/308 redirects, so no header or body reaches another host; connect to the "
                    "address it names if you trust it"
                )
        raise MCPConnectionError(f"the MCP server at {self._shown} redirected more than {MAX_REDIRECTS} times")

    def _post(self, message: dict, headers: dict, read_timeout: Optional[float] = None) -> requests.Response:
        body = json.dumps(message, separators=(",", ":")).encode("utf-8")
        all_headers = self._headers(headers)
        all_headers["Content-Type"] = "application/json"
        return self._request("POST", all_headers, body, read_timeout)

    def _post_quietly(self, message: dict, headers: dict) -> None:
        """A notification or a response: 202 expected; failures are logged (nobody waits)."""
        try:
            with self._tracked(object()), self._post(message, headers, POST_TIMEOUT) as response:
                if response.status_code >= 400:
                    logger.warning(
                        "MCP server refused a %s: HTTP %s", message.get("method", "response"), response.status_code
                    )
        except AbortedRequest:
            pass  # the client closed
        except (requests.RequestException, MCPError) as exc:
            logger.warning("could not send to the MCP server: %s", _clean(exc))

    def _exchange(self, message: dict, headers: dict, request_id: Any, deadline: Optional[float]) -> None:
        try:
            with self._tracked(request_id):
                self._exchange_tracked(message, headers, request_id, deadline)
        except (AbortedRequest, DeadlinePassed):
            pass  # cancelled, or too late: the connection ends the request
        except MCPError as exc:
            self._sink.fail(request_id, exc)
        except Exception as exc:  # a bound, a MemoryError, a bug: the caller must not wait for it
            if not self._closing.is_set():
                logger.debug("MCP exchange failed", exc_info=True)
            self._sink.fail(request_id, _read_error(self._shown, exc))

    @contextlib.contextmanager
    def _tracked(self, key: Any) -> Iterator[None]:
        """While in this block, the connections this thread uses can be shut with ``cancel(key)``."""
        tracker = Tracker()
        with self._lock:
            self._trackers[key] = tracker
        if self._closing.is_set():
            tracker.cancel()
        try:
            with tracker.sending():
                yield
        finally:
            with self._lock:
                if self._trackers.get(key) is tracker:
                    del self._trackers[key]

    def _exchange_tracked(self, message: dict, headers: dict, request_id: Any, deadline: Optional[float]) -> None:
        sent_session = self.session_id
        try:
            response = self._post(message, headers, time_left(deadline))
        except requests.RequestException as exc:
            if passed(deadline):
                raise DeadlinePassed() from exc
            unreachable = MCPConnectionError(f"cannot reach the MCP server at {self._shown}: {_clean(exc)}")
            self._sink.fail(request_id, unreachable)
            return
        with response:
            if self.session_id is None and response.headers.get("Mcp-Session-Id"):
                self.session_id = response.headers["Mcp-Session-Id"]
            if response.status_code == 404 and sent_session is not None:
                self._sink.fail(request_id, SessionExpiredError(f"the MCP session at {self._shown} expired (HTTP 404)"))
                return
            if response.status_code >= 400 or response.status_code == 202:
                self._sink.fail(request_id, _http_error(response, deadline))
                return
            content_type = response.headers.get("Content-Type", "")
            if content_type.startswith("text/event-stream"):
                last_id, retry = self._read_stream(response, request_id, deadline=deadline)
            else:
                self._read_json(response, request_id, deadline)
                return
        if last_id is not None and not self._answered(request_id):
            self._resume(request_id, last_id, retry, deadline)
        elif not self._answered(request_id):
            self._sink.fail(request_id, StreamBrokenError("the MCP server closed the response stream before answering"))

    def _read_json(self, response: requests.Response, request_id: Any, deadline: Optional[float]) -> None:
        self._sink.receive(_read_all(response, MAX_MESSAGE_BYTES, deadline))
        if not self._answered(request_id):
            self._sink.fail(request_id, StreamBrokenError("the MCP server's JSON answer did not answer the request"))

    def _answered(self, request_id: Any) -> bool:
        """Whether the connection no longer waits for ``request_id`` (answered, abandoned or failed)."""
        return not self._sink.waiting(request_id)

    def _read_stream(
        self,
        response: requests.Response,
        key: Any,
        retry_ms: int = DEFAULT_RETRY_MS,
        deadline: Optional[float] = None,
    ) -> tuple[Optional[str], int]:
        """Deliver the stream's messages until it ends, its request is answered or ``deadline`` passes.

        Returns the last event id seen and the retry interval (ms) to use before resuming:
        the stream's last ``retry:``, else ``retry_ms`` (what the server asked for before).
        """
        fields = SseFields()
        try:
            for _, data in iter_sse(_inflated(response, deadline), MAX_MESSAGE_BYTES, fields):
                if not data.strip():
                    continue  # a priming event: just an id (and maybe retry)
                self._sink.receive(data)
                if key is not _LISTEN and self._answered(key):
                    _finish_if_arrived(response)
                    break
        except (requests.RequestException, OSError, ValueError, AttributeError) as exc:
            if not self._closing.is_set():  # a broken connection: resumed if an id came
                logger.debug("MCP response stream broke: %s", _clean(exc))
        return fields.last_id, retry_ms if fields.retry is None else fields.retry

    def _resume(self, request_id: Any, last_id: str, retry: int, deadline: Optional[float]) -> None:
        """GET with ``Last-Event-ID`` after ``retry`` ms until the request is answered (SEP-1699)."""
        for _ in range(MAX_RESUMES):
            if not self._pause(retry, request_id, deadline):
                return
            headers = self._headers({"Last-Event-ID": last_id}, accept="text/event-stream")
            try:
                response = self._request("GET", headers, read_timeout=time_left(deadline))
            except requests.RequestException as exc:
                if passed(deadline):
                    raise DeadlinePassed() from exc
                logger.debug("resuming an MCP stream failed: %s", _clean(exc))
                continue
            with response:
                if response.status_code != 200:
                    self._sink.fail(request_id, _http_error(response, deadline))
                    return
                new_id, retry = self._read_stream(response, request_id, retry, deadline)
                last_id = new_id or last_id
            if self._answered(request_id):
                return
        self._sink.fail(request_id, StreamBrokenError(f"the MCP response stream broke {MAX_RESUMES + 1} times"))

    def _pause(self, retry_ms: int, request_id: Any, deadline: Optional[float]) -> bool:
        """Wait the server's ``retry`` interval before resuming; False once the request no longer
        needs it (answered, timed out, aborted) or the client closes. The request is looked at
        every ``RESUME_CHECK`` seconds, so a huge interval keeps no thread past its request."""
        resume_at = time.monotonic() + retry_ms / 1000.0
        while not self._answered(request_id):
            if passed(deadline):
                return False
            left = resume_at - time.monotonic()
            if left <= 0:
                return True
            if self._closing.wait(min(left, RESUME_CHECK)):
                return False
        return False

    # -- the standalone GET stream (handshake era) --------------------------------------------

    def listen(self, wait: float = LISTEN_WAIT) -> None:
        """Open the GET stream for server-initiated messages; 405 means the server has none.

        Returns once the server answered the GET (at most ``wait`` seconds): a server
        may send requests unrelated to any POST only there, so it must be open before calls.
        """
        opened = threading.Event()
        self._spawn(self._listen, opened)
        opened.wait(wait)

    def _listen(self, opened: threading.Event) -> None:
        try:
            with self._tracked(_LISTEN):
                self._listen_loop(opened)
        except AbortedRequest:
            pass
        except Exception as exc:  # a bound or a refused redirect: server-initiated messages stop
            logger.warning("the MCP GET stream ended: %s", _read_error(self._shown, exc))
        finally:
            opened.set()

    def _listen_loop(self, opened: threading.Event) -> None:
        last_id: Optional[str] = None
        retry = DEFAULT_RETRY_MS
        for _ in range(1000):  # a server that closes it is polled again after its retry interval
            extra = {} if last_id is None else {"Last-Event-ID": last_id}
            try:
                response = self._request("GET", self._headers(extra, accept="text/event-stream"))
            except requests.RequestException as exc:
                logger.debug("the MCP GET stream could not open: %s", _clean(exc))
                return
            opened.set()
            with response:
                if response.status_code != 200 or not response.headers.get("Content-Type", "").startswith(
                    "text/event-stream"
                ):
                    logger.debug("the MCP server offers no GET stream (HTTP %s)", response.status_code)
                    return
                new_id, retry = self._read_stream(response, _LISTEN, retry)
            if new_id is None and last_id is None:
                return  # nothing to resume from: the server does not want us back
            last_id = new_id or last_id
            if self._closing.wait(retry / 1000.0):
                return

    # -- ending --------------------------------------------------------------------------------

    def cancel(self, request_id: Any) -> None:
        """Close the request's connection (on stateless servers, that is the cancellation)."""
        with self._lock:
            tracker = self._trackers.pop(request_id, None)
        if tracker is not None:
            tracker.cancel()

    def close(self) -> None:
        """DELETE the session (if any), close every open stream and join the threads."""
        if self._closing.is_set():
            return
        self._closing.set()
        with self._lock:
            trackers = list(self._trackers.values())
            self._trackers.clear()
            threads = list(self._threads)
        for tracker in trackers:
            tracker.cancel()
        if self.session_id is not None:
            with contextlib.suppress(requests.RequestException, MCPError):
                self._request("DELETE", self._headers(), read_timeout=POST_TIMEOUT).close()
        deadline = time.monotonic() + CLOSE_WAIT
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout=max(0.0, deadline - time.monotonic()))


def _inflated(response: requests.Response, deadline: Optional[float] = None) -> Iterator[bytes]:
    """The body as it arrives, inflated piece by piece (gzip, deflate), never all at once; no
    read waits past ``deadline`` (:class:`DeadlinePassed` then)."""
    inflater = Inflater(response.headers.get("Content-Encoding", ""))
    sock = None if deadline is None else socket_of(response)
    pieces = read_body(response)
    while True:
        if passed(deadline):
            raise DeadlinePassed()
        if sock is not None:
            sock.settimeout(time_left(deadline))
        try:
            data = next(pieces, b"")
        except OSError:
            if passed(deadline):
                raise DeadlinePassed() from None
            raise
        if not data:
            return
        yield from inflater.feed(data)


def _finish_if_arrived(response: requests.Response) -> None:
    """Read the rest of an answered stream if it has already arrived (the server ends it after
    the answer): its connection then goes back to the pool instead of being closed. Never waits,
    and reads at most ``FINISH_BYTES``."""
    sock = socket_of(response)
    if sock is None:
        return
    sock.settimeout(0.0)
    read = 0
    with contextlib.suppress(OSError, requests.RequestException, ValueError, http.client.HTTPException):
        for piece in read_body(response, FINISH_BYTES):
            read += len(piece)
            if read >= FINISH_BYTES:
                return  # more than an end: not worth keeping the connection for


def _read_all(response: requests.Response, limit: int, deadline: Optional[float] = None) -> bytes:
    """The whole (inflated) body; :class:`MCPConnectionError` once it exceeds ``limit`` bytes."""
    body = bytearray()
    for piece in _inflated(response, deadline):
        body += piece
        if len(body) > limit:
            raise MCPConnectionError(f"the MCP server's answer is larger than {limit:,} bytes")
    return bytes(body)


def _read_error(url: str, exc: BaseException) -> MCPConnectionError:
    """An error for a failure while reading the server's answer (a bound, memory, a bug)."""
    if isinstance(exc, MCPConnectionError):
        return exc
    if isinstance(exc, SseTooLargeError):
        return MCPConnectionError(f"the MCP server at {url} sent a message larger than {MAX_MESSAGE_BYTES:,} bytes")
    return MCPConnectionError(f"reading the answer of the MCP server at {url} failed: {_clean(exc)}")


def _http_error(response: requests.Response, deadline: Optional[float] = None) -> MCPRemoteError:
    """The JSON-RPC error in an HTTP error response, else one that names the status."""
    status = response.status_code
    try:
        body = json.loads(_read_all(response, ERROR_BODY_BYTES, deadline))
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and isinstance(error.get("code"), int):
            return MCPRemoteError(error["code"], str(error.get("message", "")), error.get("data"), http_status=status)
    except (ValueError, RecursionError, requests.RequestException, OSError, MCPError, ProviderStreamError):
        pass
    if status == 202:
        return MCPRemoteError(HTTP_ERROR, "the MCP server accepted a request without answering it", http_status=status)
    return MCPRemoteError(HTTP_ERROR, f"HTTP {status} {response.reason or ''}".strip(), http_status=status)


def _clean(exc: BaseException) -> str:
    """An exception's message without request details (no headers: they may hold a key)."""
    return type(exc).__name__ + (f": {exc.args[0]}" if exc.args and isinstance(exc.args[0], str) else "")
