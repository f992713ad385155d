"""The summary: the message that replaces the compacted part of a transcript, the prompts that
ask a model for it, and the conversation as the text those prompts show (docs/compaction.md#the-summary)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..ai.transcript import is_system_message
from ..ai.types import AssistantMessage, Context, Model, TextContent, Usage, UserMessage
from ..exceptions import CompactionError

__all__ = [
    "SUMMARY_PREFIX",
    "SUMMARY_SUFFIX",
    "CompactionSummary",
    "Summarizer",
    "is_summary",
    "serialize_conversation",
    "summarize",
    "summary_text",
]

#: How the model sees a compaction summary (pi's wording, which sessions written by pi carry too).
SUMMARY_PREFIX = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
SUMMARY_SUFFIX = "\n</summary>"

#: A tool result is cut to this many characters in the conversation shown to the summariser.
TOOL_RESULT_CHARS = 2000

#: ``summarizer(model, context) -> AssistantMessage``: one model call, on the run's stream
#: function, key and signal.
Summarizer = Callable[[Model, Context], AssistantMessage]


@dataclass
class CompactionSummary(UserMessage):
    """The message a compaction puts in place of what it summarised: a user message the model
    reads as the summary, carrying ``summary`` and ``tokens_before`` (a session stores it as
    pi's ``compaction`` entry, and gives it back as pi's ``compactionSummary`` message)."""

    summary: str = ""
    tokens_before: int = 0

    @classmethod
    def of(cls, summary: str, tokens_before: int) -> CompactionSummary:
        return cls(
            [TextContent(SUMMARY_PREFIX + summary + SUMMARY_SUFFIX)], summary=summary, tokens_before=tokens_before
        )


def is_summary(message: Any) -> bool:
    """A compaction summary: piagent's, or pi's ``compactionSummary`` read from a session."""
    return isinstance(message, CompactionSummary) or getattr(message, "role", None) == "compactionSummary"


def summary_text(message: Any) -> str:
    if isinstance(message, CompactionSummary):
        return message.summary
    data = getattr(message, "data", None)
    return str(data.get("summary", "")) if isinstance(data, dict) else ""


SYSTEM_PROMPT = (
    "You write context checkpoints. You read a conversation between a user and an AI assistant and "
    "write a structured summary of it in the format you are given. Never continue the conversation "
    "and never answer its questions: write only the summary."
)

_FORMAT = """## Goal
[{goal}]

## Constraints & Preferences
- [{constraints}]

## Progress
### Done
- [x] [{done}]

### In Progress
- [ ] [{in_progress}]

### Blocked
- [{blocked}]

## Key Decisions
- **[Decision]**: [{decisions}]

## Next Steps
1. [{next_steps}]

## Critical Context
- [{critical}]

Keep every section short. Keep file paths, function names and error messages exactly as written."""

INITIAL_PROMPT = (
    "Above is a conversation to summarise. Write a structured checkpoint another model will use to "
    "carry on the work, in exactly this format:\n\n"
    + _FORMAT.format(
        goal="What the user wants to achieve; several items if the conversation has several tasks",
        constraints='Constraints, preferences and requirements the user stated, or "(none)"',
        done="Tasks and changes completed",
        in_progress="Work under way",
        blocked="What prevents progress, if anything",
        decisions="Why it was decided",
        next_steps="What comes next, in order",
        critical='Data, examples and references needed to continue, or "(none)"',
    )
)

UPDATE_PROMPT = (
    "Above are the NEW messages of a conversation whose earlier part is summarised in <previous-summary>. "
    "Update that summary with them: keep everything it says that still holds, add the new progress, "
    'decisions and context, move finished items from "In Progress" to "Done", and revise "Next Steps". '
    "Use exactly this format:\n\n"
    + _FORMAT.format(
        goal="The goals so far, and new ones if the task grew",
        constraints="The constraints so far, and new ones",
        done="Items done before and items done now",
        in_progress="Current work",
        blocked="Current blockers; drop those resolved",
        decisions="Why it was decided (earlier decisions kept)",
        next_steps="What comes next, given what was done",
        critical="Context still needed, and new context",
    )
)

TURN_PREFIX_PROMPT = """Above is the beginning of a turn whose later messages are kept as they are.
Write a short checkpoint of it, to be placed before those later messages:

