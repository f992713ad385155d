"""Reusable daemon threads for jobs that must never wait for one another.

:func:`run_in_thread` runs a job on an idle thread if there is one, else on a new thread.
Unlike a capped pool, a job never queues behind another (an HTTP request waiting for its
headers or a tool call may block for minutes); unlike a thread per job, a steady stream of
short jobs (one request and one tool batch per turn) does not pay for a thread start each
time. Threads idle for :data:`IDLE_SECONDS` exit. After ``os.fork()`` the child starts with
no threads, as it should.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
from typing import Any, Callable

__all__ = ["IDLE_SECONDS", "idle_threads", "run_in_thread"]

logger = logging.getLogger("piagent")

IDLE_SECONDS = 30.0

Job = tuple[Callable[..., Any], tuple[Any, ...]]


class _CachedThreads:
    def __init__(self, name: str, idle_seconds: float = IDLE_SECONDS) -> None:
        self._name = name
        self._idle_seconds = idle_seconds
        self._numbers = itertools.count()
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[Job] = queue.SimpleQueue()
        self._idle = 0  # threads waiting for a job and not yet promised one
        self._waiting: set[threading.Thread] = set()  # threads between two jobs

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1
                self._jobs.put((fn, args))
                return
        name = f"{self._name}-{next(self._numbers)}"
        # the job is handed over in a list the thread empties: a Thread keeps its args until
        # it ends, and with them whatever the first job held (a response, a tool's result)
        threading.Thread(target=self._work, args=([(fn, args)],), name=name, daemon=True).start()

    def _work(self, first: list[Job]) -> None:
        me = threading.current_thread()
        job = first.pop()
        while True:
            fn, args = job
            try:
                fn(*args)
            except BaseException:  # jobs report their own errors; this is a last resort
                logger.exception("unhandled error in a piagent worker thread")
            del fn, args, job
            with self._lock:
                self._idle += 1
                self._waiting.add(me)
            try:
                job = self._jobs.get(timeout=self._idle_seconds)
                with self._lock:
                    self._waiting.discard(me)
                continue
            except queue.Empty:
                pass
            with self._lock:
                self._waiting.discard(me)
                try:
                    job = self._jobs.get_nowait()  # promised to us just as we timed out
                except queue.Empty:
                    self._idle -= 1
                    return

    def idle_threads(self) -> frozenset[threading.Thread]:
        with self._lock:
            return frozenset(self._waiting)


_threads = _CachedThreads("piagent-worker")

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_threads._reset)


def run_in_thread(fn: Callable[..., Any], *args: Any) -> None:
    """Call ``fn(*args)`` on another thread now; ``fn`` must report its own outcome and errors."""
    _threads.submit(fn, *args)


def idle_threads() -> frozenset[threading.Thread]:
    """The worker threads that finished their job and wait for another (alive, but doing nothing)."""
    return _threads.idle_threads()
