"""Assemble an assistant message from deltas and produce its stream events (docs/llm.md#stream-events).

Every provider (HTTP or fake) feeds wire deltas into a :class:`MessageBuilder` and yields the
events it returns, so the event protocol lives in one place. Work per delta is O(delta):
text and argument deltas are appended to part lists, never to a growing string; the text of
a block still streaming is joined only when somebody reads it, and tool-call arguments are
parsed incrementally.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

from .arguments_check import RejectedToolCall, argument_problem
from .json_stream import IncrementalJsonParser
from .types import (
    AssistantMessage,
    AssistantMessageEvent,
    Model,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
)

__all__ = ["MessageBuilder"]


_COMPACT_CHARS = 1 << 16
"""Pending deltas are joined into the text once they hold this many characters."""


class _Parts:
    """Text grown by appending deltas, joined every :data:`_COMPACT_CHARS` characters and on read.

    The text is grown in place where CPython can (nothing else holds it), so a long answer
    takes about its own size in memory, not that again in delta objects and a copy.
    """

    __slots__ = ("_joined", "_pending", "_pending_chars")

    def __init__(self) -> None:
        self._joined = ""
        self._pending: list[str] = []
        self._pending_chars = 0

    def append(self, delta: str) -> None:
        self._pending.append(delta)
        self._pending_chars += len(delta)
        if self._pending_chars >= _COMPACT_CHARS:
            self._compact()

    def _compact(self) -> None:
        joined, self._joined = self._joined, ""  # the only reference left: grown in place
        joined += "".join(self._pending)
        self._joined = joined
        self._pending.clear()
        self._pending_chars = 0

    def value(self) -> str:
        if self._pending:
            self._compact()
        return self._joined


class _StreamingText(TextContent):
    """A text block still receiving deltas; ``text`` reads the parts so far."""

    def __init__(self, text_signature: Optional[str] = None) -> None:
        self._parts = _Parts()
        self.text_signature = text_signature

    @property
    def text(self) -> str:
        return self._parts.value()

    @text.setter
    def text(self, value: str) -> None:
        self._parts = _Parts()
        self._parts.append(value)

    def final(self, text_signature: Optional[str] = None) -> TextContent:
        """The finished block (``text_signature``, if given, replaces the one it started with)."""
        return TextContent(self.text, text_signature or self.text_signature)


class _StreamingThinking(ThinkingContent):
    """A thinking block still receiving deltas."""

    def __init__(self, thinking_signature: Optional[str] = None, redacted: bool = False) -> None:
        self._parts = _Parts()
        self.thinking_signature = thinking_signature
        self.redacted = redacted

    @property
    def thinking(self) -> str:
        return self._parts.value()

    @thinking.setter
    def thinking(self, value: str) -> None:
        self._parts = _Parts()
        self._parts.append(value)

    def final(self, thinking_signature: Optional[str] = None) -> ThinkingContent:
        """The finished block (``thinking_signature``, if given, replaces the one it started with)."""
        return ThinkingContent(self.thinking, thinking_signature or self.thinking_signature, self.redacted)


class _StreamingToolCall(ToolCall):
    """A tool call whose JSON arguments are still arriving; ``arguments`` is the best parse so far."""

    def __init__(self, id: str, name: str, thought_signature: Optional[str] = None) -> None:
        self.id = id
        self.name = name
        self.thought_signature = thought_signature
        self._json = IncrementalJsonParser()
        self._fixed: Optional[dict[str, Any]] = None

    @property
    def arguments(self) -> dict[str, Any]:
        if self._fixed is not None:
            return self._fixed
        value = self._json.value()
        return value if isinstance(value, dict) else {}

    @arguments.setter
    def arguments(self, value: dict[str, Any]) -> None:
        self._fixed = value

    def final(self, arguments: Optional[dict[str, Any]] = None) -> ToolCall:
        """The finished call (``arguments``, if given, replaces the parsed JSON); a
        :class:`RejectedToolCall` with ``{}`` as arguments when they break a bound."""
        value = self.arguments if arguments is None else arguments
        problem = argument_problem(value)
        if problem is not None:
            return RejectedToolCall(self.id, self.name, {}, self.thought_signature, problem=f"its arguments {problem}")
        return ToolCall(self.id, self.name, value, self.thought_signature)


class MessageBuilder:
    """Builds one :class:`AssistantMessage` and returns the stream event for each step.

    The same ``message`` object is the ``partial`` of every event (as pi's HTTP providers do).
    Blocks are addressed by their content index, returned in the ``*_start`` event.
    """

    def __init__(self, model: Model, message: Optional[AssistantMessage] = None) -> None:
        self.model = model
        self.message = message or AssistantMessage(api=model.api, provider=model.provider, model=model.id)
        self._open: dict[int, Any] = {}

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> AssistantMessageEvent:
        return AssistantMessageEvent("start", self.message)

    def _open_block(self, block: Any, kind: str) -> AssistantMessageEvent:
        index = len(self.message.content)
        self.message.content.append(block)
        self._open[index] = block
        return AssistantMessageEvent(kind, self.message, index)

    def report_model(self, reported: Any) -> None:
        """Record the model id the response reports; kept only when it differs from the one asked for."""
        if reported and reported != self.message.model:
            self.message.response_model = str(reported)

    # -- text ----------------------------------------------------------------------------

    def text_start(self, text_signature: Optional[str] = None) -> AssistantMessageEvent:
        return self._open_block(_StreamingText(text_signature), "text_start")

    def text_delta(self, index: int, delta: str) -> AssistantMessageEvent:
        self._open[index]._parts.append(delta)
        return AssistantMessageEvent("text_delta", self.message, index, delta)

    def text_end(self, index: int, text_signature: Optional[str] = None) -> AssistantMessageEvent:
        final = self._open.pop(index).final(text_signature)
        self.message.content[index] = final
        return AssistantMessageEvent("text_end", self.message, index, content=final.text)

    # -- thinking ------------------------------------------------------------------------

    def thinking_start(self, thinking_signature: Optional[str] = None, redacted: bool = False) -> AssistantMessageEvent:
        return self._open_block(_StreamingThinking(thinking_signature, redacted), "thinking_start")

    def thinking_delta(self, index: int, delta: str) -> AssistantMessageEvent:
        self._open[index]._parts.append(delta)
        return AssistantMessageEvent("thinking_delta", self.message, index, delta)

    def set_thinking_signature(self, index: int, signature: str, append: bool = False) -> None:
        """Record (or, with ``append``, extend) the signature of an open thinking block."""
        block = self._open[index]
        block.thinking_signature = (block.thinking_signature or "") + signature if append else signature

    def thinking_end(self, index: int, thinking_signature: Optional[str] = None) -> AssistantMessageEvent:
        final = self._open.pop(index).final(thinking_signature)
        self.message.content[index] = final
        return AssistantMessageEvent("thinking_end", self.message, index, content=final.thinking)

    # -- tool calls ----------------------------------------------------------------------

    def toolcall_start(self, id: str, name: str, thought_signature: Optional[str] = None) -> AssistantMessageEvent:
        return self._open_block(_StreamingToolCall(id, name, thought_signature), "toolcall_start")

    def tool_call(self, index: int) -> ToolCall:
        """The open tool-call block at ``index`` (to fill in an id or name that arrives late)."""
        block: ToolCall = self._open[index]
        return block

    def toolcall_delta(self, index: int, delta: str) -> AssistantMessageEvent:
        self._open[index]._json.feed(delta)
        return AssistantMessageEvent("toolcall_delta", self.message, index, delta)

    def toolcall_end(self, index: int, arguments: Optional[dict[str, Any]] = None) -> AssistantMessageEvent:
        """Close a tool call; ``arguments`` overrides the parsed JSON (for APIs that send objects)."""
        final = self._open.pop(index).final(arguments)
        self.message.content[index] = final
        return AssistantMessageEvent("toolcall_end", self.message, index, tool_call=final)

    # -- endings -------------------------------------------------------------------------

    @property
    def open_indices(self) -> list[int]:
        return sorted(self._open)

    def end_block(self, index: int) -> AssistantMessageEvent:
        """Close whatever kind of block is open at ``index``."""
        block = self._open[index]
        if isinstance(block, _StreamingText):
            return self.text_end(index)
        if isinstance(block, _StreamingThinking):
            return self.thinking_end(index)
        return self.toolcall_end(index)

    def end_all(self) -> Iterator[AssistantMessageEvent]:
        """Close every open block, in content order."""
        for index in self.open_indices:
            yield self.end_block(index)

    def done(self, reason: StopReason = "stop") -> AssistantMessageEvent:
        """The terminal ``done`` event; ``reason`` is stop, length or toolUse. Blocks must be closed."""
        self._freeze_open_blocks()
        self.message.stop_reason = reason
        return AssistantMessageEvent("done", reason=reason, message=self.message)

    def error(self, error_message: str, aborted: bool = False) -> AssistantMessageEvent:
        """The terminal ``error`` event; partial content and usage are kept, scratch state dropped."""
        self._freeze_open_blocks()
        reason: StopReason = "aborted" if aborted else "error"
        self.message.stop_reason = reason
        self.message.error_message = error_message
        return AssistantMessageEvent("error", reason=reason, error=self.message)

    def _freeze_open_blocks(self) -> None:
        for index, block in self._open.items():
            self.message.content[index] = block.final()
        self._open.clear()
