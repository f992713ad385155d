"""HTTP for providers: one streaming POST with retries, bounds, deadlines and immediate abort.

:func:`open_stream` sends the request and returns an :class:`HttpStream` once response
headers with a 2xx status arrived. Before that:

* 408, 429, 500, 502, 503, 504 and 529 (Anthropic's "overloaded") answers and connection
  failures are retried up to ``max_retries`` times with exponential backoff (0.5 s, 1 s, 2 s...,
  a status retry jittered by +-25 %, capped by ``max_retry_delay_ms``); a ``Retry-After`` the
  server asks for is honoured, and if it exceeds ``max_retry_delay_ms`` the request fails at
  once instead of waiting;
* a redirect is followed only to the same origin (scheme, host and port) and only when it
  keeps the method and body (307, 308); any other is refused with :class:`HttpStatusError`, so
  no credential header and no conversation ever reaches another host;
* any other status raises :class:`HttpStatusError` carrying the provider's own error text.

While the body streams (:meth:`HttpStream.sse`), it is read as it arrives, inflated by piagent
itself and bounded (docs/providers.md#limits): at most ``max_response_bytes`` inflated bytes
in all, no SSE line or event over ``max_event_bytes``, no wait over ``idle_timeout_ms``
between two events, and the whole call (retries included) within ``deadline_ms``.

Abort works at every moment: while connecting or waiting for headers (the request runs on a
short-lived thread so the caller can stop waiting, and the connection it uses is shut down so
that thread ends too), between retries, and while the body streams (the socket is shut down,
so a blocked read returns at once); Ctrl-C likewise on the main thread (see
:mod:`piagent._interrupts`). Secrets given to :func:`open_stream` are scrubbed from every
error message before it is cut.
"""

from __future__ import annotations

import contextlib
import contextvars
import email.utils
import http.client
import json
import logging
import random
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, Callable, Optional

import requests
import urllib3.exceptions

from ... import instrumentation
from ..._interrupts import (
    InterruptWatch,
    Tracker,
    read_body,
    session,
    shut,
    shut_socket,
    socket_of,
    wait,
    wait_slice,
)
from ..._redaction import redact, shorten
from ..._threads import run_in_thread
from ..._untrusted_http import ACCEPT_ENCODING, Inflater, redirect_target
from ...abort import AbortSignal
from ...exceptions import AbortedRequest, HttpStatusError, ProviderError, ProviderStreamError
from ..types import Model, StreamOptions
from ._sse import SseEvent, iter_sse

__all__ = ["AbortedRequest", "HttpStatusError", "HttpStream", "Limits", "open_stream", "redact", "describe_error"]

logger = logging.getLogger("piagent")

DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_RETRY_DELAY_MS = 60_000
DEFAULT_CONNECT_TIMEOUT = 15.0
DEFAULT_IDLE_TIMEOUT_MS = 600_000  # 10 minutes without a stream event (or without headers)
DEFAULT_DEADLINE_MS = 3_600_000  # one hour for a whole model call, retries included
DEFAULT_MAX_RESPONSE_BYTES = 256 * 1024 * 1024  # inflated bytes of one response
DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024  # one SSE line or event
MAX_REDIRECTS = 5
ERROR_TEXT_CHARS = 2000  # of a provider's error text, after redaction
ERROR_BODY_BYTES = 65_536  # read of an error answer's body
#: The fields of a JSON error object kept beside its message (HttpStatusError.fields); with
#: ``violations``, the fields Google's ``details[].fieldViolations[].field`` names.
ERROR_FIELDS = ("type", "code", "param", "status")
ERROR_FIELD_CHARS = 200
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
BASE_BACKOFF = 0.5
RELEASE_TIMEOUT = 0.05
RELEASE_LIMIT = 65_536
_READ_SIZE = 65_536
_TIMEOUT_SLACK = 0.05  # seconds a body read may outlast its budget (1 % of a budget under 5 s)
_BODY_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False)
"""Request bodies: compact UTF-8 JSON. A NaN or Infinity anywhere (a hand-made transcript) fails
here, never as invalid JSON sent. No circular-reference bookkeeping, a third of the encoding's
time: a body is a tree built from the transcript, and a cycle an ``on_payload`` hook made still
fails here, as a RecursionError."""
HEADERS_MARGIN = 1.0
"""Seconds the whole wait for the headers may exceed the idle budget (or the deadline) before
it is ended: past the per-read timeout that ends a silent server first."""


