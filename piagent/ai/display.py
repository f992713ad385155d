"""HTML views of messages for notebooks: what Jupyter shows for a message (``_repr_html_``).

Small and safe: every piece of text from a user, a model or a tool is HTML-escaped (never
interpreted), long texts are cut, images are named rather than embedded.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable
from typing import Any

__all__ = ["MAX_CHARS", "message_html", "messages_html"]

MAX_CHARS = 2000
_BOX = "margin:2px 0;padding:4px 8px;border-left:3px solid {color};font-family:sans-serif;font-size:90%"
_TEXT = '<div style="white-space:pre-wrap">{}</div>'
_COLORS = {"user": "#4a90d9", "assistant": "#5aa95a", "toolResult": "#d9a04a", "error": "#d9534f"}


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CHARS else text[: MAX_CHARS - 1] + "…"


def _text(text: str) -> str:
    return _TEXT.format(html.escape(_cut(text)))


def _blocks(content: Any) -> list[str]:
    if isinstance(content, str):
        return [_text(content)] if content else []
    parts = []
    for block in content:
        kind = getattr(block, "type", "")
        if kind == "text" and block.text:
            parts.append(_text(block.text))
        elif kind == "thinking" and block.thinking:
            parts.append(f"<details><summary><i>thinking</i></summary>{_text(block.thinking)}</details>")
        elif kind == "image":
            parts.append(f"<i>[image {html.escape(block.mime_type)}]</i>")
        elif kind == "toolCall":
            args = json.dumps(block.arguments, ensure_ascii=False, default=str)
            parts.append(f"<div>→ <code>{html.escape(block.name)}({html.escape(_cut(args))})</code></div>")
    return parts


def _box(role: str, header: str, body: list[str]) -> str:
    style = _BOX.format(color=_COLORS.get(role, "#999"))
    return f'<div class="piagent-message" style="{style}"><b>{header}</b>{"".join(body)}</div>'


def message_html(message: Any) -> str:
    """One message (LLM or application message) as a small HTML block."""
    role = getattr(message, "role", "?")
    if role == "assistant":
        details = ", ".join(html.escape(str(x)) for x in (message.model, message.stop_reason) if x)
        body = _blocks(message.content)
        if message.error_message:
            body.append(f'<div style="color:{_COLORS["error"]}">{html.escape(_cut(message.error_message))}</div>')
        return _box(role, f"assistant <small>({details})</small>" if details else "assistant", body)
    if role == "toolResult":
        status = " <small>(error)</small>" if message.is_error else ""
        return _box(
            "error" if message.is_error else role,
            f"← {html.escape(message.tool_name)}{status}",
            _blocks(message.content),
        )
    content = getattr(message, "content", None)
    return _box(role, html.escape(str(role)), _blocks(content) if content is not None else [_text(repr(message))])


def messages_html(messages: Iterable[Any]) -> str:
    return "".join(message_html(m) for m in messages)
