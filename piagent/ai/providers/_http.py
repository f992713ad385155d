"""HTTP for providers: one streaming POST with retries, timeouts and immediate abort.

:func:`open_stream` sends the request and returns an :class:`HttpStream` once response
headers with a 2xx status arrived. Before that:

* 429, 408 and 5xx answers and connection failures are retried up to ``max_retries`` times
  with exponential backoff (0.5 s, 1 s, 2 s... capped by ``max_retry_delay_ms``); a
  ``Retry-After`` the server asks for is honoured, and if it exceeds ``max_retry_delay_ms``
  the request fails at once instead of waiting;
* any other status raises :class:`HttpStatusError` carrying the provider's own error text.

Abort works at every moment: while connecting or waiting for headers (the request runs on a
short-lived thread so the caller can stop waiting), between retries, and while the body
streams (the socket is shut down, so a blocked read returns at once). Secrets given to
:func:`open_stream` are scrubbed from every error message.
"""

from __future__ import annotations

import email.utils
import json
import logging
import random
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional

import requests
import requests.adapters

from ...abort import AbortSignal
from ..types import Model, StreamOptions
from ._sse import SseEvent, iter_sse

__all__ = ["AbortedRequest", "HttpStatusError", "HttpStream", "open_stream", "redact", "describe_error"]

logger = logging.getLogger("piagent")

DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_RETRY_DELAY_MS = 60_000
DEFAULT_CONNECT_TIMEOUT = 15.0
DEFAULT_READ_TIMEOUT = 600.0
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
BASE_BACKOFF = 0.5

_session_lock = threading.Lock()
_shared_session: Optional[requests.Session] = None


class AbortedRequest(Exception):
    """The request was aborted through its signal."""

    def __init__(self) -> None:
        super().__init__("Request was aborted")


class HttpStatusError(Exception):
    """A non-2xx answer; ``message`` is the provider's error text, scrubbed of secrets."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if message else f"HTTP {status}")
        self.status = status
        self.message = message


def redact(text: str, secrets: Iterable[Optional[str]]) -> str:
    """``text`` with every secret (of 4+ characters) replaced by ``[REDACTED]``."""
    for secret in secrets:
        if secret and len(secret) >= 4 and secret in text:
            text = text.replace(secret, "[REDACTED]")
    return text


def _root_cause(exc: BaseException) -> str:
    """The innermost exception carried in ``args`` (requests and urllib3 nest them as tuples)."""
    seen = 0
    while seen < 10:
        inner = next((a for a in reversed(exc.args) if isinstance(a, BaseException)), None)
        if inner is None and exc.args and isinstance(exc.args[0], tuple):
            inner = next((a for a in reversed(exc.args[0]) if isinstance(a, BaseException)), None)
        if inner is None:
            break
        exc, seen = inner, seen + 1
    return str(exc) or type(exc).__name__


def describe_error(exc: BaseException, secrets: Iterable[Optional[str]] = ()) -> str:
    """A one-line, secret-free message for a failure while talking to a provider."""
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        text = f"Connection timed out: {exc}"
    elif isinstance(exc, requests.exceptions.ReadTimeout) or isinstance(exc, socket.timeout):
        text = "Read timed out: the server stopped sending data"
    elif isinstance(exc, requests.exceptions.ChunkedEncodingError):
        text = f"Connection lost while streaming the response: {_root_cause(exc)}"
    elif isinstance(exc, requests.exceptions.ConnectionError):
        text = f"Connection error: {exc}"
    else:
        text = str(exc) or type(exc).__name__
    return redact(text, secrets)


def _session() -> requests.Session:
    """The process-wide session: its urllib3 connection pools are thread-safe and keep
    connections alive across calls; nothing else in it (cookies, auth) is used."""
    global _shared_session
    with _session_lock:
        if _shared_session is None:
            session = requests.Session()
            adapter = requests.adapters.HTTPAdapter(pool_connections=16, pool_maxsize=64, max_retries=0)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            session.trust_env = True
            _shared_session = session
        return _shared_session


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
    sock = _socket_of(response)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    try:
        response.close()
    except Exception:  # closing a half-read response from another thread may complain
        pass


class HttpStream:
    """A 2xx streaming response. Iterate :meth:`sse` or :meth:`chunks`; :meth:`close` always."""

    def __init__(self, response: requests.Response, signal: Optional[AbortSignal]) -> None:
        self.response = response
        self.status = response.status_code
        self.headers = response.headers
        self._remove_listener: Callable[[], None] = (
            signal.add_listener(lambda: _shut(response)) if signal is not None else (lambda: None)
        )

    def chunks(self) -> Iterator[bytes]:
        return self.response.iter_content(chunk_size=None)

    def sse(self) -> Iterator[SseEvent]:
        return iter_sse(self.chunks())

    def close(self) -> None:
        self._remove_listener()
        self.response.close()

    def __enter__(self) -> "HttpStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _send(
    url: str, headers: Dict[str, str], body: Any, timeout: Any, signal: Optional[AbortSignal]
) -> requests.Response:
    """POST on a helper thread so that an abort stops the wait for the connection and headers."""
    if signal is None:
        return _session().post(url, headers=headers, data=body, stream=True, timeout=timeout)
    box: List[Any] = []
    done = threading.Event()

    def send() -> None:
        try:
            box.append(_session().post(url, headers=headers, data=body, stream=True, timeout=timeout))
        except BaseException as exc:  # handed to the waiting caller
            box.append(exc)
        done.set()
        if signal.aborted and box and isinstance(box[0], requests.Response):
            box[0].close()  # nobody will read it

    threading.Thread(target=send, name="piagent-http", daemon=True).start()
    remove = signal.add_listener(done.set)
    try:
        done.wait()
    finally:
        remove()
    if signal.aborted:
        if box and isinstance(box[0], requests.Response):
            box[0].close()
        raise AbortedRequest()
    result = box[0]
    if isinstance(result, BaseException):
        raise result
    return result  # type: ignore[no-any-return]


def open_stream(
    url: str,
    headers: Dict[str, str],
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
    while True:
        if signal is not None and signal.aborted:
            raise AbortedRequest()
        try:
            response = _send(url, headers, body, timeout, signal)
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as exc:
            if attempt >= max_retries or isinstance(exc, requests.exceptions.ReadTimeout):
                raise
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
            backoff = BASE_BACKOFF * 2**attempt * (0.75 + random.random() / 2)
            delay = requested if requested is not None else min(backoff, max_delay)
            logger.info(
                "retrying %s after HTTP %d in %.2fs (attempt %d)", model.provider, response.status_code, delay, attempt + 1
            )
        attempt += 1
        if signal is not None:
            if signal.wait(delay):
                raise AbortedRequest()
        else:
            time.sleep(delay)
