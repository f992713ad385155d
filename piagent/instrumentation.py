"""The instrumentation seam: where tracing, metrics or any other observer plugs into piagent.

piagent calls at most one installed :class:`Instrumentation` at five points. With none
installed (the default) each point costs one module-attribute read and an ``is None`` test, and
nothing else runs: no wrapper, no allocation. :func:`piagent.instrument` installs the
OpenTelemetry one (``piagent.otel``); anything else can subclass :class:`Instrumentation`,
override what it needs and :func:`install` itself. See ``docs/observability.md``.

Threads: ``run``, ``model_call`` and the events run on the run thread; ``tool_call`` returns
the function that executes the tool, called on the thread that runs it (a worker thread, a
user's executor, or the run thread), inside a copy of the run thread's ``contextvars`` context
taken when the call was started, so a ``ContextVar`` set in ``run`` is visible there;
``retry`` and ``model_call_failed`` run inside ``model_call``'s body, on the run thread.

Every method must return (or re-raise) what its body returns (or raises): an instrumentation
observes, it never changes a run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:  # type names only: this module imports nothing of piagent at run time
    from .abort import AbortSignal
    from .ai.types import AssistantMessage, Context, Model, StreamOptions, ToolCall
    from .types import AgentContext, AgentLoopConfig, AgentMessage

__all__ = ["Instrumentation", "active", "install", "installed"]

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


active: Optional[Instrumentation] = None  # read by the core at each seam


def install(instrumentation: Optional[Instrumentation]) -> None:
    """Make ``instrumentation`` the one piagent calls from now on (None: none)."""
    global active
    if instrumentation is not None and not isinstance(instrumentation, Instrumentation):
        raise TypeError(f"expected an Instrumentation or None, got {type(instrumentation).__name__}")
    active = instrumentation


def installed() -> Optional[Instrumentation]:
    """The installed instrumentation, or None."""
    return active
