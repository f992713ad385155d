"""Connections an abort can shut down, and the process-wide session that makes them.

While a request waits for its response headers, the only handle on it is the urllib3
connection object, deep inside requests. Connections made by :func:`session`'s pools report
themselves to the :class:`Tracker` of the thread sending the request (:meth:`Tracker.sending`),
so an abort can shut their socket down and the sending thread returns at once instead of
waiting for the server.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any, Optional

import requests
import requests.adapters
import urllib3.connection
import urllib3.connectionpool
import urllib3.poolmanager

__all__ = ["AbortedRequest", "Tracker", "session", "shut_socket"]

_session_lock = threading.Lock()
_shared_session: Optional[requests.Session] = None


class AbortedRequest(Exception):
    """The request was aborted through its signal."""

    def __init__(self) -> None:
        super().__init__("Request was aborted")


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

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            connections = list(self._connections)
        for connection in connections:
            shut_socket(getattr(connection, "sock", None))


def shut_socket(sock: Any) -> None:
    if isinstance(sock, socket.socket):
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class _Tracked:
    """Mixin for urllib3 connections: report to the sending thread's tracker, if any."""

    def connect(self) -> None:
        tracker: Optional[Tracker] = getattr(_sending, "tracker", None)
        if tracker is not None:
            tracker.register(self)
        super().connect()  # type: ignore[misc]
        if tracker is not None:
            tracker.check(self)

    def request(self, *args: Any, **kwargs: Any) -> Any:
        tracker: Optional[Tracker] = getattr(_sending, "tracker", None)
        if tracker is not None:
            tracker.register(self)
        return super().request(*args, **kwargs)  # type: ignore[misc]


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


def session() -> requests.Session:
    """The process-wide session: its urllib3 connection pools are thread-safe and keep
    connections alive across calls; nothing else in it (cookies, auth) is used."""
    global _shared_session
    with _session_lock:
        if _shared_session is None:
            shared = requests.Session()
            adapter = _AbortableAdapter(pool_connections=16, pool_maxsize=64, max_retries=0)
            shared.mount("http://", adapter)
            shared.mount("https://", adapter)
            shared.trust_env = True
            _shared_session = shared
        return _shared_session
