"""ChatML prompts for in-process models, and tool calls written as ``<tool_call>`` blocks.

The llama-cpp provider renders a :class:`Context` itself (so tool calls and tool results are
part of the history, which llama.cpp's own templates drop) in the ChatML format small
instruct models such as SmolLM2 are trained on::

    <|im_start|>system
    {system prompt}

    {tool instructions and <tools>...</tools>}<|im_end|>
    <|im_start|>user
    {text}<|im_end|>
    <|im_start|>assistant
    {text}<tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call><|im_end|>
    <|im_start|>tool
    {tool result text}<|im_end|>
    <|im_start|>assistant

:class:`ToolCallSplitter` finds where a ``<tool_call>`` block opens in streamed model output,
holding back only the few characters that could still start the opening tag.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Optional

from ..types import AssistantMessage, Context, TextContent, Tool, ToolCall, ToolResultMessage, UserMessage

__all__ = [
    "END",
    "START",
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "ToolCallSplitter",
    "forced_call_prefix",
    "format_tool_call",
    "render_prompt",
]

START = "<|im_start|>"
END = "<|im_end|>"
TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"

_TOOL_INSTRUCTIONS = (
    "You can call the tools listed below. To call one, answer with only\n"
    + TOOL_CALL_OPEN
    + '\n{"name": <tool name>, "arguments": <arguments object>}\n'
    + TOOL_CALL_CLOSE
)


def _turn(role: str, text: str) -> str:
    return f"{START}{role}\n{text}{END}\n"


def _user_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        parts.append(block.text if block.type == "text" else f"[{block.type}]")
    return "\n".join(parts)


def format_tool_call(call: ToolCall) -> str:
    body = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
    return f"{TOOL_CALL_OPEN}\n{body}\n{TOOL_CALL_CLOSE}"


def _tools_block(tools: Iterable[Tool]) -> str:
    lines = [
        json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters}, ensure_ascii=False)
        for t in tools
    ]
    return _TOOL_INSTRUCTIONS + "\n<tools>\n" + "\n".join(lines) + "\n</tools>"


def render_prompt(context: Context, show_tools: bool = True) -> str:
    """The whole conversation as ChatML, ending with an open assistant turn.

    ``show_tools``: describe ``context.tools`` in the system turn (False for tool_choice "none").
    Thinking blocks are dropped; images become an ``[image]`` placeholder.
    """
    system = context.system_prompt or ""
    if show_tools and context.tools:
        system = (system + "\n\n" if system else "") + _tools_block(context.tools)
    out: list[str] = [_turn("system", system)] if system else []
    for message in context.messages:
        if isinstance(message, UserMessage):
            out.append(_turn("user", _user_text(message.content)))
        elif isinstance(message, AssistantMessage):
            parts = [b.text for b in message.content if isinstance(b, TextContent) and b.text]
            parts += [format_tool_call(b) for b in message.tool_calls]
            out.append(_turn("assistant", "".join(parts)))
        elif isinstance(message, ToolResultMessage):
            out.append(_turn("tool", _user_text(message.content)))
    out.append(f"{START}assistant\n")
    return "".join(out)


def forced_call_prefix(name: Optional[str] = None) -> str:
    """The text a forced tool call starts with: up to the tool name, or its arguments with ``name``
    (it never ends with a space: the tokenizer joins a space to the word after it, so a prompt
    ending with one starts the model off a token it never saw)."""
    head = TOOL_CALL_OPEN + '\n{"name": "'
    return head if name is None else head + name + '", "arguments":'


class ToolCallSplitter:
    """Feed streamed text; get back the text that is safe to show now.

    Once ``<tool_call>`` appears, :attr:`in_call` is True and nothing more is returned (the
    call itself is written under a grammar). Text that might be the start of the tag is held
    back until it is clearly not.
    """

    def __init__(self) -> None:
        self._held = ""
        self.in_call = False

    def feed(self, delta: str) -> str:
        if self.in_call:
            return ""
        text = self._held + delta
        start = text.find(TOOL_CALL_OPEN)
        if start >= 0:
            self.in_call = True
            self._held = ""
            return text[:start]
        keep = 0
        for size in range(min(len(text), len(TOOL_CALL_OPEN) - 1), 0, -1):
            if TOOL_CALL_OPEN.startswith(text[-size:]):
                keep = size
                break
        self._held = text[len(text) - keep :] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """The held-back text, at the end of the output (it was not a tag after all)."""
        held, self._held = self._held, ""
        return held