def describe_error(exc: BaseException, secrets: Iterable[Optional[str]] = ()) -> str:
    """A one-line, secret-free message for a failure while talking to a provider."""
    if isinstance(exc, ProviderError):
        return exc.describe(secrets)
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        text = f"Connection timed out: {exc}"
    elif _is_read_timeout(exc):
        text = "Read timed out: the server stopped sending data"
    elif isinstance(exc, requests.exceptions.ChunkedEncodingError):
        text = f"Connection lost while streaming the response: {_root_cause(exc)}"
    elif isinstance(exc, requests.exceptions.ConnectionError):
        text = f"Connection error: {_root_cause(exc)}"
    else:
        text = str(exc) or type(exc).__name__
    return redact(text, secrets)


def _root_cause(exc: BaseException) -> str:
    """The innermost exception carried in ``args`` or ``reason`` (requests and urllib3 nest them)."""
    seen = 0
    while seen < 10:
        inner = next((a for a in reversed(exc.args) if isinstance(a, BaseException)), None)
        if inner is None and exc.args and isinstance(exc.args[0], tuple):
            inner = next((a for a in reversed(exc.args[0]) if isinstance(a, BaseException)), None)
        reason = getattr(exc, "reason", None)
        if inner is None and isinstance(reason, BaseException):
            inner = reason  # urllib3's MaxRetryError
        if inner is None:
            break
        exc, seen = inner, seen + 1
    return str(exc) or type(exc).__name__


def _is_read_timeout(exc: BaseException) -> bool:
    """A read timeout, including the one requests reports as a ``ConnectionError`` mid-body."""
    if isinstance(exc, (requests.exceptions.ReadTimeout, socket.timeout, urllib3.exceptions.ReadTimeoutError)):
        return True
    return isinstance(exc, requests.exceptions.ConnectionError) and any(
        isinstance(arg, urllib3.exceptions.ReadTimeoutError) for arg in exc.args
    )


# --------------------------------------------------------------------------- bounds


