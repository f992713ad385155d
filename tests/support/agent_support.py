"""Shared helpers for the Agent tests (the common fixtures of pi's Agent tests).

* ``echo_tool()``, ``user()``, ``roles()``: as in :mod:`tests.support.loop`.
* ``Recorder``: a listener recording every event (and, optionally, running a hook per event).
* ``GatedStream``: a stream function that sends ``start`` and then waits until released or
  aborted, for tests that need a run to stay in progress.
* ``ContendedLock``: a lock that tells when a given thread finds it held, for race tests.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, Callable, Optional

from piagent.ai import AssistantMessageEventStream, MessageBuilder, Model, StreamOptions
from piagent.ai.types import Context
from tests.support.loop import echo_tool, kinds, of_type, roles, user
from tests.support.waits import WAIT

__all__ = ["WAIT", "ContendedLock", "GatedStream", "Recorder", "echo_tool", "roles", "text_of", "user"]


def text_of(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(getattr(block, "text", "") for block in content)


class Recorder:
    """A two-argument listener: records ``(event, signal)``; ``on_event(event)`` runs after recording."""

    def __init__(self, on_event: Optional[Callable[[Any], None]] = None) -> None:
        self.events: list[Any] = []
        self.signals: list[Any] = []
        self.on_event = on_event

    def __call__(self, event: Any, signal: Any) -> None:
        self.events.append(event)
        self.signals.append(signal)
        if self.on_event is not None:
            self.on_event(event)

    @property
    def types(self) -> list[str]:
        return kinds(self.events)

    def of_type(self, kind: str) -> list[Any]:
        return of_type(self.events, kind)


class GatedStream:
    """A stream function: ``start``, then wait for ``release`` (answer ``text``) or an abort.

    ``started`` is set once the run thread is waiting inside the stream. Events are produced
    on the run thread (a pull stream), so nothing runs after the test finished.
    """

    def __init__(self, text: str = "released") -> None:
        self.text = text
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls: list[StreamOptions] = []

    def __call__(self, model: Model, context: Context, options: StreamOptions) -> AssistantMessageEventStream:
        self.calls.append(options)
        builder = MessageBuilder(model)
        signal = options.signal

        def events() -> Iterator[Any]:
            yield builder.start()
            remove = signal.add_listener(self.release.set)
            self.started.set()
            self.release.wait(WAIT)
            remove()
            if signal.aborted:
                yield builder.error("Request was aborted", aborted=True)
                return
            start = builder.text_start()
            yield start
            yield builder.text_delta(start.content_index, self.text)  # type: ignore[arg-type]
            yield builder.text_end(start.content_index)  # type: ignore[arg-type]
            yield builder.done("stop")

        return AssistantMessageEventStream(events())


class ContendedLock:
    """Stands for a lock, telling when a thread that ``watched`` picks finds it held: ``contended``
    is set then, before that thread waits for the lock as usual. A race test waits for it (or
    for the other thread to be done) instead of giving the other thread a moment."""

    def __init__(self, lock: Any, watched: Callable[[], bool]) -> None:
        self._lock = lock
        self._watched = watched
        self.contended = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if self._lock.acquire(blocking=False):
            return True
        if self._watched():
            self.contended.set()
        return bool(self._lock.acquire(blocking, timeout)) if blocking else False

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()
