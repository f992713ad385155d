"""One tool call outside a model's batch: pi 1.6's ``runToolCall`` (docs/loop.md#rule-37).

A tool that calls other tools (a code-running tool, a planner) runs each of those calls through
the steps a model's call goes through: argument preparation, validation, ``before_tool_call``,
its intent (with the config's ``intent_journal``: not stored, it does not run), execution and
``after_tool_call``, so permission hooks apply to them too. No event is emitted and no message
is added.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Callable, Optional

from ..abort import AbortController, AbortSignal
from ..ai.types import AssistantMessage, ToolCall
from ..events import AgentEvent
from ..types import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, ToolCallOutcome
from ._common import (
    BatchContext,
    Outcome,
    elapsed_ms,
    error_result,
    execute,
    finalize,
    link_signal,
    prepare,
    record_intents,
)

__all__ = ["run_tool_call"]


def run_tool_call(
    tool_call: ToolCall,
    *,
    assistant_message: AssistantMessage,
    context: AgentContext,
    config: AgentLoopConfig,
    signal: Optional[AbortSignal] = None,
    tools: Optional[Sequence[AgentTool]] = None,
    on_update: Optional[Callable[[AgentToolResult], None]] = None,
) -> ToolCallOutcome:
    """Run ``tool_call`` on this thread with ``config``'s hooks; never raises for a tool failure.

    ``tools`` replaces ``context.tools`` for the lookup. An aborted ``signal`` (checked first,
    before any hook), an unknown tool, invalid arguments, a blocked call and a raising tool all
    come back as ``is_error=True``. ``on_update`` gets the tool's partial results until it
    returns. The tool runs on the calling thread: its ``timeout`` does not apply.
    """
    signal = signal or AbortController().signal
    if tools is not None:
        context = replace(context, tools=list(tools))
    if signal.aborted:
        return ToolCallOutcome(tool_call, error_result("Operation aborted"), True)
    batch = BatchContext(context, assistant_message, config, signal, _no_event)
    prepared = prepare(batch, 0, tool_call)
    if not isinstance(prepared, Outcome):  # no intent stored, no effect (docs/effects.md)
        prepared = record_intents(batch, [prepared]).get(0, prepared)
    if isinstance(prepared, Outcome):
        return ToolCallOutcome(prepared.call, prepared.result, prepared.is_error)
    settled = threading.Event()

    def report(partial: AgentToolResult) -> None:
        if on_update is not None and not settled.is_set():  # later updates are dropped, as in a batch
            on_update(partial)

    unlink = link_signal(prepared, signal)
    started = time.monotonic()
    try:
        result, is_error = execute(prepared, report)
    finally:
        settled.set()
        unlink()
    outcome = finalize(batch, prepared, result, is_error, elapsed_ms(started))
    return ToolCallOutcome(outcome.call, outcome.result, outcome.is_error, outcome.duration_ms)


def _no_event(event: AgentEvent) -> None:
    """Calls run here emit nothing."""
