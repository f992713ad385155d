"""A remote run's intent journal (docs/effects.md#remote-runs): the agent's session, then Redis.

The session (if any) stores the intents first; then one Lua script stores them in the run's
``intents`` hash and uses up the calls' kept approvals. A call's approval is thus still kept
only while no intent of it is stored anywhere (it never started: a resumed run runs it without
asking again); once an intent is stored, recovery follows the tool's policy.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Callable, Optional

import redis

from .._effects import IntentJournal, ToolIntent
from ._keys import RUN_TTL_MS, RunKeys, redis_errors
from ._scripts import RECORD_INTENTS

__all__ = ["RemoteIntents"]


class RemoteIntents:
    """The intents of run ``keys.run_id`` in Redis, and in ``session`` (an IntentJournal) if given."""

    def __init__(
        self,
        client: redis.Redis,
        keys: RunKeys,
        session: Optional[IntentJournal],
        on_lost: Callable[[BaseException], None],
    ) -> None:
        self._client = client
        self._keys = keys
        self._session = session
        self._on_lost = on_lost  # Redis failed under a write: the run stops, as for any lost write
        self._record = client.register_script(RECORD_INTENTS)

    @property
    def scope(self) -> str:
        return self._session.scope if self._session is not None else self._keys.run_id

    def record_intents(self, intents: Sequence[ToolIntent]) -> None:
        if self._session is not None:  # first: a crash before Redis's step leaves the approval kept
            self._session.record_intents(intents)
        ids = [intent.tool_call_id for intent in intents]
        try:
            with redis_errors(f"recording the intents of tool calls {ids} of run {self._keys.run_id!r}"):
                self._record(
                    keys=[self._keys.intents, *(self._keys.approved(call_id) for call_id in ids)],
                    args=[
                        RUN_TTL_MS,
                        *(value for intent in intents for value in (intent.tool_call_id, json.dumps(intent.to_dict()))),
                    ],
                )
        except Exception as exc:  # the calls do not run (their error results), and the run ends: Redis is gone
            self._on_lost(exc.__cause__ or exc)
            raise

    def intents(self) -> dict[str, ToolIntent]:
        with redis_errors(f"reading the intents of run {self._keys.run_id!r}"):
            stored: dict[str, Any] = self._client.hgetall(self._keys.intents)  # type: ignore[assignment]
        found: dict[str, ToolIntent] = {}
        for raw in stored.values():
            try:
                intent = ToolIntent.from_dict(json.loads(raw))
            except (ValueError, TypeError):
                intent = None
            if intent is not None:
                found[intent.tool_call_id] = intent
        if self._session is not None:
            found.update(self._session.intents())
        return found

    def resumable(self, call_ids: Sequence[str]) -> set[str]:
        """The calls among ``call_ids`` with an approval kept for them (taken, never used)."""
        with redis_errors(f"reading the kept approvals of run {self._keys.run_id!r}"):
            return {call_id for call_id in call_ids if self._client.exists(self._keys.approved(call_id))}
