"""How a batch of tool calls runs (docs/loop.md#tool-batches).

:func:`execute_tool_calls` picks the algorithm: sequential when the config says so or any
called tool has ``execution_mode="sequential"`` or ``on_run_thread=True``, parallel otherwise.
:func:`fail_truncated_tool_calls` answers the calls of a length-stopped message without
running them (docs/loop.md#rule-10). :func:`run_tool_call` runs one call outside a batch, for
tools that call other tools (docs/loop.md#rule-37).
"""

from __future__ import annotations

from ..ai.types import ToolCall, ToolResultMessage
from ..types import DEFAULT_MAX_TOOL_CALLS
from ._common import (
    BatchContext,
    Outcome,
    ToolBatch,
    abandoned_tool_threads,
    emit_end,
    emit_result_messages,
    emit_start,
    error_result,
    find_tool,
)
from .parallel import run_parallel
from .recovery import recover_interrupted
from .sequential import run_sequential
from .single import run_tool_call

__all__ = [
    "BatchContext",
    "ToolBatch",
    "abandoned_tool_threads",
    "execute_tool_calls",
    "fail_truncated_tool_calls",
    "recover_interrupted",
    "run_tool_call",
]


def _is_sequential(batch: BatchContext, calls: list[ToolCall]) -> bool:
    if batch.config.tool_execution == "sequential":
        return True
    for call in calls:
        tool = find_tool(batch.context.tools, call.name)
        if tool is not None and (tool.execution_mode == "sequential" or tool.on_run_thread):
            return True
    return False


def execute_tool_calls(batch: BatchContext, calls: list[ToolCall]) -> ToolBatch:
    """Run a batch; hooks and listeners run on this (the run) thread. Calls past
    ``max_tool_calls`` (default 128) are not run: they get error results, after the others."""
    cap = batch.config.max_tool_calls or DEFAULT_MAX_TOOL_CALLS
    calls, extra = calls[:cap], calls[cap:]
    result = run_sequential(batch, calls) if _is_sequential(batch, calls) else run_parallel(batch, calls)
    if extra:
        reason = (
            f"the response made {len(calls) + len(extra)} tool calls, "
            f"more than the {cap} one response may make (max_tool_calls). Make fewer calls at once."
        )
        result.messages.extend(_fail(batch, extra, reason).messages)
        result.terminate = False
    return result


def fail_truncated_tool_calls(batch: BatchContext, calls: list[ToolCall]) -> ToolBatch:
    reason = (
        "the response hit the output token limit, so its arguments may be truncated. "
        "Re-issue the tool call with complete arguments."
    )
    return _fail(batch, calls, reason)


def _fail(batch: BatchContext, calls: list[ToolCall], reason: str) -> ToolBatch:
    """Answer ``calls`` with an error result each (``Tool call "<name>" was not executed: <reason>``)."""
    messages: list[ToolResultMessage] = []
    for call in calls:
        emit_start(batch, call)
        outcome = Outcome(call, error_result(f'Tool call "{call.name}" was not executed: {reason}'), True)
        emit_end(batch, outcome)
        messages.extend(emit_result_messages(batch, [outcome]))
    return ToolBatch(messages, False)
