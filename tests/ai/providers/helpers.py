"""What the provider tests share: reading a stream, the common options, a tool, a context."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from piagent import AgentTool, AgentToolResult
from piagent.ai import AssistantMessage, AssistantMessageEventStream, Context, StreamOptions, TextContent, UserMessage

__all__ = ["add_tool", "drain", "event_types", "hello", "stream_options"]


def event_types(events: Iterable[Any]) -> list[str]:
    """The ``type`` of each event, in order (iterating a stream drains it)."""
    return [event.type for event in events]


def drain(stream: AssistantMessageEventStream) -> tuple[list[Any], AssistantMessage]:
    """Every event of ``stream``, then its final message."""
    events = list(stream)
    return events, stream.result(timeout=10)


def stream_options(api_key: str, **overrides: Any) -> StreamOptions:
    """Options with ``api_key`` and short retry delays (the tests' servers ask for retries)."""
    values: dict[str, Any] = {"api_key": api_key, "max_retry_delay_ms": 20}
    values.update(overrides)
    return StreamOptions(**values)


def hello() -> Context:
    """A one-message context with a system prompt."""
    return Context(system_prompt="Be brief.", messages=[UserMessage("Hi", timestamp=1)])


def add_tool(calls: list[dict[str, Any]]) -> AgentTool:
    """An ``add(a, b)`` tool that records the arguments of each call in ``calls``."""

    def execute(tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        calls.append(args)
        return AgentToolResult([TextContent(str(args["a"] + args["b"]))])

    schema = {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    }
    return AgentTool("add", "Add two numbers", schema, execute)
