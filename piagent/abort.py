"""Cooperative cancellation: :class:`AbortController` and the :class:`AbortSignal` it hands out.

A signal is a flag with a reason, listeners and ``wait()``. ``abort()`` is idempotent and
thread-safe; listeners run once, synchronously, on the aborting thread (a listener that raises
is logged and skipped). Nothing is ever killed: work that receives the signal decides how to stop.
The ``threading.Event`` that ``wait()`` blocks on is made by the first ``wait()``: a run makes a
signal per tool call, and few are ever waited on (docs/architecture.md#memory).
"""

from __future__ import annotations

import _thread
import contextlib
import logging
import threading
from typing import Any, Callable, Optional

from .exceptions import PiAgentError

__all__ = ["AbortController", "AbortSignal", "AbortedError"]

logger = logging.getLogger("piagent")


class AbortedError(PiAgentError):
    """Raised by :meth:`AbortSignal.throw_if_aborted`; its message is the abort reason."""


class AbortSignal:
    """Read side of an abort: ``aborted``, ``reason``, ``wait()``, listeners."""

    __slots__ = ("_aborted", "_event", "_lock", "_listeners", "_reason")

    def __init__(self) -> None:
        self._aborted = False
        self._event: Optional[threading.Event] = None  # made by the first wait() before the abort
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], Any]] = []
        self._reason: object = None

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> Any:
        return self._reason

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Block until aborted or ``timeout`` seconds passed; True if aborted."""
        if self._aborted:
            return True
        made = self._event or threading.Event()  # made outside the lock (a SIGINT handler may abort meanwhile)
        with self._lock:  # the abort sets the Event it finds under this lock: installed here, it is found
            if self._aborted:
                return True
            if self._event is None:
                self._event = made
            event = self._event
        return event.wait(timeout)

    def throw_if_aborted(self) -> None:
        if self._aborted:
            reason = self._reason
            raise reason if isinstance(reason, BaseException) else AbortedError(reason or "Operation aborted")

    def add_listener(self, listener: Callable[[], Any]) -> Callable[[], None]:
        """Call ``listener()`` once on abort (at once if already aborted); returns a remover."""
        with self._lock:
            if not self._aborted:
                self._listeners.append(listener)
                return lambda: self._remove(listener)
        _call_listener(listener)
        return lambda: None

    def _remove(self, listener: Callable[[], Any]) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def _abort(self, reason: object) -> None:
        with self._lock:
            if self._aborted:
                return
            self._reason = reason
            self._aborted = True
        self._wake()

    def _abort_from_signal_handler(self, reason: object) -> None:
        """Abort from a signal handler, which may have interrupted this very thread while it held
        the signal's lock or ran a listener's own (a response's pool): the flag is set at once,
        without the lock, and the Event and the listeners follow on a thread of their own."""
        if self._aborted:
            return
        self._reason = reason
        self._aborted = True  # after the reason: whoever sees the flag sees the reason
        _thread.start_new_thread(self._wake, ())  # the low-level call: threading's own locks may be held too

    def _wake(self) -> None:
        """After the flag is set: set the Event and call the listeners (each once: they are taken under the lock)."""
        with self._lock:
            if self._event is not None:
                self._event.set()
            listeners, self._listeners = self._listeners, []
        for listener in listeners:
            _call_listener(listener)

    def __repr__(self) -> str:
        return f"<AbortSignal aborted={self.aborted}>"


def _call_listener(listener: Callable[[], Any]) -> None:
    try:
        listener()
    except Exception:  # a listener must not break the abort of the others
        logger.exception("abort listener raised")


class AbortController:
    """Owns an :class:`AbortSignal`; ``abort(reason)`` sets it once, from any thread."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: object = None) -> None:
        self.signal._abort(reason)

    def abort_from_signal_handler(self, reason: object = None) -> None:
        """:meth:`abort` for a signal handler: the signal is aborted when this returns; its
        listeners (and the wake-up of :meth:`AbortSignal.wait`) run on a new thread, since the
        interrupted code may hold a lock they need."""
        self.signal._abort_from_signal_handler(reason)
