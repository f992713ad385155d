"""How a batch of tool calls runs (docs/loop.md#tool-batches).

:func:`execute_tool_calls` picks the algorithm: sequential when the config says so or any
called tool has ``execution_mode="sequential"``, parallel otherwise.
:func:`fail_truncated_tool_calls` answers the calls of a length-stopped message without
running them (docs/loop.md#rule-10).
"""

from __future__ import annotations

from ..ai.types import ToolCall, ToolResultMessage
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
from .sequential import run_sequential

__all__ = [
    "BatchContext",
    "ToolBatch",
    "abandoned_tool_threads",
    "execute_tool_calls",
    "fail_truncated_tool_calls",
]


def _is_sequential(batch: BatchContext, calls: list[ToolCall]) -> bool:
    if batch.config.tool_execution == "sequential":
        return True
    for call in calls:
        tool = find_tool(batch.context.tools, call.name)
        if tool is not None and tool.execution_mode == "sequential":
            return True
    return False


def execute_tool_calls(batch: BatchContext, calls: list[ToolCall]) -> ToolBatch:
    """Run a batch; hooks and listeners run on this (the run) thread."""
    if _is_sequential(batch, calls):
        return run_sequential(batch, calls)
    return run_parallel(batch, calls)


def fail_truncated_tool_calls(batch: BatchContext, calls: list[ToolCall]) -> ToolBatch:
    messages: list[ToolResultMessage] = []
    for call in calls:
        emit_start(batch, call)
        text = (
            f'Tool call "{call.name}" was not executed: the response hit the output token limit, '
            "so its arguments may be truncated. Re-issue the tool call with complete arguments."
        )
        outcome = Outcome(call, error_result(text), True)
        emit_end(batch, outcome)
        messages.extend(emit_result_messages(batch, [outcome]))
    return ToolBatch(messages, False)
