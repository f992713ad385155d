"""The model's context from a branch of a session, and pi's own message roles.

:func:`build_context` walks a branch from its root to its leaf the way pi does
(docs/sessions.md#the-context-of-a-branch). :class:`StoredMessage` carries every message role
piagent does not model (``bashExecution``, ``custom``, ``branchSummary``,
``compactionSummary`` or any other) as pi's dict, unchanged; :func:`convert_to_llm` turns them
into user messages the way pi does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from ..ai.types import TextContent, UserMessage, content_from_dict, message_from_dict
from ..compaction import SUMMARY_PREFIX, SUMMARY_SUFFIX
from ..exceptions import InvalidTypeError, InvalidValueError, SessionFormatError
from ..state import is_placeholder
from ._format import iso_to_ms

__all__ = [
    "SYSTEM_PROMPT_TYPE",
    "SessionContext",
    "StoredMessage",
    "branch_settings",
    "build_context",
    "context_entry_ids",
    "convert_to_llm",
    "message_to_record",
]

LLM_ROLES = ("system", "user", "assistant", "toolResult")
BRANCH_PREFIX = "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
BRANCH_SUFFIX = "</summary>"
#: The ``customType`` of the ``custom`` entry recording an agent's system prompt, ``data: {"content": ...}``
#: (docs/sessions.md#agents): pi keeps a custom entry and gives the model nothing from it.
SYSTEM_PROMPT_TYPE = "piagent.system_prompt"


class StoredMessage:
    """A message of a role piagent does not model, kept as pi's dict (``data``) and written back as is.

    It has a ``role`` (so an :class:`~piagent.Agent` keeps it in its transcript) and a
    ``timestamp``; :func:`convert_to_llm` decides what the model sees of it.
    """

    __slots__ = ("data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        if not isinstance(data.get("role"), str):
            raise InvalidValueError("a stored message needs a string 'role'")
        self.data = dict(data)

    @property
    def role(self) -> str:
        return str(self.data["role"])

    @property
    def timestamp(self) -> int:
        stamp = self.data.get("timestamp")
        return stamp if isinstance(stamp, int) else 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StoredMessage) and other.data == self.data

    def __repr__(self) -> str:
        return f"StoredMessage(role={self.role!r})"


@dataclass
class SessionContext:
    """What a branch gives an agent: its messages, and the model, thinking level and system prompt it recorded.

    ``model`` is ``(provider, model_id)`` from the branch's last ``model_change`` entry or
    assistant message (the placeholder ``unknown:unknown`` names none); ``thinking_level`` is
    from its last ``thinking_level_change`` entry; ``system_prompt`` from its last ``custom``
    entry of type :data:`SYSTEM_PROMPT_TYPE`.
    Each is None when the branch records none. ``leads_with_system_message``: the branch's
    messages start with a system message (pi 1.6), which then records the prompt instead.
    """

    messages: list[Any] = field(default_factory=list)
    model: Optional[tuple[str, str]] = None
    thinking_level: Optional[str] = None
    system_prompt: Optional[str] = None
    leads_with_system_message: bool = False


def message_from_record(data: Any, entry_id: str) -> Any:
    """A ``message`` entry's message: a piagent message for the LLM roles, else a :class:`StoredMessage`."""
    if not isinstance(data, dict) or not isinstance(data.get("role"), str):
        raise SessionFormatError(f"entry {entry_id}: a message entry needs a 'message' object with a string 'role'")
    if data["role"] not in LLM_ROLES:
        return StoredMessage(data)
    if data["role"] == "system" and data.get("content") is None:  # as pi reads a hand-edited file
        data = {**data, "content": ""}
    try:
        return message_from_dict(data)
    except (TypeError, ValueError) as exc:
        raise SessionFormatError(f"entry {entry_id}: {exc}") from None


