"""Bounds on waiting, for every test that waits for another thread or process."""

from __future__ import annotations

import threading
import time
from typing import Callable

WAIT = 5.0  # upper bound for any wait in a test; never reached when the code is right


def wait_until(predicate: Callable[[], object], timeout: float = WAIT, interval: float = 0.001) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds passed; returns its last value.

    Only for conditions nothing signals (a pool's bookkeeping, a process exiting): a bound on
    waiting, never the mechanism a test relies on for ordering.
    """
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            return bool(predicate())
        pause.wait(interval)
    return True