## Original Request
[What the user asked for]

## Progress So Far
- [Decisions taken and work done in these messages]

## Context Needed to Continue
- [What these messages say that the later ones need]

Summarise only what the messages above say; do not guess what came after."""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(block.text for block in content or () if getattr(block, "type", None) == "text")


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n\n[... {len(text) - limit} more characters left out]"


def serialize_conversation(messages: Sequence[Any]) -> str:
    """The messages as labelled text (``[User]:``, ``[Assistant]:``, ``[Assistant tool calls]:``,
    ``[Tool result]:``), so that the summariser reads a conversation instead of continuing one.
    Thinking is left out; tool results are cut to :data:`TOOL_RESULT_CHARS` characters."""
    parts: list[str] = []
    for message in messages:
        role = getattr(message, "role", None)
        if is_system_message(message):
            continue
        if role == "assistant":
            text = _text(message.content)
            if text:
                parts.append(f"[Assistant]: {text}")
            calls = [
                f"{call.name}({', '.join(f'{k}={json.dumps(v, default=str)}' for k, v in call.arguments.items())})"
                for call in message.tool_calls
            ]
            if calls:
                parts.append(f"[Assistant tool calls]: {'; '.join(calls)}")
        elif role == "toolResult":
            text = _text(message.content)
            if text:
                parts.append(f"[Tool result]: {_cut(text, TOOL_RESULT_CHARS)}")
        else:  # the user, and whatever else the model reads as the user (a session's own roles)
            data = getattr(message, "data", None)
            content = getattr(message, "content", None)
            if content is None and isinstance(data, dict):
                content = data.get("content") or data.get("summary")
            text = _text(content)
            if text:
                parts.append(f"[User]: {text}")
    return "\n\n".join(parts)


def _fit(conversation: str, limit: int) -> str:
    """At most ``limit`` characters: its beginning and its end, the middle left out."""
    if limit <= 0 or len(conversation) <= limit:
        return conversation
    head = limit // 3
    tail = limit - head
    left_out = len(conversation) - head - tail
    return f"{conversation[:head]}\n\n[... {left_out} characters left out ...]\n\n{conversation[-tail:]}"


def summarize(
    messages: Sequence[Any],
    model: Model,
    summarizer: Summarizer,
    *,
    previous: Optional[str] = None,
    turn_prefix: bool = False,
    instructions: Optional[str] = None,
    max_chars: int = 0,
) -> tuple[str, Usage]:
    """Ask ``model`` for the summary of ``messages`` (updating ``previous``, or of a turn's
    beginning with ``turn_prefix``); returns its text and usage. ``max_chars`` bounds the
    conversation shown (0: no bound). Raises :class:`CompactionError` when the answer failed or
    called a tool."""
    conversation = _fit(serialize_conversation(messages), max_chars)
    if turn_prefix:
        prompt = f"<conversation>\n{conversation}\n</conversation>\n\n{TURN_PREFIX_PROMPT}"
    else:
        prompt = f"<conversation>\n{conversation}\n</conversation>\n\n"
        if previous:
            prompt += f"<previous-summary>\n{previous}\n</previous-summary>\n\n"
        prompt += UPDATE_PROMPT if previous else INITIAL_PROMPT
    if instructions:
        prompt += f"\n\nAlso focus on: {instructions}"
    answer = summarizer(model, Context(SYSTEM_PROMPT, [UserMessage([TextContent(prompt)])]))
    if answer.stop_reason == "aborted":
        raise CompactionError("Compaction was aborted", aborted=True)
    if answer.stop_reason == "error":
        raise CompactionError(f"Summarization failed: {answer.error_message or 'unknown error'}")
    if answer.tool_calls:
        raise CompactionError("Summarization failed: the model called a tool instead of writing the summary")
    return answer.text.strip(), answer.usage
