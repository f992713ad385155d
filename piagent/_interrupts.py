"""Interrupts in one place: Ctrl-C, aborts, and every use of urllib3's and http.client's internals.

Three things need a handle that requests does not give, so this module (and only this one)
reaches inside urllib3 and http.client; ``make test-urllib3`` runs its tests against the
oldest and the newest urllib3 that ``setup.cfg`` allows.

* While a request waits for its response headers, the only handle on it is the urllib3
  connection object. Connections made by :func:`session`'s pools report themselves to the
  :class:`Tracker` of the thread sending the request (:meth:`Tracker.sending`), so an abort
  can shut their socket down and the sending thread returns at once.
* While a body streams, :func:`shut` shuts the response's socket, so a blocked read returns at
  once (an abort, or a Ctrl-C seen by :class:`InterruptWatch`).
* :func:`read_body` reads the body as it arrives, undecoded (one ``read1`` of http.client's
  response at a time, chunked framing removed), so that the caller bounds what it inflates
  and how long it waits for each read.

Ctrl-C: a SIGINT that lands just before a blocking call starts is only seen when the call
returns. The main thread therefore waits in slices of :data:`MAIN_THREAD_WAIT_SLICE`
(:func:`wait`), and while it reads a body :class:`InterruptWatch` shuts the socket on SIGINT.
While an agent runs on the main thread, :func:`ctrl_c_calls` turns Ctrl-C into an abort.
"""

from __future__ import annotations

import _thread
import http.cookiejar
import os
import signal as signals
import socket
import sys
import sysconfig
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, Callable, Optional

import requests
import requests.adapters
import requests.auth
import requests.utils
import urllib3.connection
import urllib3.connectionpool
import urllib3.poolmanager

from .exceptions import AbortedRequest

__all__ = [
    "MAIN_THREAD_WAIT_SLICE",
    "InterruptWatch",
    "Tracker",
    "ctrl_c_calls",
    "on_main_thread",
    "read_body",
    "release_connection",
    "session",
    "shut",
    "shut_socket",
    "socket_of",
    "wait",
    "wait_slice",
]

MAIN_THREAD_WAIT_SLICE = 0.1
"""Seconds: how late the main thread may notice a Ctrl-C while it waits for another thread."""

_session_lock = threading.Lock()
_shared_session: Optional[requests.Session] = None


