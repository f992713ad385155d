"""System messages in the transcript (pi 1.6): replaying them, and folding them for a request.

A transcript may carry the system prompt and the tool declarations as
:class:`~piagent.ai.types.SystemMessage` s (docs/llm.md#system-messages). The leading one is the
prompt; a later one adds instructions, replaces named sections and declares tools that become
available or stop being available. Replaying them in order gives the current prompt and tools.

A transcript without system messages is left exactly as it is by every function here.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Optional

from .types import Context, SystemMessage, Tool

__all__ = [
    "collapse_system_messages",
    "current_system_message",
    "current_system_prompt",
    "current_tools",
    "has_system_messages",
    "initial_system_message",
    "is_system_message",
    "leads_with_system_message",
    "render_system_message_update",
    "resolve_transcript",
    "system_message_text",
    "take_leading_system_message",
    "to_tool_declaration",
    "tool_state_changes",
]


def is_system_message(message: Any) -> bool:
    """A :class:`SystemMessage` (an application message with role "system" is not one)."""
    return isinstance(message, SystemMessage)


def has_system_messages(messages: Sequence[Any]) -> bool:
    return any(isinstance(m, SystemMessage) for m in messages)


def to_tool_declaration(tool: Tool) -> Tool:
    """What the model sees of a tool (an ``AgentTool`` loses ``execute`` and the rest)."""
    return Tool(tool.name, tool.description, copy.deepcopy(tool.parameters))


def initial_system_message(system_prompt: Optional[str], tools: Sequence[Tool] = ()) -> Optional[SystemMessage]:
    """The leading system message for a prompt and tools; None when both are empty."""
    if not system_prompt and not tools:
        return None
    added = [to_tool_declaration(t) for t in tools] or None
    return SystemMessage(system_prompt or "", tools_added=added, timestamp=0)


def leads_with_system_message(messages: Sequence[Any]) -> bool:
    return bool(messages) and isinstance(messages[0], SystemMessage)


def current_tools(messages: Sequence[Any]) -> list[Tool]:
    """The tools declared after applying every system message's changes, in order."""
    tools: dict[str, Tool] = {}
    for message in messages:
        if not isinstance(message, SystemMessage):
            continue
        for name in message.tools_removed or ():
            tools.pop(name, None)
        for tool in message.tools_added or ():
            tools[tool.name] = tool  # a redefinition keeps its place
    return list(tools.values())


def system_message_text(message: SystemMessage) -> str:
    """The prompt a system message gives: its content, then its sections in order."""
    parts = [message.text, *(text for text in (message.sections or {}).values() if text is not None)]
    return "\n\n".join(part for part in parts if part)


def render_system_message_update(message: SystemMessage) -> str:
    """A later system message as text, for an API that takes it in place: its content, then each
    section change named, so the model can relate it to the prompt (pi-ai 1.6's wording)."""
    parts = [message.text] if message.text else []
    for name, value in (message.sections or {}).items():
        parts.append(
            f'Removed system prompt section "{name}".'
            if value is None
            else f'Updated system prompt section "{name}":\n\n{value}'
        )
    return "\n\n".join(parts)


def current_system_message(messages: Sequence[Any]) -> Optional[SystemMessage]:
    """Every system message replayed into one: contents joined, sections patched by name, the
    current tools; None when the transcript declares neither a prompt nor a tool."""
    contents: list[str] = []
    sections: dict[str, Optional[str]] = {}
    timestamp: Optional[int] = None
    for message in messages:
        if not isinstance(message, SystemMessage):
            continue
        if timestamp is None:
            timestamp = message.timestamp
        if message.text:
            contents.append(message.text)
        for name, value in (message.sections or {}).items():
            if value is None:
                sections.pop(name, None)
            else:
                sections[name] = value
    tools = current_tools(messages)
    if timestamp is None and not tools:
        return None
    return SystemMessage(
        "\n\n".join(contents), sections or None, tools or None, timestamp=timestamp if timestamp is not None else 0
    )


def current_system_prompt(messages: Sequence[Any]) -> str:
    """The system prompt the transcript gives ("" when it has no system message)."""
    head = current_system_message(messages)
    return system_message_text(head) if head is not None else ""


def tool_state_changes(previous: Sequence[Tool], current: Sequence[Tool]) -> tuple[list[Tool], list[str]]:
    """``(added, removed)`` from one tool set to the next; a changed definition is both."""
    before = {t.name: to_tool_declaration(t) for t in previous}
    after = {t.name: to_tool_declaration(t) for t in current}
    added = [tool for name, tool in after.items() if before.get(name) != tool]
    removed = [name for name, tool in before.items() if after.get(name) != tool]
    return added, removed


def resolve_transcript(context: Context, in_place: bool, tool_changes: bool = False) -> Context:
    """The request context for a provider: folded (:func:`collapse_system_messages`), or, when the
    model takes system messages inside the conversation (``in_place``), with only the leading one
    folded into the system prompt, the request's tools the transcript's current ones, and the
    later ones left in place for the provider to render (:func:`render_system_message_update`).
    With ``tool_changes`` (a provider rendering tool changes in place for a model taking them) the
    leading one is kept instead, as the first message: the prompt and the tools declared before
    the conversation (:func:`take_leading_system_message`); the provider renders the rest."""
    if not has_system_messages(context.messages):
        return context
    if not in_place:
        return collapse_system_messages(context)
    head = initial_system_message(context.system_prompt, context.tools or ())
    lead: list[Any] = [head] if head is not None else []
    messages = list(context.messages)
    if isinstance(messages[0], SystemMessage):
        lead.append(messages.pop(0))
    replayed = current_system_message(lead)
    if tool_changes:
        return Context(None, [replayed or SystemMessage("", timestamp=0), *messages], None)
    prompt = system_message_text(replayed) if replayed is not None else ""
    return Context(prompt or None, messages, current_tools([*lead, *messages]) or None)


def take_leading_system_message(context: Context) -> tuple[Optional[SystemMessage], Context]:
    """For a provider rendering tool changes in place: the leading system message
    :func:`resolve_transcript` kept (None when the context does not lead with one), and the
    context with it folded into the system prompt and the tools it declares."""
    lead = context.messages[0] if context.messages else None
    if not isinstance(lead, SystemMessage):
        return None, context
    tools = list(lead.tools_added or []) or None
    return lead, Context(system_message_text(lead) or None, list(context.messages[1:]), tools)


def collapse_system_messages(context: Context) -> Context:
    """The request for an API without system messages inside the conversation (pi-ai 1.6's
    rendering for a model that does not declare support for them): the context's own prompt
    and tools lead, every system message is replayed into the system prompt and the tools, and
    only the other messages stay. A context without system messages is returned as it is."""
    if not has_system_messages(context.messages):
        return context
    head = initial_system_message(context.system_prompt, context.tools or ())
    replayed = current_system_message([head, *context.messages] if head is not None else context.messages)
    others: list[Any] = [m for m in context.messages if not isinstance(m, SystemMessage)]
    if replayed is None:
        return Context(None, others, None)
    return Context(system_message_text(replayed) or None, others, list(replayed.tools_added or []) or None)
