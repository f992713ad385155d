"""A small, bounded set of daemon threads for work a server triggers (answers, notifications).

A server decides how much of this work there is, so neither the threads nor the queue may grow
with it: at most ``threads`` threads run jobs, at most ``capacity`` jobs wait or run, and
:meth:`Workers.submit` refuses the rest (the caller answers or logs the refusal). Threads exit
when the queue is empty; nothing waits for them (a job stuck in a user callback is abandoned
with its daemon thread when the client closes).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any, Callable

__all__ = ["Workers"]

logger = logging.getLogger("piagent.mcp")


class Workers:
    def __init__(self, name: str, threads: int, capacity: int) -> None:
        self._name = name
        self._max_threads = threads
        self._capacity = capacity
        self._lock = threading.Lock()
        self._jobs: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._running = 0  # jobs being run
        self._threads = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> bool:
        """Queue ``fn(*args)``; False (and nothing queued) when ``capacity`` jobs already wait or run."""
        with self._lock:
            if len(self._jobs) + self._running >= self._capacity:
                return False
            self._jobs.append((fn, args))
            start = self._threads < self._max_threads and self._threads < len(self._jobs) + self._running
            if start:
                self._threads += 1
        if start:
            threading.Thread(target=self._work, name=self._name, daemon=True).start()
        return True

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._jobs:
                    self._threads -= 1
                    return
                fn, args = self._jobs.popleft()
                self._running += 1
            try:
                fn(*args)
            except Exception:  # jobs report their own errors; this is a last resort
                logger.exception("unhandled error in an MCP worker thread")
            finally:
                with self._lock:
                    self._running -= 1
