"""The instrumentation seam: where tracing, metrics or any other observer plugs into piagent.

A run is observed by its agent's ``instrumentation`` option if set, else by the one
:func:`install`-ed for every run (:func:`piagent.instrument` installs the OpenTelemetry one,
``piagent.otel``), else by nothing. That choice is made when the run starts and holds for the
whole run (:func:`current` inside it). With none (the default) a run costs one ``is None`` test
and each model or tool call one ``ContextVar`` read; nothing else runs: no wrapper, no
allocation. Anything can subclass :class:`Instrumentation` and override what it needs. See
``docs/observability.md#the-seam-other-observers``.

Threads: ``run``, ``model_call`` and the events run on the run thread; ``tool_call``, and the
function it returns, run on the thread that executes the tool (a worker thread, a user's
executor, or the run thread), inside a copy of the run thread's ``contextvars`` context taken
when the call was started, so a ``ContextVar`` set in ``run`` is visible there; ``retry`` and
``model_call_failed`` run inside ``model_call``'s body, on the run thread.

Every method must return (or re-raise) what its body returns (or raises): an instrumentation
observes, it never changes a run.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:  # type names only: this module imports nothing of piagent at run time
    from .abort import AbortSignal
    from .ai.types import AssistantMessage, Context, Model, StreamOptions, ToolCall
    from .types import AgentContext, AgentLoopConfig, AgentMessage

__all__ = ["Instrumentation", "active", "check", "current", "install", "installed", "observing"]

Emit = Callable[[Any], None]


class Instrumentation:
    """Observer of runs, model calls, tool calls and retries; every method defaults to a pass-through."""

    def run(
        self,
        body: Callable[[Emit], list[AgentMessage]],
        emit: Emit,
        context: AgentContext,
        config: AgentLoopConfig,
        signal: AbortSignal,
    ) -> list[AgentMessage]:
        """Around one run of the agent loop: return ``body(emit)``, or ``body(wrapper)`` where
        ``wrapper(event)`` observes each agent event and then calls ``emit(event)``."""
        return body(emit)

    def model_call(
        self, body: Callable[[], AssistantMessage], model: Model, context: Context, options: StreamOptions
    ) -> AssistantMessage:
        """Around one model call (connection, retries and the whole streamed answer): return ``body()``.

        ``options`` carries the API key: an instrumentation must never record it.
        """
        return body()

    def model_call_failed(self, error: BaseException) -> None:
        """A provider's request failed with ``error`` (the call then ends with an error message)."""

    def retry(self, attempt: int, delay: float, status: Optional[int], error: Optional[BaseException]) -> None:
        """A provider request is retried (``attempt`` counts from 1) after ``delay`` seconds,
        because of an HTTP ``status`` or a connection ``error``."""

    def tool_call(self, execute: Callable[..., Any], call: ToolCall) -> Callable[..., Any]:
        """The function to call instead of ``execute`` (a tool's ``execute``) for ``call``."""
        return execute


active: Optional[Instrumentation] = None  # read by the loop when a run starts
_current: contextvars.ContextVar[Optional[Instrumentation]] = contextvars.ContextVar("piagent_observer", default=None)


def install(instrumentation: Optional[Instrumentation]) -> None:
    """Make ``instrumentation`` observe every run started from now on (None: none), except
    those of an agent with its own ``instrumentation`` option."""
    global active
    active = check("instrumentation", instrumentation)


def installed() -> Optional[Instrumentation]:
    """The installed instrumentation, or None."""
    return active


def current() -> Optional[Instrumentation]:
    """The instrumentation of the run this thread works for (tool threads included), or None."""
    return _current.get()


@contextlib.contextmanager
def observing(instrumentation: Instrumentation) -> Iterator[None]:
    """Make ``instrumentation`` the :func:`current` one in this context (the loop does, for a run)."""
    token = _current.set(instrumentation)
    try:
        yield
    finally:
        _current.reset(token)


def check(name: str, value: Any) -> Optional[Instrumentation]:
    """Validate an ``instrumentation`` option (an :class:`Instrumentation` or None)."""
    if value is not None and not isinstance(value, Instrumentation):
        from .exceptions import InvalidTypeError  # here: the module imports nothing of piagent at load time

        raise InvalidTypeError(
            f"{name} must be a piagent.instrumentation.Instrumentation or None, got {type(value).__name__}"
        )
    return value
