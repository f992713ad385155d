"""Shared fixtures for the loop, executor and stream tests (the common fixtures of pi's loop tests).

* ``MODEL``: the mock model (api "openai-responses", provider "openai", id "mock").
* ``config(**fields)``: an ``AgentLoopConfig`` for ``MODEL``.
* ``echo_tool()``: schema ``{value: string}``, returns text ``echoed: <value>``, details ``{value}``.
* ``assistant(...)``: an assistant message with zero usage.
* ``ScriptedStream``: a stream function replaying scripted responses, in push mode (a thread
  per call pushes the events, then ``end()``) or pull mode (``source=`` generator); it
  records every call's model, context and options.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from piagent import (
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    AssistantMessage,
    TextContent,
    ToolCall,
    Usage,
    UserMessage,
)
from piagent.ai import AssistantMessageEvent, AssistantMessageEventStream, Context, Model, StreamOptions
from piagent.ai.types import ThinkingContent
from tests.support.waits import WAIT

MODEL = Model(id="mock", api="openai-responses", provider="openai")


def config(**fields: Any) -> AgentLoopConfig:
    return AgentLoopConfig(model=MODEL, **fields)


def user(text: str) -> UserMessage:
    return UserMessage([TextContent(text)])


def assistant(
    content: Union[str, Sequence[Any]] = "", stop_reason: Optional[str] = None, **fields: Any
) -> AssistantMessage:
    blocks = [TextContent(content)] if isinstance(content, str) else list(content)
    if stop_reason is None:
        stop_reason = "toolUse" if any(b.type == "toolCall" for b in blocks) else "stop"
    return AssistantMessage(
        content=blocks,
        api=MODEL.api,
        provider=MODEL.provider,
        model=MODEL.id,
        usage=Usage(),
        stop_reason=stop_reason,
        **fields,  # type: ignore[arg-type]
    )


def call(id: str, name: str = "echo", **arguments: Any) -> ToolCall:
    return ToolCall(id, name, dict(arguments))


ECHO_SCHEMA = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}


def echo_tool(
    name: str = "echo",
    before: Optional[Callable[[str, Any, Any, Any], Any]] = None,
    terminate: bool = False,
    **options: Any,
) -> AgentTool:
    """The common echo tool; ``before(tool_call_id, args, signal, on_update)`` runs first."""

    def execute(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        if before is not None:
            before(tool_call_id, args, signal, on_update)
        return AgentToolResult([TextContent(f"echoed: {args['value']}")], {"value": args["value"]}, terminate)

    return AgentTool(name, "Echo the value back", ECHO_SCHEMA, execute, **options)


@dataclass
class Custom:
    """An application message the LLM does not understand."""

    role: str
    text: str = ""


# --------------------------------------------------------------------------- stream events


def _partial(message: AssistantMessage, content: list[Any]) -> AssistantMessage:
    return AssistantMessage(
        content=list(content),
        api=message.api,
        provider=message.provider,
        model=message.model,
        usage=message.usage,
        stop_reason=message.stop_reason,
        timestamp=message.timestamp,
    )


def terminal(message: AssistantMessage) -> AssistantMessageEvent:
    if message.stop_reason in ("error", "aborted"):
        return AssistantMessageEvent("error", reason=message.stop_reason, error=message)
    return AssistantMessageEvent("done", reason=message.stop_reason, message=message)


def block_events(message: AssistantMessage) -> list[AssistantMessageEvent]:
    """``start`` and the start/delta/end events of every block, each with a fresh partial.

    Text is sent in two deltas (split in the middle), thinking in one, tool-call JSON in two.
    """
    events = [AssistantMessageEvent("start", _partial(message, []))]
    content: list[Any] = []
    for index, block in enumerate(message.content):
        if block.type == "text":
            kind, pieces = "text", _halves(block.text)

            def grow(sofar: str) -> Any:
                return TextContent(sofar)
        elif block.type == "thinking":
            kind, pieces = "thinking", [block.thinking]

            def grow(sofar):
                return ThinkingContent(sofar)
        else:
            kind, pieces = "toolcall", _halves(json.dumps(block.arguments))

            def grow(sofar, b=block):
                return ToolCall(b.id, b.name, {})

        content.append(grow(""))
        events.append(AssistantMessageEvent(f"{kind}_start", _partial(message, content), index))
        sofar = ""
        for piece in pieces:
            sofar += piece
            content[index] = grow(sofar)
            events.append(AssistantMessageEvent(f"{kind}_delta", _partial(message, content), index, piece))
        content[index] = block
        end = AssistantMessageEvent(f"{kind}_end", _partial(message, content), index)
        if kind == "toolcall":
            end.tool_call = block
        else:
            end.content = block.text if kind == "text" else block.thinking
        events.append(end)
    return events


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [text[:middle], text[middle:]]


def events_for(message: AssistantMessage, streamed: bool = False) -> list[AssistantMessageEvent]:
    """The events a provider sends for ``message``: only the terminal one, or the whole stream."""
    return (block_events(message) if streamed else []) + [terminal(message)]


def push_stream(
    events: Sequence[Any], end: bool = True, gate: Optional[threading.Event] = None
) -> AssistantMessageEventStream:
    """A stream fed from another thread: ``push`` each event (after ``gate``), then ``end()``."""
    stream = AssistantMessageEventStream()

    def produce() -> None:
        if gate is not None:
            gate.wait(WAIT)
        for event in events:
            stream.push(event)
        if end:
            stream.end()

    threading.Thread(target=produce, name="mock-provider", daemon=True).start()
    return stream


def pull_stream(events: Sequence[Any]) -> AssistantMessageEventStream:
    """A stream whose events a generator produces on the consuming thread."""

    def source() -> Iterator[Any]:
        yield from events

    return AssistantMessageEventStream(source=source())


def make_stream(events: Sequence[Any], mode: str) -> AssistantMessageEventStream:
    return push_stream(events) if mode == "push" else pull_stream(events)


@dataclass
class Request:
    model: Model
    context: Context
    options: StreamOptions


Response = Union[AssistantMessage, list[AssistantMessageEvent], Callable[[Context, StreamOptions], Any]]


class ScriptedStream:
    """A stream function answering call n with ``responses[n]``.

    A response is an assistant message (sent as its terminal event only, or fully streamed
    with ``streamed=True``), an explicit list of events, or a callable
    ``(context, options) -> message | events``. Past the script it raises AssertionError.
    """

    def __init__(self, responses: Sequence[Response], mode: str = "push", streamed: bool = False) -> None:
        self.responses = list(responses)
        self.mode = mode
        self.streamed = streamed
        self.requests: list[Request] = []
        self._lock = threading.Lock()

    @property
    def calls(self) -> int:
        return len(self.requests)

    def __call__(self, model: Model, context: Context, options: StreamOptions) -> AssistantMessageEventStream:
        with self._lock:
            self.requests.append(Request(model, context, options))
            index = len(self.requests) - 1
        assert index < len(self.responses), f"unexpected model call #{index + 1}"
        response = self.responses[index]
        if callable(response):
            response = response(context, options)
        events = response if isinstance(response, list) else events_for(response, self.streamed)
        return make_stream(events, self.mode)


# --------------------------------------------------------------------------- events


def kinds(events: Sequence[Any]) -> list[str]:
    return [event.type for event in events]


def of_type(events: Sequence[Any], kind: str) -> list[Any]:
    return [event for event in events if event.type == kind]


_ABBREVIATIONS = {
    "message_start": "ms",
    "message_end": "me",
    "message_update": "mu",
    "tool_execution_start": "tes",
    "tool_execution_update": "teu",
    "tool_execution_end": "tee",
}


def short(events: Sequence[Any]) -> list[str]:
    """Events in a shorthand: ``ms(U:Hello)``, ``me(A:text)``, ``tee(tool-1)``, ``mu``."""
    out = []
    for event in events:
        name = _ABBREVIATIONS.get(event.type, event.type)
        if event.type.startswith("tool_execution"):
            out.append(f"{name}({event.tool_call_id})")
        elif event.type in ("message_start", "message_end"):
            out.append(f"{name}({_tag(event.message)})")
        else:
            out.append(name)
    return out


def _tag(message: Any) -> str:
    if message.role == "user":
        content = message.content
        text = content if isinstance(content, str) else "".join(getattr(b, "text", "") for b in content)
        return f"U:{text}"
    if message.role == "assistant":
        return f"A:{message.text}" if message.text else "A"
    if message.role == "toolResult":
        return f"TR:{message.tool_call_id}"
    return str(message.role)


def roles(messages: Sequence[Any]) -> list[str]:
    return [m.role for m in messages]


class Polls:
    """A steering or follow-up source backed by a list, counting polls; mode as the Agent's."""

    def __init__(self, messages: Sequence[Any] = (), mode: str = "one-at-a-time") -> None:
        self.queue = list(messages)
        self.mode = mode
        self.count = 0
        self._lock = threading.Lock()

    def put(self, message: Any) -> None:
        with self._lock:
            self.queue.append(message)

    def __call__(self) -> list[Any]:
        with self._lock:
            self.count += 1
            if self.mode == "all":
                taken, self.queue = self.queue, []
            else:
                taken, self.queue = self.queue[:1], self.queue[1:]
            return taken
