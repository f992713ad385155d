"""Event streams: a blocking, thread-safe iterator of events with a final result.

An :class:`EventStream` is fed in one of two ways:

* push: any thread calls ``push(event)`` and finally ``end()``; consumers block on the next
  event (a ``deque`` under a ``threading.Condition``);
* pull: built with ``source=`` (an iterator, usually a provider's generator), it produces each
  event on the consuming thread when asked, with no thread hand-off at all.

Either way the first *completing* event resolves ``result()``; events after it are dropped.
A stream that ends with neither a completing event nor a result resolves with an error
instead of hanging (pi's hangs here; docs/llm.md#event-streams).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any, Callable, Generic, Optional, TypeVar, cast

from ..exceptions import StreamEndedWithoutResult
from .types import AssistantMessage, AssistantMessageEvent

__all__ = ["AssistantMessageEventStream", "EventStream"]

E = TypeVar("E")
R = TypeVar("R")
_UNSET: Any = object()


class EventStream(Generic[E, R]):
    """Events in, one result out. Iterate it (blocking) and/or call ``result()``.

    Each event goes to exactly one consumer. ``result(timeout)`` blocks until the stream is
    resolved; it raises the error the stream ended with, or :class:`StreamEndedWithoutResult`.
    """

    def __init__(
        self,
        is_complete: Callable[[E], bool],
        extract_result: Callable[[E], R],
        source: Optional[Iterable[E]] = None,
    ) -> None:
        self._is_complete = is_complete
        self._extract_result = extract_result
        self._queue: deque[E] = deque()
        self._cond = threading.Condition(threading.Lock())
        self._done = False
        self._result: Any = _UNSET
        self._error: Optional[BaseException] = None
        self._source: Optional[Iterator[E]] = iter(source) if source is not None else None
        self._source_lock = threading.Lock()
        self._last: Any = None  # the last event delivered, for _missing_result()

    # -- producing ---------------------------------------------------------------------

    def push(self, event: E) -> None:
        """Deliver ``event``; a completing event resolves the result. Dropped once done."""
        with self._cond:
            if self._done:
                return
            if self._is_complete(event):
                self._done = True
                if self._result is _UNSET:
                    self._result = self._extract_result(event)
            self._last = event
            self._queue.append(event)
            self._cond.notify_all()

    def end(self, result: Any = _UNSET, error: Optional[BaseException] = None) -> None:
        """Mark the stream done; the first result (or error) given wins."""
        with self._cond:
            self._done = True
            if self._result is _UNSET and self._error is None:
                if error is not None:
                    self._error = error
                elif result is not _UNSET:
                    self._result = result
            self._cond.notify_all()

    @property
    def done(self) -> bool:
        return self._done

    # -- consuming ---------------------------------------------------------------------

    def __iter__(self) -> Iterator[E]:
        return self

    def __next__(self) -> E:
        source = self._source
        if source is not None:  # pull mode: the next event is produced here, on this thread
            with self._source_lock:
                if self._done:
                    if self._queue:
                        return self._queue.popleft()
                    raise StopIteration
                try:
                    event = next(source)
                except StopIteration:
                    self.end()
                    raise
                except BaseException as exc:
                    self.end(error=exc)
                    raise
                self._last = event
                if self._is_complete(event):
                    with self._cond:
                        self._done = True
                        if self._result is _UNSET:
                            self._result = self._extract_result(event)
                        self._cond.notify_all()
                return event
        with self._cond:
            while not self._queue:
                if self._done:
                    if self._error is not None and self._result is _UNSET:
                        raise self._error
                    raise StopIteration
                self._cond.wait()
            return self._queue.popleft()

    def result(self, timeout: Optional[float] = None) -> R:
        """The final result; blocks until the stream is resolved (or ``timeout`` expires).

        A pull-mode stream is first drained on the calling thread, which ``timeout`` does not
        bound (the source's own timeouts do, e.g. an HTTP read timeout).
        """
        if self._source is not None:
            for _ in self:  # drain on this thread; nothing else will
                pass
        with self._cond:
            if not self._cond.wait_for(lambda: self._done, timeout):
                raise TimeoutError("event stream did not finish in time")
            if self._result is _UNSET and self._error is None:
                self._result = self._missing_result()
            if self._result is not _UNSET:
                return cast(R, self._result)
            assert self._error is not None  # resolved: a result or an error
            raise self._error

    def close(self) -> None:
        """Stop consuming: end the stream and close a pull-mode source (and its HTTP response).

        Call it from the consuming thread (to stop another thread's stream, abort its signal).
        After ``close()`` iteration stops; ``result()`` gives what the stream had resolved to.
        """
        if self._source is not None:
            with self._source_lock:
                close = getattr(self._source, "close", None)
                if close is not None:
                    close()
        self.end()

    def __enter__(self) -> EventStream[E, R]:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _missing_result(self) -> R:
        """The result of a stream ended with neither a completing event nor a result."""
        raise StreamEndedWithoutResult("event stream ended without a terminal event")


def _is_terminal(event: AssistantMessageEvent) -> bool:
    return event.type == "done" or event.type == "error"


def _final_message(event: AssistantMessageEvent) -> AssistantMessage:
    message = event.message if event.type == "done" else event.error
    if message is None:  # a provider bug; the stream still resolves, to an error the loop can show
        return AssistantMessage(stop_reason="error", error_message=f"{event.type!r} event without its message")
    return message


class AssistantMessageEventStream(EventStream[AssistantMessageEvent, AssistantMessage]):
    """A stream of :class:`AssistantMessageEvent` whose result is the final assistant message.

    If it ends without ``done``/``error`` (and without a result), ``result()`` returns an
    assistant message with ``stop_reason="error"`` that keeps the content of the last partial
    seen, rather than hanging or raising, so the agent loop's normal error path runs.
    """

    def __init__(self, source: Optional[Iterable[AssistantMessageEvent]] = None) -> None:
        super().__init__(_is_terminal, _final_message, source)

    def _missing_result(self) -> AssistantMessage:
        error = "Stream ended without a terminal event"
        last = self._last
        partial = last.partial if isinstance(last, AssistantMessageEvent) else None
        if partial is None:
            return AssistantMessage(stop_reason="error", error_message=error)
        message = partial.snapshot()
        message.stop_reason = "error"
        message.error_message = error
        return message
