"""The steering and follow-up queues: a ``queue.Queue`` of messages with an atomic drain.

:class:`MessageQueue` keeps the stdlib ``put()``/``get()``/``qsize()``/``join()`` (any thread
may ``put()``), normalises what goes in (a string becomes a user message with one text
block; anything else must have a ``role``), and adds what the agent loop needs:

* ``drain(mode)``: under the queue's own ``mutex``, remove and return the oldest message
  (``"one-at-a-time"``) or every message (``"all"``); never blocks;
* ``peek(mode)``: what ``drain(mode)`` would return, left in the queue;
* ``clear()``: drain everything;
* ``requeue(messages)``: put messages that were drained but never delivered back at the
  front, in their order.

A drained message counts as a finished task, so ``queue.join()`` returns once every message
put so far has been delivered to a run (or cleared).
"""

from __future__ import annotations

import queue
from collections.abc import Sequence
from typing import Any, Optional, Union

from ._options import choice
from .ai.types import TextContent, UserMessage
from .exceptions import InvalidTypeError
from .types import AgentMessage, QueueMode

__all__ = ["QUEUE_MODES", "MessageQueue", "to_message"]

QUEUE_MODES = ("one-at-a-time", "all")
_check_mode = choice(*QUEUE_MODES)


def to_message(value: Any) -> AgentMessage:
    """A string becomes a user message with one text block; a message (has ``role``) is kept."""
    if isinstance(value, str):
        return UserMessage([TextContent(value)])
    if getattr(value, "role", None) is None:
        raise InvalidTypeError(f"expected a str or a message with a 'role' attribute, got {type(value).__name__}")
    return value


class MessageQueue(queue.Queue[AgentMessage]):
    """A FIFO of agent messages; safe from any thread, listeners and tools included."""

    def put(self, item: Union[str, AgentMessage], block: bool = True, timeout: Optional[float] = None) -> None:
        """Queue a message (a str becomes a user message; anything else needs a ``role``)."""
        super().put(to_message(item), block, timeout)

    def drain(self, mode: QueueMode = "all") -> list[AgentMessage]:
        """Remove and return the oldest message (``"one-at-a-time"``) or all of them (``"all"``)."""
        _check_mode("mode", mode)
        with self.mutex:
            if mode == "all":
                items = list(self.queue)
                self.queue.clear()
            else:
                items = [self.queue.popleft()] if self.queue else []
            if items:
                self._tasks_finished(len(items))
                self.not_full.notify_all()
        return items

    def peek(self, mode: QueueMode = "all") -> list[AgentMessage]:
        """What ``drain(mode)`` would return now, left in the queue."""
        _check_mode("mode", mode)
        with self.mutex:
            return list(self.queue) if mode == "all" else list(self.queue)[:1]

    def clear(self) -> list[AgentMessage]:
        """Remove every queued message; returns them."""
        return self.drain("all")

    def requeue(self, messages: Sequence[AgentMessage]) -> None:
        """Put drained-but-undelivered ``messages`` back at the front, keeping their order."""
        if not messages:
            return
        with self.mutex:
            self.queue.extendleft(reversed(list(messages)))
            self.unfinished_tasks += len(messages)
            self.not_empty.notify_all()

    def _tasks_finished(self, count: int) -> None:
        self.unfinished_tasks = max(0, self.unfinished_tasks - count)
        if self.unfinished_tasks == 0:
            self.all_tasks_done.notify_all()
