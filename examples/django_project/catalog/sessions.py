"""A piagent session store on the two models ``Conversation`` and ``ConversationEntry``.

The store protocol has two methods (docs/sessions.md#stores in the piagent repository):
``load()`` returns the header and the entries in order, ``append(header, entries)`` stores
entries after the others, creating the conversation first. Each append is one transaction
that locks the conversation's row, so appends from several workers are serialised. An append
made inside a caller's transaction is durable when that transaction commits.

    agent = Agent(model=..., session=conversation_session("support-42"))
"""

from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.db.models import Max

from piagent.sessions import Session

from .models import Conversation, ConversationEntry


class ConversationStore:
    def __init__(self, conversation_id: str) -> None:
        self.conversation_id = conversation_id

    def load(self) -> list:
        conversation = Conversation.objects.filter(pk=self.conversation_id).first()
        if conversation is None:
            return []
        entries = conversation.entries.order_by("position").values_list("entry", flat=True)
        return [conversation.header, *entries]

    def append(self, header: dict, entries: Sequence[dict]) -> None:
        with transaction.atomic():
            Conversation.objects.get_or_create(pk=self.conversation_id, defaults={"header": header})
            conversation = Conversation.objects.select_for_update().get(pk=self.conversation_id)  # one at a time
            last = conversation.entries.aggregate(last=Max("position"))["last"] or 0
            ConversationEntry.objects.bulk_create(
                ConversationEntry(conversation=conversation, position=last + n, entry_id=entry["id"], entry=entry)
                for n, entry in enumerate(entries, 1)
            )

    def __repr__(self) -> str:
        return f"conversation {self.conversation_id}"


def conversation_session(conversation_id: str, **options: Any) -> Session:
    """The session of a conversation, created by its first append."""
    return Session(ConversationStore(conversation_id), session_id=conversation_id, **options)