class Limits:
    """The bounds of one model call, from its options (docs/providers.md#limits)."""

    def __init__(self, options: StreamOptions) -> None:
        idle_ms = options.idle_timeout_ms or options.timeout_ms or DEFAULT_IDLE_TIMEOUT_MS
        deadline_ms = options.deadline_ms or DEFAULT_DEADLINE_MS
        self.idle = idle_ms / 1000
        self.total = deadline_ms / 1000
        self.deadline = time.monotonic() + self.total
        self.max_response_bytes = options.max_response_bytes or DEFAULT_MAX_RESPONSE_BYTES
        self.max_event_bytes = options.max_event_bytes or DEFAULT_MAX_EVENT_BYTES

    def left(self) -> float:
        """Seconds left of the whole call; raises once it is spent."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.deadline_error()
        return left

    def deadline_error(self) -> ProviderStreamError:
        return ProviderStreamError(f"The model call exceeded its deadline of {self.total:g} s (deadline_ms)")

    def idle_error(self) -> ProviderStreamError:
        return ProviderStreamError(
            f"Read timed out: the server stopped sending data (no stream event for {self.idle:g} s)"
        )


# --------------------------------------------------------------------------- the response


class HttpStream:
    """A 2xx streaming response. Iterate :meth:`sse` (or read :meth:`body`); :meth:`close` always."""

    def __init__(self, response: requests.Response, signal: Optional[AbortSignal], limits: Limits) -> None:
        self.response = response
        self.status = response.status_code
        self.headers = response.headers
        self.limits = limits
        self._last_event = time.monotonic()
        self._remove_listener: Callable[[], None] = (
            signal.add_listener(lambda: shut(response)) if signal is not None else (lambda: None)
        )
        self._watch = InterruptWatch.start(response)
        self._socket = socket_of(response)  # found now: once the body ended it is back in the pool
        self._chunks: Iterator[bytes] = _body(response, limits, self._read_timeout, self._stop_watch)

    def _stop_watch(self) -> None:
        """End the Ctrl-C watch; also called by the reader as soon as the body ends or fails, so
        that a KeyboardInterrupt landing between that and :meth:`close` cannot leave it running."""
        if self._watch is not None:
            self._watch.stop()
            self._watch = None

    def _read_timeout(self) -> tuple[float, Callable[[], ProviderStreamError]]:
        """How long the next read may wait, and the error if it waits that long."""
        now = time.monotonic()
        idle_left = self._last_event + self.limits.idle - now
        total_left = self.limits.deadline - now
        if idle_left <= total_left:
            return idle_left, self.limits.idle_error
        return total_left, self.limits.deadline_error

    def sse(self) -> Iterator[SseEvent]:
        for event in iter_sse(self._chunks, self.limits.max_event_bytes):
            self._last_event = time.monotonic()
            yield event

    def body(self) -> bytes:
        """The whole body, for an answer that is not streamed; the same bounds apply."""
        return b"".join(self._chunks)

    def discard(self) -> None:
        """Keep the connection out of later requests (a server that broke the exchange may be
        closing it): the pool then opens a new one instead of failing on this one."""
        shut_socket(self._socket)

    def release(self, timeout: float = RELEASE_TIMEOUT, limit: int = RELEASE_LIMIT) -> None:
        """Call at the logical end of the stream (``[DONE]``, ``message_stop``...): read what is
        left of the body, normally just the chunked-encoding terminator already on its way, so
        that :meth:`close` returns the connection to the pool instead of dropping it.

        Gives up after ``timeout`` seconds or ``limit`` bytes; the connection is then closed.
        """
        sock = socket_of(self.response)
        if sock is None:
            return
        deadline = time.monotonic() + timeout
        previous = sock.gettimeout()
        received = 0
        try:
            sock.settimeout(timeout)
            for chunk in read_body(self.response):
                received += len(chunk)
                if received > limit or time.monotonic() > deadline:
                    return
        except Exception:  # a timeout or a broken connection: close() drops the connection
            return
        finally:
            with contextlib.suppress(OSError):
                sock.settimeout(previous)

    def close(self) -> None:
        self._stop_watch()
        self._remove_listener()
        self.response.close()

    def __enter__(self) -> HttpStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _body(
    response: requests.Response,
    limits: Limits,
    read_timeout: Callable[[], tuple[float, Callable[[], ProviderStreamError]]],
    on_end: Callable[[], None] = lambda: None,
) -> Iterator[bytes]:
    """The inflated body as it arrives; raises :class:`ProviderStreamError` past a bound.
    ``on_end`` runs once the body ended, failed or was abandoned."""
    try:
        inflater = Inflater(response.headers.get("content-encoding", ""))
        sock = socket_of(response)
        reads = read_body(response, _READ_SIZE)
        total = 0
        # The socket's timeout is re-set only when it leaves [seconds, seconds + slack]: a read
        # never times out before its budget, at most ``slack`` after, and a fast stream (where
        # every event renews the budget) costs no settimeout() system call per chunk.
        timeout = slack = 0.0
        while True:
            seconds, error = read_timeout()
            if seconds <= 0:
                raise error()
            try:
                if sock is not None and not timeout - slack <= seconds <= timeout:
                    slack = min(_TIMEOUT_SLACK, seconds / 100)
                    timeout = seconds + slack / 2
                    sock.settimeout(timeout)
                data = next(reads)
            except StopIteration:
                return
            except (socket.timeout, urllib3.exceptions.ReadTimeoutError):
                raise error() from None
            except (OSError, ValueError, http.client.HTTPException, urllib3.exceptions.HTTPError) as exc:
                # ValueError: a read on a response an abort or Ctrl-C closed meanwhile
                message = f"Connection lost while streaming the response: {_root_cause(exc)}"
                raise ProviderStreamError(message) from None
            for piece in (data,) if inflater.identity else inflater.feed(data):
                total += len(piece)
                if total > limits.max_response_bytes:
                    raise ProviderStreamError(
                        f"The response is larger than max_response_bytes={limits.max_response_bytes:,} bytes"
                    )
                yield piece
    finally:
        on_end()


def _error_text(response: requests.Response, limits: Limits, secrets: list[str]) -> tuple[str, dict[str, str]]:
    """The provider's error message from a failed response (JSON ``error.message`` or the body),
    at most :data:`ERROR_TEXT_CHARS` characters, and the error object's short text fields
    (:data:`ERROR_FIELDS`), all scrubbed of ``secrets`` before they are cut."""
    data = bytearray()
    complete = True
    try:
        for piece in _body(response, limits, lambda: (min(limits.left(), limits.idle), limits.idle_error)):
            data += piece
            if len(data) >= ERROR_BODY_BYTES:
                complete = False
                break
    except Exception:  # the body itself failed to arrive
        if not data:
            return response.reason or "", {}
        complete = False
    raw = bytes(data[:ERROR_BODY_BYTES]).decode("utf-8", "replace")
    message, fields = _json_error(raw) if complete else (None, {})
    fields = {name: shorten(value, secrets, ERROR_FIELD_CHARS) for name, value in fields.items()}
    if message is not None:
        return shorten(message, secrets, ERROR_TEXT_CHARS), fields
    return shorten(raw.strip(), secrets, ERROR_TEXT_CHARS, complete) or (response.reason or ""), fields


def _json_error(raw: str) -> tuple[Optional[str], dict[str, str]]:
    """``(message, fields)`` of a JSON error body; ``(None, {})`` when it is not one."""
    try:
        body = json.loads(raw)
    except ValueError:
        return None, {}
    if isinstance(body, list) and body:
        body = body[0]
    if not isinstance(body, dict):
        return None, {}
    error = body.get("error", body)
    if isinstance(error, str):
        return error, {}
    message: Optional[str] = None
    fields: dict[str, str] = {}
    if isinstance(error, dict):
        found = error.get("message") or error.get("msg")
        message = str(found) if found else None
        fields = {name: str(error[name]) for name in ERROR_FIELDS if isinstance(error.get(name), (str, int))}
        violations = " ".join(_violated_fields(error.get("details")))
        if violations:
            fields["violations"] = violations
    if message is None and "message" in body:
        message = str(body["message"])
    return message, fields


def _violated_fields(details: Any) -> Iterator[str]:
    """The ``field`` of each ``fieldViolations`` entry of Google's error ``details``."""
    for detail in details if isinstance(details, list) else ():
        violations = detail.get("fieldViolations") if isinstance(detail, dict) else None
        for violation in violations if isinstance(violations, list) else ():
            if isinstance(violation, dict) and isinstance(violation.get("field"), str):
                yield violation["field"]


