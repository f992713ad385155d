"""``Session``: a session tree over any store, and the store protocol.

The store only keeps records (docs/sessions.md#stores); the session keeps the tree: the entry
index, the current leaf, labels, and builds the model's context from a branch.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from typing import Any, Callable, Optional

from typing_extensions import Protocol

from .._effects import INTENT_TYPE, ToolIntent
from ..exceptions import InvalidValueError, SessionError, SessionFormatError
from ._context import SessionContext, build_context, message_to_record
from ._format import check_header, make_header, migrate, new_entry_id, new_session_id, now_iso

__all__ = ["Session", "SessionStore"]

logger = logging.getLogger("piagent.sessions")

Record = dict[str, Any]


class SessionStore(Protocol):
    """Where a session's records live. Two methods; see docs/sessions.md#stores.

    ``load()`` returns every record stored, in the order they were appended, the header first,
    or ``[]`` when the session does not exist yet. Records are pi's JSON dicts, unchanged.

    ``append(header, entries)`` stores ``entries`` after the records already there. If the
    session does not exist yet, it is created with ``header`` first (an existing header is
    kept, ``header`` ignored). The call returns only once the records are durable, and
    concurrent appends (threads, processes) must be serialised: all of one call's records
    are stored together, never interleaved with another call's, and a record is either
    stored whole or not at all.

    Optional: ``claim_run()``, which claims the session for one agent run at once (raising
    :class:`SessionBusyError` while another run holds it) and returns the release, and
    ``changed()``, True if records were appended since the store's last ``load()`` or
    ``append()`` (docs/sessions.md#one-writer-at-a-time).
    """

    def load(self) -> list[Record]: ...

    def append(self, header: Record, entries: Sequence[Record]) -> None: ...


def _nothing() -> None:
    pass


class Session:
    """A session: a tree of entries in a store, with a current leaf (the branch being continued).

    ``entries()`` lists every entry; ``messages()`` gives the current branch's context as
    piagent messages; each ``append_*`` adds an entry as a child of the leaf and makes it the
    leaf; ``fork(entry_id)`` moves the leaf back to an earlier entry (the old branch stays).
    Safe to use from several threads; one :class:`~piagent.Agent` may be attached to it.
    """

    def __init__(self, store: SessionStore, *, session_id: Optional[str] = None, cwd: Optional[str] = None) -> None:
        self._store = store
        self._lock = threading.RLock()
        self._agent: Any = None
        self._entries: list[Record] = []
        self._by_id: dict[str, Record] = {}
        self._labels: dict[str, str] = {}
        self._leaf: Optional[str] = None
        records = store.load()
        if records:
            self._header = check_header(records, repr(store))
            migrate(records)
            for entry in records[1:]:
                self._index(entry)
            self._check_parents()
        else:
            self._header = make_header(session_id or new_session_id(), cwd or os.getcwd())

    # -- reading ---------------------------------------------------------------------------

    @property
    def id(self) -> str:
        return str(self._header["id"])

    @property
    def header(self) -> Record:
        """A copy of the header record."""
        return dict(self._header)

    @property
    def store(self) -> SessionStore:
        return self._store

    @property
    def leaf_id(self) -> Optional[str]:
        """The entry the next append will follow (None: the next entry starts a new root)."""
        return self._leaf

    @property
    def name(self) -> Optional[str]:
        """The display name of the latest ``session_info`` entry, if any."""
        with self._lock:
            for entry in reversed(self._entries):
                if entry.get("type") == "session_info":
                    name = entry.get("name")
                    return name.strip() or None if isinstance(name, str) else None
        return None

    def entries(self) -> list[Record]:
        """Every entry (not the header) in append order, as pi's dicts in version 3. Treat them as read-only."""
        with self._lock:
            return list(self._entries)

    def entry(self, entry_id: str) -> Record:
        with self._lock:
            return self._get(entry_id)

    def branch(self, leaf_id: Optional[str] = None) -> list[Record]:
        """The entries from the root to ``leaf_id`` (default: the current leaf), every type included."""
        with self._lock:
            start = self._leaf if leaf_id is None else self._get(leaf_id)["id"]
            path: list[Record] = []
            seen: set[str] = set()
            current = self._by_id.get(start) if start is not None else None
            while current is not None:
                if current["id"] in seen:
                    raise SessionFormatError(f"{self._store!r}: entry {current['id']} is its own ancestor")
                seen.add(current["id"])
                path.append(current)
                parent = current.get("parentId")
                current = self._by_id.get(parent) if parent is not None else None
            path.reverse()
            return path

    def branches(self) -> list[str]:
        """The id of every leaf (an entry no other entry follows), in append order."""
        with self._lock:
            parents = {entry.get("parentId") for entry in self._entries}
            return [entry["id"] for entry in self._entries if entry["id"] not in parents]

    def context(self, leaf_id: Optional[str] = None) -> SessionContext:
        """The branch's messages (compaction applied) and the model and thinking level it recorded."""
        return build_context(self.branch(leaf_id))

    def messages(self, leaf_id: Optional[str] = None) -> list[Any]:
        """The current branch's context as piagent messages (see docs/sessions.md#the-context-of-a-branch)."""
        return self.context(leaf_id).messages

    def labels(self) -> dict[str, str]:
        """Entry id -> label, for every labelled entry."""
        with self._lock:
            return dict(self._labels)

    # -- writing ---------------------------------------------------------------------------

    def fork(self, entry_id: Optional[str]) -> None:
        """Continue from ``entry_id`` (None: from before the first entry): the next entry follows it.

        Nothing is written until that next entry; the branch the leaf leaves stays as it is.
        """
        with self._lock:
            self._leaf = None if entry_id is None else self._get(entry_id)["id"]

    def append_message(self, message: Any) -> str:
        """Store a message (its ``to_dict()``) as a ``message`` entry; returns the entry's id."""
        return self.append_entry("message", message=message_to_record(message))

    def append_model_change(self, provider: str, model_id: str) -> str:
        return self.append_entry("model_change", provider=provider, modelId=model_id)

    def append_thinking_level_change(self, thinking_level: str) -> str:
        return self.append_entry("thinking_level_change", thinkingLevel=thinking_level)

    def set_label(self, entry_id: str, label: Optional[str]) -> str:
        """Label an entry (None or "" clears its label) with a ``label`` entry; returns its id."""
        with self._lock:
            self._get(entry_id)
            fields: dict[str, Any] = {"targetId": entry_id}
            if label:
                fields["label"] = label
            return self.append_entry("label", **fields)

    def append_entry(self, type: str, **fields: Any) -> str:
        """Append an entry of any type (``compaction``, ``custom``, ``session_info``, ...) with pi's field names."""
        if not isinstance(type, str) or not type or type == "session":
            raise InvalidValueError(f"an entry type must be a non-empty string other than 'session', got {type!r}")
        reserved = {"type", "id", "parentId", "timestamp"} & set(fields)
        if reserved:
            raise InvalidValueError(f"{sorted(reserved)} are set by the session, not given")
        return self._append([{"type": type, **fields}])[0]

    def _append(self, records: Sequence[Record]) -> list[str]:
        """Append ``records`` (their type and fields) as a chain from the leaf, in one durable store append."""
        with self._lock:
            entries: list[Record] = []
            given: set[str] = set()  # by this append, not indexed yet (the session's ids are not copied: O(1))
            parent = self._leaf
            for record in records:
                entry_id = new_entry_id(self._by_id, given)
                given.add(entry_id)
                entries.append({"type": record["type"], "id": entry_id, "parentId": parent, "timestamp": now_iso()})
                entries[-1].update(record)  # its type again, then its fields: pi's key order
                parent = entry_id
            self._store.append(self._header, entries)  # durable before the session shows them
            for entry in entries:
                self._index(entry)
            return [entry["id"] for entry in entries]

    # -- intents (docs/effects.md) ---------------------------------------------------------

    @property
    def scope(self) -> str:
        """The prefix of the idempotency keys of this session's tool calls: its id."""
        return self.id

    def record_intents(self, intents: Sequence[ToolIntent]) -> None:
        """Store tool call intents as ``custom`` entries (customType ``piagent.tool_intent``,
        which pi ignores), all in one durable append; raises when the store cannot."""
        self._append([{"type": "custom", "customType": INTENT_TYPE, "data": intent.to_dict()} for intent in intents])

    def intents(self) -> dict[str, ToolIntent]:
        """The intents recorded on the current branch, by tool call id (the latest wins)."""
        found: dict[str, ToolIntent] = {}
        for entry in self.branch():
            if entry.get("type") == "custom" and entry.get("customType") == INTENT_TYPE:
                intent = ToolIntent.from_dict(entry.get("data"))
                if intent is not None:
                    found[intent.tool_call_id] = intent
        return found

    # -- agents ----------------------------------------------------------------------------

    def attach(self, agent: Any, *, model_given: bool = True, thinking_level_given: bool = True) -> None:
        """Start ``agent`` from the current branch and record its messages from now on.

        :class:`~piagent.Agent` calls this for ``Agent(session=...)``; see
        docs/sessions.md#agents.
        """
        from ._agent import attach

        with self._lock:
            if self._agent is not None and self._agent is not agent:
                raise SessionError(
                    f"{self._store!r} is already recording another agent; open a second session object "
                    "for a second agent (each then writes its own branch)"
                )
            record = attach(self, agent, model_given=model_given, thinking_level_given=thinking_level_given)
            self._agent = agent
        # outside the session's lock: a run takes the agent's lock, then the session's (begin_run), never the reverse
        agent.subscribe(record)

    def begin_run(self) -> Callable[[], None]:
        """Claim the session for an agent run; returns the release. :class:`~piagent.Agent` calls it.

        Raises :class:`SessionBusyError` at once while another run holds the session (any
        thread or process, through the store's ``claim_run()``; a store without one is not
        guarded). Then entries other writers appended since this object last read the store are
        taken in; if the newest continues the leaf through them, the leaf moves to it and the
        attached agent's transcript becomes that branch: the run continues the conversation,
        never beside it. See docs/sessions.md#one-writer-at-a-time. An attached agent still
        without a model takes the branch's; :class:`ModelNotFoundError` (the claim released) when
        this process does not know it (docs/sessions.md#agents).
        """
        from ._agent import require_model

        claim = getattr(self._store, "claim_run", None)
        release: Callable[[], None] = claim() if callable(claim) else _nothing
        try:
            with self._lock:
                if self._catch_up() and self._agent is not None:
                    self._agent.state.messages = self.context().messages
                if self._agent is not None:
                    require_model(self, self._agent)
        except BaseException:
            release()
            raise
        return release

    def close(self) -> None:
        close = getattr(self._store, "close", None)
        if callable(close):
            close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} entries={len(self._entries)} store={self._store!r}>"

    # -- internals -------------------------------------------------------------------------

    def _get(self, entry_id: Any) -> Record:
        entry = self._by_id.get(entry_id) if isinstance(entry_id, str) else None
        if entry is None:
            raise InvalidValueError(f"no entry {entry_id!r} in session {self.id}")
        return entry

    def _index(self, entry: Record) -> None:
        entry_id, parent = entry.get("id"), entry.get("parentId")
        if not isinstance(entry_id, str) or not (parent is None or isinstance(parent, str)):
            raise SessionFormatError(
                f"{self._store!r}: entry {len(self._entries) + 1} needs a string 'id' and a string or null 'parentId'"
            )
        if entry_id in self._by_id:
            logger.warning("%r: entry id %s appears twice; the later entry wins", self._store, entry_id)
        self._entries.append(entry)
        self._by_id[entry_id] = entry
        self._leaf = entry_id
        if entry.get("type") == "label" and isinstance(entry.get("targetId"), str):
            label = entry.get("label")
            if isinstance(label, str) and label:
                self._labels[entry["targetId"]] = label
            else:
                self._labels.pop(entry["targetId"], None)

    def _catch_up(self) -> bool:
        """Index the entries other writers appended since this object read the store; True if the
        leaf moved to the newest of them: it continues the leaf through their entries only (not
        through an entry this object knew, which would undo a ``fork()``), or this object had none."""
        changed = getattr(self._store, "changed", None)
        if callable(changed) and not changed():
            return False  # the store knows nothing was appended: no need to read it
        records = self._store.load()
        if len(records) <= len(self._entries) + 1:
            return False  # nothing new (the store only grows)
        self._header = check_header(records, repr(self._store))
        migrate(records)
        leaf, known = self._leaf, set(self._by_id)
        for entry in records[1:]:
            if entry.get("id") not in known:  # theirs (ours may be interleaved with them)
                self._index(entry)
        if self._leaf == leaf:
            return False  # nothing of theirs
        path = [entry["id"] for entry in self.branch()]  # to the newest of theirs: _index moved the leaf
        follows = not known or (leaf in path and path[path.index(leaf) + 1] not in known)
        if not follows:
            self._leaf = leaf
        return follows

    def _check_parents(self) -> None:
        for entry in self._entries:
            parent = entry.get("parentId")
            if parent is not None and parent not in self._by_id:
                logger.warning(
                    "%r: entry %s follows %s, which is not in the session; its branch starts at it",
                    self._store,
                    entry["id"],
                    parent,
                )