def on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def wait(event: threading.Event, timeout: Optional[float] = None) -> bool:
    """``event.wait(timeout)``, in slices on the main thread so that Ctrl-C is always seen."""
    if not on_main_thread():
        return event.wait(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while not event.wait(wait_slice(None if deadline is None else max(0.0, deadline - time.monotonic()))):
        if deadline is not None and time.monotonic() >= deadline:
            return False
    return True


def wait_slice(timeout: Optional[float]) -> Optional[float]:
    """The timeout to give one blocking wait: at most :data:`MAIN_THREAD_WAIT_SLICE` on the main thread."""
    if not on_main_thread():
        return timeout
    return MAIN_THREAD_WAIT_SLICE if timeout is None else min(timeout, MAIN_THREAD_WAIT_SLICE)


_sending = threading.local()


class Tracker:
    """The connections used by one request; :meth:`cancel` shuts them down, now and later."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connections: list[Any] = []
        self._cancelled = False

    def register(self, connection: Any) -> None:
        with self._lock:
            if connection not in self._connections:
                self._connections.append(connection)
        self.check(connection)

    def check(self, connection: Any) -> None:
        """Shut ``connection`` and raise if the request was cancelled (closes the cancel/connect race)."""
        if self._cancelled:
            shut_socket(getattr(connection, "sock", None))
            raise AbortedRequest()

    @contextmanager
    def sending(self) -> Iterator[None]:
        """While in this block, connections the calling thread uses report to this tracker."""
        _sending.tracker = self
        try:
            yield
        finally:
            _sending.tracker = None

    def forget(self, connection: Any) -> None:
        """``connection`` goes back to its pool: a later :meth:`cancel` leaves it to its next user."""
        with self._lock:
            if connection in self._connections:
                self._connections.remove(connection)

    def cancel(self) -> None:
        with self._lock:  # (held while shutting: a connection forgotten meanwhile is never shut)
            self._cancelled = True
            for connection in self._connections:
                shut_socket(getattr(connection, "sock", None))


def shut_socket(sock: Any) -> None:
    if isinstance(sock, socket.socket):
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class _Tracked:
    """Mixin for urllib3 connections: report to the sending thread's tracker, if any."""

    def __repr__(self) -> str:  # urllib3 2's form, also under 1.26 (whose errors show the repr)
        return f"{type(self).__name__}(host={getattr(self, 'host', '')!r}, port={getattr(self, 'port', None)!r})"

    def connect(self) -> None:
        tracker: Optional[Tracker] = getattr(_sending, "tracker", None)
        if tracker is not None:
            tracker.register(self)
        super().connect()  # type: ignore[misc]  # a mixin: the next class in the MRO is urllib3's connection
        if tracker is not None:
            tracker.check(self)

    def request(self, *args: Any, **kwargs: Any) -> Any:
        tracker: Optional[Tracker] = getattr(_sending, "tracker", None)
        if tracker is not None:
            tracker.register(self)
        return super().request(*args, **kwargs)  # type: ignore[misc]  # a mixin, as in connect()


class _TrackedHTTPConnection(_Tracked, urllib3.connection.HTTPConnection):
    pass


class _TrackedHTTPSConnection(_Tracked, urllib3.connection.HTTPSConnection):
    pass


# urllib3 names the connection class in its messages ("HTTPConnection(host=...): Failed to
# establish a new connection"); keep the names users know.
_TrackedHTTPConnection.__name__ = _TrackedHTTPConnection.__qualname__ = "HTTPConnection"
_TrackedHTTPSConnection.__name__ = _TrackedHTTPSConnection.__qualname__ = "HTTPSConnection"


class _TrackedHTTPPool(urllib3.connectionpool.HTTPConnectionPool):
    ConnectionCls = _TrackedHTTPConnection


class _TrackedHTTPSPool(urllib3.connectionpool.HTTPSConnectionPool):
    ConnectionCls = _TrackedHTTPSConnection


_TRACKED_POOLS = {"http": _TrackedHTTPPool, "https": _TrackedHTTPSPool}


def _use_tracked_pools(manager: Any) -> Any:
    """Make ``manager`` build tracked pools (left alone if it has its own, e.g. SOCKS)."""
    if manager.pool_classes_by_scheme is urllib3.poolmanager.pool_classes_by_scheme:
        manager.pool_classes_by_scheme = _TRACKED_POOLS
    return manager


class _AbortableAdapter(requests.adapters.HTTPAdapter):
    """An ``HTTPAdapter`` whose connections an abort can shut down (see :class:`Tracker`)."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        _use_tracked_pools(self.poolmanager)

    def proxy_manager_for(self, *args: Any, **kwargs: Any) -> Any:
        return _use_tracked_pools(super().proxy_manager_for(*args, **kwargs))


class _UrlCredentialsOnly(requests.auth.AuthBase):
    """The session's auth: credentials written in the URL apply, as requests applies them;
    ``~/.netrc`` does not. requests, trusting the environment (for its proxies and CA bundle),
    would otherwise send the netrc login for the host in place of the key piagent set."""

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        user, password = requests.utils.get_auth_from_url(request.url or "")
        return requests.auth.HTTPBasicAuth(user, password)(request) if user or password else request


def session() -> requests.Session:
    """The process-wide session: its urllib3 connection pools are thread-safe and keep
    connections alive across calls; nothing else in it (cookies, auth) is used. It keeps no
    cookie: a jar shared by every server would send one server's cookie to another on the
    same host (cookies ignore the port), e.g. from one MCP server to another or to a model.
    It reads no ``~/.netrc`` (:class:`_UrlCredentialsOnly`)."""
    global _shared_session
    with _session_lock:
        if _shared_session is None:
            shared = requests.Session()
            adapter = _AbortableAdapter(pool_connections=16, pool_maxsize=64, max_retries=0)
            shared.mount("http://", adapter)
            shared.mount("https://", adapter)
            shared.trust_env = True  # proxies and CA bundle from the environment
            shared.auth = _UrlCredentialsOnly()  # but no netrc login over the headers piagent sets
            shared.cookies.set_policy(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))  # no domain: none kept
            _shared_session = shared
        return _shared_session


_PIAGENT_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_LIBRARY_DIRS = tuple(
    {os.path.abspath(path) + os.sep for name, path in sysconfig.get_paths().items() if name.endswith(("stdlib", "lib"))}
    | {os.path.abspath(path) + os.sep for path in sys.path if path.endswith(("site-packages", "dist-packages"))}
)  # the standard library's and installed packages' (a distribution's dist-packages too)


def in_user_code(frame: Any) -> bool:
    """Whether the innermost frame of ``frame``'s stack that is not the standard library's or an
    installed package's is the program's own (a listener, a hook, a tool), not piagent's."""
    while frame is not None:
        path = frame.f_code.co_filename
        if path.startswith(_PIAGENT_DIR):
            return False
        if not path.startswith(_LIBRARY_DIRS) and not path.startswith("<frozen"):
            return True
        frame = frame.f_back
    return False


class _CtrlCHandler:
    """The SIGINT handler :func:`ctrl_c_calls` installs (a class: a nested call knows it for its own)."""

    def __init__(self, on_ctrl_c: Callable[[], None]) -> None:
        self.on_ctrl_c = on_ctrl_c

    def __call__(self, number: int, frame: Any) -> None:
        if in_user_code(frame):  # a hook waiting on input(), a listener: interrupted as Python would
            raise KeyboardInterrupt
        self.on_ctrl_c()


@contextmanager
def ctrl_c_calls(on_ctrl_c: Callable[[], None]) -> Iterator[None]:
    """While in this block on the main thread, Ctrl-C calls ``on_ctrl_c()`` (in the signal
    handler: what it raises is raised where the main thread was) instead of raising
    ``KeyboardInterrupt``, unless it lands in the program's own code (:func:`in_user_code`),
    which is interrupted as Python interrupts it. Only over Python's own handler, or a block of this kind around this
    one (an agent prompted from another's listener): a SIGINT handler of the program's own is
    left alone. The handler found is installed again at the end, unless somebody installed
    theirs over this one meanwhile."""
    handler = _CtrlCHandler(on_ctrl_c)
    previous: Any = None
    if on_main_thread():
        current = signals.getsignal(signals.SIGINT)
        if current is signals.default_int_handler or isinstance(current, _CtrlCHandler):
            previous = signals.signal(signals.SIGINT, handler)
    try:
        yield
    finally:
        if previous is not None and signals.getsignal(signals.SIGINT) is handler:
            signals.signal(signals.SIGINT, previous)


# --------------------------------------------------------------------------- a streaming body


def _http_client_response(response: requests.Response) -> Any:
    """The ``http.client.HTTPResponse`` under a requests response (urllib3 1.26 and 2.x: ``raw._fp``)."""
    return getattr(getattr(response, "raw", None), "_fp", None)


def socket_of(response: requests.Response) -> Optional[socket.socket]:
    """The socket under a streaming response, found through urllib3 and http.client."""
    fp = _http_client_response(response)
    reader = getattr(fp, "fp", None)  # BufferedReader over SocketIO
    sock = getattr(getattr(reader, "raw", None), "_sock", None)
    if sock is None:
        sock = getattr(getattr(response.raw, "_connection", None), "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def shut(response: requests.Response) -> None:
    """Make any blocked read on ``response`` return now, from any thread."""
    shut_socket(socket_of(response))
    with suppress(Exception):  # closing a half-read response from another thread may complain
        response.close()


def read_body(response: requests.Response, size: int = 65_536) -> Iterator[bytes]:
    """The body's bytes as they arrive, still content-encoded, at most ``size`` per piece.

    Each piece is one ``read1`` of http.client's response (chunked framing removed), so a body
    with or without chunked framing streams alike, and nothing is inflated here. At the end
    of the body the connection goes back to its pool (not after a body of known length that ended short).
    """
    fp = _http_client_response(response)
    if fp is None or not hasattr(fp, "read1"):  # not http.client underneath: urllib3's own reads
        yield from response.raw.stream(size, decode_content=False)
        return
    while True:
        data = fp.read1(size)
        if not data:
            break
        yield data
    if fp.length:  # a body of known length that ended short (a read that must not wait found nothing
        return  # yet, or the peer closed): the rest may still come, so its connection is never reused
    fp.read()  # http.client marks a body of known length complete only on a read without a size
    release_connection(response)


def release_connection(response: requests.Response) -> None:
    """Give a fully read response's connection back to its pool (a half-read one is left alone),
    its socket's timeout put back to urllib3's own: a read may have set another (a deadline's
    remainder, 0 for a read that must not wait), and urllib3 1.26 sends the next request on the
    connection with whatever the socket has."""
    fp = _http_client_response(response)
    if fp is None or fp.isclosed():
        connection = getattr(response.raw, "_connection", None)
        tracker: Optional[Tracker] = getattr(_sending, "tracker", None)
        if tracker is not None and connection is not None:
            tracker.forget(connection)  # its request's cancel must not shut it under the next request
        sock = getattr(connection, "sock", None)
        if isinstance(sock, socket.socket):
            timeout = getattr(connection, "timeout", None)
            with suppress(OSError):
                sock.settimeout(
                    timeout if timeout is None or isinstance(timeout, (int, float)) else socket.getdefaulttimeout()
                )
        with suppress(Exception):
            response.raw.release_conn()


# --------------------------------------------------------------------------- Ctrl-C while a body streams


class _Watcher:
    """The process's one wakeup pipe and the thread that reads it, made on first use and kept:
    starting a watch then costs no thread hand-off and no pipe (a model call is one watch).

    Every response the main thread has open is watched, not only the latest: it may read several
    streams in turn (two pull-mode streams, a stream opened inside another's listener)."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        os.set_blocking(self.write_end, False)
        self.lock = threading.Lock()
        self.responses: tuple[requests.Response, ...] = ()  # the bodies the main thread has open
        self.forward = -1  # the wakeup fd ours replaced: every byte goes on to it
        self.running = False
        self.start()

    def start(self) -> None:
        """Start the thread, without waiting for it to run (that would be the first stream's time):
        a signal meanwhile waits in the pipe."""
        _thread.start_new_thread(self._run, ())
        self.running = True

    def _run(self) -> None:
        while True:
            data = os.read(self.read_end, 512)
            with self.lock:
                responses, forward = self.responses, self.forward
            if forward >= 0:
                with suppress(OSError):
                    os.write(forward, data)
            if _SIGINT in data:
                for response in responses:
                    shut(response)

    def after_fork_in_child(self) -> None:
        """In a child of ``os.fork()``: the parent's pipe, shared, and no thread. The child gets a
        pipe of its own under the same fd numbers (ours may be its installed wakeup fd), so its
        signals never reach the parent's watcher, a new lock (the parent's thread may have held
        it), no watched response (those sockets are the parent's: shutting one would cut the
        parent's stream) and a thread of its own: now if a watch was open (ours is then the
        installed wakeup fd: its bytes must go on to the one it replaced), else with the next one."""
        watching = bool(self.responses)
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)
        os.dup2(read_end, self.read_end, inheritable=False)
        os.dup2(write_end, self.write_end, inheritable=False)
        os.close(read_end)
        os.close(write_end)
        self.lock = threading.Lock()
        self.responses = ()
        self.running = False
        if watching:
            self.start()


_watcher_lock = threading.Lock()
_watcher: Optional[_Watcher] = None


def _shared_watcher() -> _Watcher:
    global _watcher
    with _watcher_lock:
        if _watcher is None:
            _watcher = _Watcher()
        elif not _watcher.running:  # a child of os.fork(): see _Watcher.after_fork_in_child
            _watcher.start()
        return _watcher


def _after_fork_in_child() -> None:
    global _watcher_lock
    _watcher_lock = threading.Lock()
    if _watcher is not None:
        _watcher.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class InterruptWatch:
    """While the main thread reads a body: a Ctrl-C shuts the response, so no read stays blocked.

    A SIGINT that lands just before a blocking read starts is only handled when the read
    returns, which for a stalled server means the read timeout. Python writes the number of
    every signal it receives to the wakeup fd, so a watcher thread reading that pipe sees the
    SIGINT at once and shuts the socket; the main thread's read returns straight into the
    ``KeyboardInterrupt``. The reads themselves stay on the main thread (no hand-off per
    chunk). A previous wakeup fd (an asyncio loop's) gets every byte forwarded and is restored.
    The pipe and its thread are the process's, made once (:class:`_Watcher`); a watch adds its
    response to those they shut.
    """

    def __init__(self, response: requests.Response) -> None:
        self._response = response
        self._watcher = watcher = _shared_watcher()
        previous = signals.set_wakeup_fd(watcher.write_end)  # ValueError: not the main thread
        with watcher.lock:
            watcher.responses += (response,)
            if previous != watcher.write_end:  # (another watch open: ours already)
                watcher.forward = previous

    @classmethod
    def start(cls, response: requests.Response) -> Optional[InterruptWatch]:
        """A watch for ``response`` when on the main thread (where Ctrl-C lands), else None."""
        if not on_main_thread():
            return None
        try:
            return cls(response)
        except (ValueError, OSError):
            return None

    def stop(self) -> None:
        """The response is no longer watched; the last watch open puts the previous wakeup fd back.

        When somebody installed their wakeup fd over ours meanwhile, theirs stays installed
        (whoever installed it may restore ours): bytes still reaching our pipe are forwarded as
        before. Off the main thread (a stream finalised elsewhere) ours stays installed.
        """
        watcher = self._watcher
        with watcher.lock:
            watcher.responses = tuple(r for r in watcher.responses if r is not self._response)
            if watcher.responses:
                return
            forward = watcher.forward
        try:
            current = signals.set_wakeup_fd(forward)
        except ValueError:  # not the main thread
            return
        if current != watcher.write_end:
            signals.set_wakeup_fd(current)  # somebody installed theirs over ours: keep theirs


_SIGINT = bytes([signals.SIGINT])
