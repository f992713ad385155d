"""Provider-side history normalisation, run by every provider before it builds a request
(docs/llm.md#history-normalisation).

:func:`transform_messages` returns a new list and never mutates the messages it is given
(unchanged messages are passed through as the same objects):

* assistant messages with ``stop_reason`` ``error`` or ``aborted`` are dropped, so a retry
  continues from the last valid state;
* a tool call left without a result before the next assistant or user message (or at the end)
  gets a synthetic :class:`ToolResultMessage` "No result provided" with ``is_error=True``; a
  system message between a call and its results goes after them;
* an assistant message produced by another model (``provider``, ``api`` or ``model`` differ)
  loses what only its producer can read: thinking becomes plain text (empty and redacted
  thinking is dropped), text and thought signatures are removed, and tool-call ids go through
  ``normalize_tool_call_id`` when given (the matching tool results are re-mapped);
* images sent to a model whose ``input`` lacks ``"image"`` become a text placeholder;
  consecutive images collapse into one placeholder.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Callable, Optional

from .types import AssistantMessage, Model, SystemMessage, TextContent, ThinkingContent, ToolCall, ToolResultMessage

__all__ = ["IMAGE_PLACEHOLDER", "NO_RESULT_TEXT", "NormalizeToolCallId", "transform_messages"]

NO_RESULT_TEXT = "No result provided"
IMAGE_PLACEHOLDER = "[image omitted: this model does not accept images]"

#: ``(tool_call_id, target_model, source_message) -> id the target API accepts``
NormalizeToolCallId = Callable[[str, Model, AssistantMessage], str]


def is_same_model(message: AssistantMessage, model: Model) -> bool:
    """True when ``model`` produced ``message`` (same provider, api and model id)."""
    return message.provider == model.provider and message.api == model.api and message.model == model.id


def transform_messages(
    messages: Sequence[Any],
    model: Model,
    normalize_tool_call_id: Optional[NormalizeToolCallId] = None,
) -> list[Any]:
    """The history ``model`` should see; see the module docstring for the rules."""
    id_map: dict[str, str] = {}
    vision = "image" in (model.input or [])
    converted: list[Any] = []
    for message in messages:
        role = getattr(message, "role", None)
        if role == "assistant":
            converted.append(_foreign_assistant(message, model, normalize_tool_call_id, id_map))
        elif role == "toolResult":
            new_id = id_map.get(message.tool_call_id)
            if new_id is not None and new_id != message.tool_call_id:
                message = dataclasses.replace(message, tool_call_id=new_id)
            converted.append(message if vision else _without_images(message))
        elif role == "user":
            converted.append(message if vision else _without_images(message))
        else:
            converted.append(message)
    return _with_results_for_every_call(converted)


def _foreign_assistant(
    message: AssistantMessage,
    model: Model,
    normalize: Optional[NormalizeToolCallId],
    id_map: dict[str, str],
) -> AssistantMessage:
    if is_same_model(message, model):
        return message
    content: list[Any] = []
    for block in message.content:
        if isinstance(block, ThinkingContent):
            if block.redacted or not block.thinking.strip():
                continue
            content.append(TextContent(block.thinking))
        elif isinstance(block, TextContent):
            content.append(TextContent(block.text) if block.text_signature else block)
        elif isinstance(block, ToolCall):
            new_id = normalize(block.id, model, message) if normalize is not None else block.id
            if new_id != block.id:
                id_map[block.id] = new_id
            if new_id != block.id or block.thought_signature:
                block = ToolCall(new_id, block.name, block.arguments)
            content.append(block)
        else:
            content.append(block)
    return dataclasses.replace(message, content=content)


def _without_images(message: Any) -> Any:
    content = message.content
    if isinstance(content, str) or not any(block.type == "image" for block in content):
        return message
    blocks: list[Any] = []
    for block in content:
        if block.type != "image":
            blocks.append(block)
        elif not (blocks and blocks[-1].type == "text" and blocks[-1].text == IMAGE_PLACEHOLDER):
            blocks.append(TextContent(IMAGE_PLACEHOLDER))
    return dataclasses.replace(message, content=blocks)


def _with_results_for_every_call(messages: list[Any]) -> list[Any]:
    """A result for every tool call; a system message among a call and its results (pi 1.6) is
    held back until after them, the synthetic ones included, so nothing comes between."""
    out: list[Any] = []
    pending: list[ToolCall] = []
    answered: set = set()
    held: list[Any] = []

    def flush() -> None:
        for call in pending:
            if call.id not in answered:
                out.append(ToolResultMessage(call.id, call.name, [TextContent(NO_RESULT_TEXT)], is_error=True))
        pending.clear()
        answered.clear()
        out.extend(held)
        held.clear()

    for message in messages:
        role = getattr(message, "role", None)
        if role == "assistant":
            flush()
            if message.stop_reason in ("error", "aborted"):
                continue
            pending.extend(block for block in message.content if block.type == "toolCall")
            out.append(message)
        elif role == "toolResult":
            answered.add(message.tool_call_id)
            out.append(message)
        elif role == "user":
            flush()
            out.append(message)
        elif pending and isinstance(message, SystemMessage):
            held.append(message)
        else:
            out.append(message)
    flush()
    return out
