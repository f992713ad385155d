"""Waiting for another process's lock: nothing can wake us when it is released, so we poll."""

from __future__ import annotations

import time
from typing import Callable

__all__ = ["poll"]


def poll(attempt: Callable[[], bool], timeout: float) -> bool:
    """Call ``attempt`` until it returns True (then True) or ``timeout`` seconds have passed (False).

    The pause between attempts grows from 1 ms to 50 ms.
    """
    deadline = time.monotonic() + timeout
    pause = 0.001
    while not attempt():
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
    return True
