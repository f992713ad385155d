"""HTTP for providers: one streaming POST with retries, timeouts and immediate abort.

:func:`open_stream` sends the request and returns an :class:`HttpStream` once response
headers with a 2xx status arrived. Before that:

* 408, 429, 500, 502, 503, 504 and 529 (Anthropic's "overloaded") answers and connection
  failures are retried up to ``max_retries`` times with exponential backoff (0.5 s, 1 s, 2 s...,
  a status retry jittered by +-25 %, capped by ``max_retry_delay_ms``); a ``Retry-After`` the
  server asks for is honoured, and if it exceeds ``max_retry_delay_ms`` the request fails at
  once instead of waiting;
* any other status raises :class:`HttpStatusError` carrying the provider's own error text.

Abort works at every moment: while connecting or waiting for headers (the request runs on a
short-lived thread so the caller can stop waiting, and the connection it uses is shut down so
that thread ends too: see :mod:`._connections`), between retries, and while the body streams
(the socket is shut down, so a blocked read returns at once). Secrets given to
:func:`open_stream` are scrubbed from every error message.

Ctrl-C: a SIGINT that lands just before a blocking socket call starts is only seen when the
call returns, which for a stalled server means the read timeout. On the main thread the
connect phase therefore runs on a worker while the main thread waits in short slices, and
while the body streams a watcher shuts the socket on SIGINT (:class:`_InterruptWatch`).
"""

from __future__ import annotations

import contextlib
import contextvars
import email.utils
import json
import logging
import os
import random
import signal as signals
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any, Callable, Optional

import requests
import urllib3.exceptions

from ... import instrumentation
from ..._threads import run_in_thread
from ...abort import AbortSignal
from ..types import Model, StreamOptions
from ._connections import AbortedRequest, Tracker, session, shut_socket
from ._sse import SseEvent, iter_sse

__all__ = ["AbortedRequest", "HttpStatusError", "HttpStream", "open_stream", "redact", "describe_error"]

logger = logging.getLogger("piagent")

DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_RETRY_DELAY_MS = 60_000
DEFAULT_CONNECT_TIMEOUT = 15.0
DEFAULT_READ_TIMEOUT = 600.0
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
BASE_BACKOFF = 0.5
RELEASE_TIMEOUT = 0.05
RELEASE_LIMIT = 65_536
MAIN_THREAD_WAIT_SLICE = 0.1  # seconds: how late the main thread may notice a Ctrl-C


class HttpStatusError(Exception):
    """A non-2xx answer; ``message`` is the provider's error text, scrubbed of secrets."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if message else f"HTTP {status}")
        self.status = status
        self.message = message


def redact(text: str, secrets: Iterable[Optional[str]]) -> str:
    """``text`` with every secret (of 4+ characters) replaced by ``[REDACTED]``.

    A secret is also found without its surrounding whitespace: a key read from a file with
    its newline shows up in error texts as ``'sk-...\\n'``. Longer secrets go first, so that
    ``Bearer <key>`` and ``<key>`` both disappear.
    """
    forms = {form for secret in secrets if secret for form in (secret, secret.strip()) if len(form) >= 4}
    for form in sorted(forms, key=len, reverse=True):
        if form in text:
            text = text.replace(form, "[REDACTED]")
    return text


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


def describe_error(exc: BaseException, secrets: Iterable[Optional[str]] = ()) -> str:
    """A one-line, secret-free message for a failure while talking to a provider."""
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


def _error_text(response: requests.Response) -> str:
    """The provider's error message from a failed response (JSON ``error.message`` or the body)."""
    try:
        raw = response.content[:20_000].decode("utf-8", "replace")
    except Exception:  # the body itself failed to arrive
        return response.reason or ""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw.strip()[:2000] or (response.reason or "")
    if isinstance(body, list) and body:
        body = body[0]
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            message = error.get("message") or error.get("msg")
            if message:
                return str(message)
        elif isinstance(error, str):
            return error
        if "message" in body:
            return str(body["message"])
    return raw.strip()[:2000]


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