def message_to_record(message: Any) -> dict[str, Any]:
    """The dict a ``message`` entry stores for ``message`` (its ``to_dict()``)."""
    to_dict = getattr(message, "to_dict", None)
    if not callable(to_dict):
        raise InvalidTypeError(
            f"cannot store a {type(message).__name__} in a session: give it a to_dict() method returning "
            "its JSON form with a 'role' (see docs/sessions.md#messages)"
        )
    record = to_dict()
    if not isinstance(record, dict) or not isinstance(record.get("role"), str):
        raise InvalidTypeError(f"{type(message).__name__}.to_dict() must return a dict with a string 'role'")
    return record


def _custom(entry: Mapping[str, Any]) -> StoredMessage:
    return StoredMessage(
        {
            "role": "custom",
            "customType": entry.get("customType"),
            "content": entry.get("content", ""),
            "display": entry.get("display", True),
            "details": entry.get("details"),
            "timestamp": iso_to_ms(entry.get("timestamp")),
        }
    )


def _context_message(entry: Mapping[str, Any]) -> Optional[Any]:
    kind = entry.get("type")
    if kind == "message":
        return message_from_record(entry.get("message"), str(entry.get("id")))
    if kind == "custom_message":
        return _custom(entry)
    if kind == "branch_summary" and entry.get("summary"):
        return StoredMessage(
            {
                "role": "branchSummary",
                "summary": entry["summary"],
                "fromId": entry.get("fromId"),
                "timestamp": iso_to_ms(entry.get("timestamp")),
            }
        )
    return None


def branch_settings(path: Sequence[Mapping[str, Any]]) -> SessionContext:
    """The model, thinking level and system prompt a branch recorded (no messages): its last record of each."""
    context = SessionContext()
    leading: Optional[bool] = None  # whether the context's first message is a system message, once known
    for entry in path:
        kind = entry.get("type")
        if kind == "compaction":  # the last one's recorded system message, or its summary, leads
            leading = isinstance(entry.get("systemMessage"), dict)
        elif leading is None and _gives_message(entry):
            leading = _is_system_entry(entry)
        if kind == "thinking_level_change" and isinstance(entry.get("thinkingLevel"), str):
            context.thinking_level = entry["thinkingLevel"]
        elif kind == "custom" and entry.get("customType") == SYSTEM_PROMPT_TYPE:
            data = entry.get("data")
            if isinstance(data, dict) and isinstance(data.get("content"), str):
                context.system_prompt = data["content"]
        elif kind == "model_change":
            context.model = _named_model(context.model, str(entry.get("provider", "")), str(entry.get("modelId", "")))
        elif kind == "message":
            message = entry.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                context.model = _named_model(
                    context.model, str(message.get("provider", "")), str(message.get("model", ""))
                )
    context.leads_with_system_message = bool(leading)
    return context


def _named_model(current: Optional[tuple[str, str]], provider: str, model_id: str) -> Optional[tuple[str, str]]:
    """The branch's model after a record naming ``provider:model_id``: the placeholder (a run of an agent
    given no model, or an older piagent's record of it) names none, so the model named before stays."""
    return current if is_placeholder(provider, model_id) else (provider, model_id)


def build_context(path: Sequence[Mapping[str, Any]]) -> SessionContext:
    """The context of a branch, given as its entries from the root to the leaf.

    With a ``compaction`` on the branch, the last one wins: its summary comes first (after the
    system message it recorded, pi 1.6), then the entries from its ``firstKeptEntryId`` up to
    it (system messages left out: the recorded one replays them), then the entries after it. Messages,
    ``custom_message`` and ``branch_summary`` entries give messages; every other entry type
    gives none.
    """
    context = branch_settings(path)
    context.messages = [message for _, message in _context_entries(path)]
    return context


def context_entry_ids(path: Sequence[Mapping[str, Any]]) -> list[str]:
    """The id of the entry each message of :func:`build_context`'s messages comes from (a
    compaction's summary and system message: the compaction's)."""
    return [entry_id for entry_id, _ in _context_entries(path)]