def _retry_after(response: requests.Response) -> Optional[float]:
    """Seconds the server asks to wait (``retry-after-ms``, ``Retry-After`` seconds or date)."""
    ms = response.headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


def _redirect_target(url: str, response: requests.Response, redirects: int) -> str:
    """Where a same-origin 307/308 leads; any other redirect raises :class:`HttpStatusError`."""
    target, refusal = redirect_target(url, response)
    if refusal is not None:
        raise HttpStatusError(
            response.status_code,
            f"refused {refusal}: piagent follows only same-origin 307/308 redirects, so no credential or body "
            "reaches another host; set the model's base_url to the address you trust",
        )
    if redirects >= MAX_REDIRECTS:
        raise HttpStatusError(response.status_code, f"more than {MAX_REDIRECTS} redirects")
    return target


# --------------------------------------------------------------------------- sending


def _send(
    url: str, headers: dict[str, str], body: Any, timeout: Any, signal: Optional[AbortSignal], limits: Limits
) -> requests.Response:
    """POST on a worker thread, so that the caller can stop waiting for the connection and the
    headers: on an abort, a Ctrl-C (main thread), or once the headers took :data:`HEADERS_MARGIN`
    longer than the idle budget or the call's deadline allow. (``requests``' own timeouts end
    a silent connection first, with their own message; they apply to each read, so without
    this a server dripping header bytes would never time out.) The request is then ended too."""

    def post() -> requests.Response:
        return session().post(url, headers=headers, data=body, stream=True, timeout=timeout, allow_redirects=False)

    box: list[Any] = []
    done = threading.Event()
    tracker = Tracker()
    abandoned = threading.Event()
    idle_left, deadline_left = limits.idle, limits.left()

    def send() -> None:
        try:
            with tracker.sending():
                box.append(post())
        except BaseException as exc:  # handed to the waiting caller
            box.append(exc)
        done.set()
        if abandoned.is_set() and isinstance(box[0], requests.Response):
            box[0].close()  # nobody will read it

    def abandon() -> None:
        abandoned.set()
        done.set()
        tracker.cancel()

    remove = signal.add_listener(abandon) if signal is not None else (lambda: None)
    in_time = True
    try:
        # inside the try: a Ctrl-C can land while a new thread starts; in a copy of this
        # thread's context, so that the request belongs to the caller's trace
        run_in_thread(contextvars.copy_context().run, send)
        in_time = wait(done, min(idle_left, deadline_left) + HEADERS_MARGIN)
        if not in_time:
            abandon()
    except BaseException:  # KeyboardInterrupt while waiting: the request is abandoned, end it
        abandon()
        raise
    finally:
        remove()
    if abandoned.is_set():
        if box and isinstance(box[0], requests.Response):
            box[0].close()
        if in_time:
            raise AbortedRequest()
        if deadline_left < idle_left:
            raise limits.deadline_error()
        raise ProviderStreamError(f"Read timed out: the response headers took over {limits.idle:g} s")
    result = box[0]
    if isinstance(result, BaseException):
        raise result
    return result