def _socket_of(response: requests.Response) -> Optional[socket.socket]:
    """The socket under a streaming response, found through urllib3 and http.client."""
    raw = getattr(response, "raw", None)
    fp = getattr(raw, "_fp", None)  # http.client.HTTPResponse
    reader = getattr(fp, "fp", None)  # BufferedReader over SocketIO
    sock = getattr(getattr(reader, "raw", None), "_sock", None)
    if sock is None:
        sock = getattr(getattr(raw, "_connection", None), "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def _shut(response: requests.Response) -> None:
    """Make any blocked read on ``response`` return now, from any thread."""
    shut_socket(_socket_of(response))
    with contextlib.suppress(Exception):  # closing a half-read response from another thread may complain
        response.close()


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _wait(event: threading.Event) -> None:
    """``event.wait()``, in slices on the main thread so that Ctrl-C is always seen."""
    if _on_main_thread():
        while not event.wait(MAIN_THREAD_WAIT_SLICE):
            pass
    else:
        event.wait()


class _InterruptWatch:
    """While the main thread reads a body: a Ctrl-C shuts the response, so no read stays blocked.

    A SIGINT that lands just before a blocking read starts is only handled when the read
    returns, which for a stalled server means the read timeout. Python writes the number of
    every signal it receives to the wakeup fd, so a watcher thread reading that pipe sees the
    SIGINT at once and shuts the socket; the main thread's read returns straight into the
    ``KeyboardInterrupt``. The reads themselves stay on the main thread (no hand-off per
    chunk). A previous wakeup fd (an asyncio loop's) gets every byte forwarded and is restored.
    """

    def __init__(self, response: requests.Response) -> None:
        self._response = response
        self._read_end, self._write_end = os.pipe()
        try:
            os.set_blocking(self._write_end, False)
            self._previous = signals.set_wakeup_fd(self._write_end)
        except (ValueError, OSError):  # not the main interpreter's main thread, or no support
            os.close(self._read_end)
            os.close(self._write_end)
            raise
        run_in_thread(self._watch)

    @classmethod
    def start(cls, response: requests.Response) -> Optional[_InterruptWatch]:
        """A watch for ``response`` when on the main thread (where Ctrl-C lands), else None."""
        if not _on_main_thread():
            return None
        try:
            return cls(response)
        except (ValueError, OSError):
            return None

    def _watch(self) -> None:
        try:
            while True:
                data = os.read(self._read_end, 512)
                if not data:
                    return  # stop() closed the write end
                if self._previous >= 0:
                    with contextlib.suppress(OSError):
                        os.write(self._previous, data)
                if _SIGINT in data:
                    _shut(self._response)
        finally:
            os.close(self._read_end)

    def stop(self) -> None:
        """Restore the previous wakeup fd and let the watcher exit.

        Our pipe is closed only when it was still the installed wakeup fd and this is the main
        thread: otherwise Python (or whoever installed theirs over ours and may restore it) could
        still write to it, and a closed fd number can be reused by an unrelated file. Then the
        watch simply stays, forwarding every byte as before.
        """
        try:
            current = signals.set_wakeup_fd(self._previous)
        except ValueError:  # not the main thread (a stream finalised elsewhere): leave it installed
            return
        if current != self._write_end:
            signals.set_wakeup_fd(current)  # somebody installed theirs over ours: keep theirs
            return
        os.close(self._write_end)  # the watcher reads the end of the pipe and exits


_SIGINT = bytes([signals.SIGINT])


class HttpStream:
    """A 2xx streaming response. Iterate :meth:`sse`; :meth:`close` always."""

    def __init__(self, response: requests.Response, signal: Optional[AbortSignal]) -> None:
        self.response = response
        self.status = response.status_code
        self.headers = response.headers
        self._remove_listener: Callable[[], None] = (
            signal.add_listener(lambda: _shut(response)) if signal is not None else (lambda: None)
        )
        self._chunks: Iterator[bytes] = response.iter_content(chunk_size=None)
        self._watch = _InterruptWatch.start(response)

    def sse(self) -> Iterator[SseEvent]:
        return iter_sse(self._chunks)

    def release(self, timeout: float = RELEASE_TIMEOUT, limit: int = RELEASE_LIMIT) -> None:
        """Call at the logical end of the stream (``[DONE]``, ``message_stop``...): read what is
        left of the body, normally just the chunked-encoding terminator already on its way, so
        that :meth:`close` returns the connection to the pool instead of dropping it.

        Gives up after ``timeout`` seconds or ``limit`` bytes; the connection is then closed.
        """
        sock = _socket_of(self.response)
        if sock is None:
            return
        deadline = time.monotonic() + timeout
        previous = sock.gettimeout()
        received = 0
        try:
            sock.settimeout(timeout)
            for chunk in self._chunks:
                received += len(chunk)
                if received > limit or time.monotonic() > deadline:
                    return
        except Exception:  # a timeout or a broken connection: close() drops the connection
            return
        finally:
            with contextlib.suppress(OSError):
                sock.settimeout(previous)

    def close(self) -> None:
        self._remove_listener()
        if self._watch is not None:
            self._watch.stop()
            self._watch = None
        self.response.close()

    def __enter__(self) -> HttpStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _send(
    url: str, headers: dict[str, str], body: Any, timeout: Any, signal: Optional[AbortSignal]
) -> requests.Response:
    """POST, on a worker thread when an abort (or, on the main thread, a Ctrl-C) may have to
    stop the wait for the connection and the headers; the request is then ended too."""
    if signal is None and not _on_main_thread():
        return session().post(url, headers=headers, data=body, stream=True, timeout=timeout)
    box: list[Any] = []
    done = threading.Event()
    tracker = Tracker()
    abandoned = threading.Event()

    def send() -> None:
        try:
            with tracker.sending():
                box.append(session().post(url, headers=headers, data=body, stream=True, timeout=timeout))
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
    try:
        # inside the try: a Ctrl-C can land while a new thread starts; in a copy of this
        # thread's context, so that the request belongs to the caller's trace
        run_in_thread(contextvars.copy_context().run, send)
        _wait(done)
    except BaseException:  # KeyboardInterrupt while waiting: the request is abandoned, end it
        abandon()
        raise
    finally:
        remove()
    if abandoned.is_set():
        if box and isinstance(box[0], requests.Response):
            box[0].close()
        raise AbortedRequest()
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
        step = min(left, MAIN_THREAD_WAIT_SLICE) if _on_main_thread() else left
        if signal is not None:
            if signal.wait(step):
                return True
        else:
            time.sleep(step)


def open_stream(
    url: str,
    headers: dict[str, str],
    payload: Any,
    options: StreamOptions,
    model: Model,
    secrets: Iterable[Optional[str]] = (),
) -> HttpStream:
    """POST ``payload`` as JSON and return the streaming response once it is a 2xx.

    Raises :class:`AbortedRequest`, :class:`HttpStatusError` or a ``requests`` exception; all
    messages are scrubbed of ``secrets``. ``options.on_response({"status", "headers"}, model)``
    is called for every response received.
    """
    signal: Optional[AbortSignal] = options.signal
    secrets = [s for s in secrets if s]
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream", **headers}
    read_timeout = options.timeout_ms / 1000 if options.timeout_ms else DEFAULT_READ_TIMEOUT
    timeout = (min(DEFAULT_CONNECT_TIMEOUT, read_timeout), read_timeout)
    max_retries = DEFAULT_MAX_RETRIES if options.max_retries is None else max(0, options.max_retries)
    max_delay = (
        DEFAULT_MAX_RETRY_DELAY_MS if options.max_retry_delay_ms is None else options.max_retry_delay_ms
    ) / 1000
    attempt = 0
    status: Optional[int] = None
    failure: Optional[BaseException] = None
    while True:
        if signal is not None and signal.aborted:
            raise AbortedRequest()
        try:
            response = _send(url, headers, body, timeout, signal)
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            if attempt >= max_retries or isinstance(exc, requests.exceptions.ReadTimeout):
                raise
            status, failure = None, exc
            delay = min(BASE_BACKOFF * 2**attempt, max_delay)
            logger.info("retrying %s after a connection failure (attempt %d)", model.provider, attempt + 1)
        else:
            if options.on_response is not None:
                options.on_response({"status": response.status_code, "headers": dict(response.headers)}, model)
            if 200 <= response.status_code < 300:
                return HttpStream(response, signal)
            message = redact(_error_text(response), secrets)
            requested = _retry_after(response)
            response.close()
            if response.status_code not in RETRY_STATUSES or attempt >= max_retries:
                raise HttpStatusError(response.status_code, message)
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
        if _pause(delay, signal):
            raise AbortedRequest()