def _context_entries(path: Sequence[Mapping[str, Any]]) -> list[tuple[str, Any]]:
    compaction_at = next((i for i in range(len(path) - 1, -1, -1) if path[i].get("type") == "compaction"), None)
    found: list[tuple[str, Any]] = []
    selected: Sequence[Mapping[str, Any]] = path
    if compaction_at is not None:
        compaction = path[compaction_at]
        compaction_id = str(compaction.get("id"))
        if isinstance(compaction.get("systemMessage"), dict):  # pi 1.6: the prompt replayed when compacted
            found.append((compaction_id, message_from_record(compaction["systemMessage"], compaction_id)))
        summary = {
            "role": "compactionSummary",
            "summary": compaction.get("summary", ""),
            "tokensBefore": compaction.get("tokensBefore", 0),
            "timestamp": iso_to_ms(compaction.get("timestamp")),
        }
        found.append((compaction_id, StoredMessage(summary)))
        first_kept = compaction.get("firstKeptEntryId")
        before = path[:compaction_at]
        kept_from = next((i for i, entry in enumerate(before) if entry.get("id") == first_kept), len(before))
        kept = [e for e in before[kept_from:] if not _is_system_entry(e)]  # the compaction carries them
        selected = kept + list(path[compaction_at + 1 :])
    for entry in selected:
        message = _context_message(entry)
        if message is not None:
            found.append((str(entry.get("id")), message))
    return found


def _gives_message(entry: Mapping[str, Any]) -> bool:
    kind = entry.get("type")
    return kind in ("message", "custom_message") or (kind == "branch_summary" and bool(entry.get("summary")))


def _is_system_entry(entry: Mapping[str, Any]) -> bool:
    message = entry.get("message")
    return entry.get("type") == "message" and isinstance(message, dict) and message.get("role") == "system"


def _bash_text(data: Mapping[str, Any]) -> str:
    text = f"Ran `{data.get('command', '')}`\n"
    output = data.get("output")
    text += f"```\n{output}\n```" if output else "(no output)"
    exit_code = data.get("exitCode")
    if data.get("cancelled"):
        text += "\n\n(command cancelled)"
    elif exit_code is not None and exit_code != 0:
        text += f"\n\nCommand exited with code {exit_code}"
    if data.get("truncated") and data.get("fullOutputPath"):
        text += f"\n\n[Output truncated. Full output: {data['fullOutputPath']}]"
    return text


def _stored_to_llm(data: Mapping[str, Any]) -> Optional[UserMessage]:
    role, stamp = data.get("role"), data.get("timestamp")
    stamp_kw = {"timestamp": stamp} if isinstance(stamp, int) else {}
    if role == "bashExecution":
        if data.get("excludeFromContext"):
            return None
        return UserMessage([TextContent(_bash_text(data))], **stamp_kw)
    if role == "custom":
        content = data.get("content", "")
        blocks = [TextContent(content)] if isinstance(content, str) else [content_from_dict(b) for b in content]
        return UserMessage(blocks, **stamp_kw)
    if role == "branchSummary":
        return UserMessage([TextContent(BRANCH_PREFIX + str(data.get("summary", "")) + BRANCH_SUFFIX)], **stamp_kw)
    if role == "compactionSummary":
        text = SUMMARY_PREFIX + str(data.get("summary", "")) + SUMMARY_SUFFIX
        return UserMessage([TextContent(text)], **stamp_kw)
    return None


def convert_to_llm(messages: Sequence[Any]) -> list[Any]:
    """pi's conversion for the model: LLM roles as they are, pi's own roles as user messages.

    ``bashExecution`` becomes the command and its output (unless ``excludeFromContext``),
    ``custom`` its content, ``branchSummary`` and ``compactionSummary`` their summary wrapped
    in pi's wording. Any other role is left out, as with the agent's default conversion.
    """
    converted: list[Any] = []
    for message in messages:
        role = getattr(message, "role", None)
        if role in LLM_ROLES:
            converted.append(message)
        elif isinstance(message, StoredMessage):
            user = _stored_to_llm(message.data)
            if user is not None:
                converted.append(user)
    return converted