def _pause(seconds: float, signal: Optional[AbortSignal]) -> bool:
    """Sleep before a retry; True if aborted meanwhile. Sliced on the main thread (Ctrl-C)."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return bool(signal is not None and signal.aborted)
        step = wait_slice(left)
        if signal is not None:
            if signal.wait(step):
                return True
        else:
            time.sleep(step or 0)


def open_stream(
    url: str,
    headers: dict[str, str],
    payload: Any,
    options: StreamOptions,
    model: Model,
    secrets: Iterable[Optional[str]] = (),
) -> HttpStream:
    """POST ``payload`` as JSON and return the streaming response once it is a 2xx.

    Raises :class:`AbortedRequest`, :class:`HttpStatusError`, :class:`ProviderStreamError` (a
    bound) or a ``requests`` exception; all messages are scrubbed of ``secrets``.
    ``options.on_response({"status", "headers"}, model)`` is called for every response
    received; if it raises, the response is closed and the exception goes on up.
    """
    signal: Optional[AbortSignal] = options.signal
    known: list[str] = [s for s in secrets if s]
    limits = Limits(options)
    body = _BODY_ENCODER.encode(payload).encode("utf-8")
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream", **headers}
    headers["Accept-Encoding"] = ACCEPT_ENCODING
    max_retries = DEFAULT_MAX_RETRIES if options.max_retries is None else max(0, options.max_retries)
    max_delay = (
        DEFAULT_MAX_RETRY_DELAY_MS if options.max_retry_delay_ms is None else options.max_retry_delay_ms
    ) / 1000
    attempt = redirects = 0
    status: Optional[int] = None
    failure: Optional[BaseException] = None
    while True:
        if signal is not None and signal.aborted:
            raise AbortedRequest()
        read_timeout = min(limits.idle, limits.left())
        timeout = (min(DEFAULT_CONNECT_TIMEOUT, read_timeout), read_timeout)
        try:
            response = _send(url, headers, body, timeout, signal, limits)
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            if attempt >= max_retries or isinstance(exc, requests.exceptions.ReadTimeout):
                raise
            status, failure = None, exc
            delay = min(BASE_BACKOFF * 2**attempt, max_delay)
            logger.info("retrying %s after a connection failure (attempt %d)", model.provider, attempt + 1)
        else:
            try:
                if options.on_response is not None:
                    options.on_response({"status": response.status_code, "headers": dict(response.headers)}, model)
                if 200 <= response.status_code < 300:
                    return HttpStream(response, signal, limits)
                if response.is_redirect:
                    url = _redirect_target(url, response, redirects)
                    redirects += 1
                    response.close()
                    continue
                message, fields = _error_text(response, limits, known)
            except BaseException:
                response.close()
                raise
            requested = _retry_after(response)
            response.close()
            if response.status_code not in RETRY_STATUSES or attempt >= max_retries:
                raise HttpStatusError(response.status_code, message, fields)
            if requested is not None and requested > max_delay:
                raise HttpStatusError(
                    response.status_code,
                    f"{message} (the server asked to retry after {requested:g}s, "
                    f"more than max_retry_delay_ms={max_delay * 1000:g})",
                )
            status, failure = response.status_code, None
            backoff = BASE_BACKOFF * 2**attempt * (0.75 + random.random() / 2)
            delay = requested if requested is not None else min(backoff, max_delay)
            logger.info(
                "retrying %s after HTTP %d in %.2fs (attempt %d)",
                model.provider,
                response.status_code,
                delay,
                attempt + 1,
            )
        attempt += 1
        observer = instrumentation.current()  # the seam: piagent/instrumentation.py
        if observer is not None:
            observer.retry(attempt, delay, status, failure)
        if delay >= limits.left():
            raise limits.deadline_error()
        if _pause(delay, signal):
            raise AbortedRequest()
