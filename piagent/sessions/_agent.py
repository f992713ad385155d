"""How a session records an agent (docs/sessions.md#agents).

The agent starts from the session's current branch, with its model unless given one; a model this
process does not know is an error at the agent's first run (:func:`require_model`). A listener,
subscribed before any other, appends every message at its ``message_end``: listeners run on the
run thread before the loop goes on, so a message is durable before the next model call starts,
and a partial assistant message (``message_update``) is never written. At each ``agent_start`` the
agent's model, thinking level and system prompt are recorded when they differ from the branch's
(the prompt only while the branch does not lead with a system message, which records it then); the
placeholder model (an agent given none) is never recorded.
A compaction (``compaction_end`` with a result) is recorded as pi's ``compaction`` entry.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any, Callable, Optional

from ..ai.transcript import current_system_message
from ..exceptions import InvalidValueError, ModelNotFoundError
from ..state import PLACEHOLDER_API, is_placeholder
from ._context import SYSTEM_PROMPT_TYPE, branch_settings, context_entry_ids, convert_to_llm, message_to_record

if TYPE_CHECKING:
    from ._session import Session

__all__ = ["attach", "require_model"]

logger = logging.getLogger("piagent.sessions")


def attach(session: Session, agent: Any, *, model_given: bool, thinking_level_given: bool) -> Callable[[Any], None]:
    """Start ``agent`` from the session's branch; returns the listener that records it (to subscribe)."""
    state = agent.state
    if state.messages:
        raise InvalidValueError(
            "Agent(messages=..., session=...): the messages come from the session; give one or the other"
        )
    context = session.context()
    if not model_given:
        with contextlib.suppress(ModelNotFoundError):  # raised by the agent's first run (require_model)
            _use_recorded_model(session, agent, context.model)
    if not thinking_level_given and context.thinking_level is not None:
        state.thinking_level = context.thinking_level
    if not state.system_prompt and context.system_prompt is not None:
        state.system_prompt = context.system_prompt
    state.messages = context.messages
    if agent.convert_to_llm is None:
        agent.convert_to_llm = convert_to_llm

    def record(event: Any) -> None:
        if agent.session is not session:
            return  # the agent was given another session (or None): this one records no more
        kind = event.type
        if kind == "message_end":
            session.append_message(event.message)
        elif kind == "agent_start":
            _record_settings(session, agent)
        elif kind == "compaction_end" and event.result is not None:
            _record_compaction(session, event.result)

    return record


def require_model(session: Session, agent: Any) -> None:
    """At the start of a run: an agent still without a model (the placeholder) takes the one the branch
    names, known by now (registered since the agent was built, say); raises :class:`ModelNotFoundError`
    when this process does not know it. Called by :meth:`Session.begin_run`, before anything is recorded."""
    if agent.state.model.api == PLACEHOLDER_API:
        _use_recorded_model(session, agent, branch_settings(session.branch()).model)


def _use_recorded_model(session: Session, agent: Any, recorded: Optional[tuple[str, str]]) -> None:
    """Give ``agent`` the model the branch names (None: it names none), from the catalogue: a
    ``custom_model()`` registered in this process or a faux provider's model included."""
    from ..ai.models import get_model

    if recorded is None:
        return
    provider, model_id = recorded
    try:
        agent.state.model = get_model(provider, model_id)
    except ModelNotFoundError as exc:
        close = f" (did you mean {' or '.join(exc.suggestions)}?)" if exc.suggestions else ""
        raise ModelNotFoundError(
            f"session {session.store!r} names the model {provider}:{model_id}, which this process does not know"
            f"{close}: register it first, with custom_model({model_id!r}, base_url=..., provider={provider!r}), or "
            "give the agent a model (Agent(model=...) or agent.model = ...). The session is unchanged.",
            exc.suggestions,
        ) from None


def _record_settings(session: Session, agent: Any) -> None:
    recorded = branch_settings(session.branch())
    model, level = agent.state.model, agent.state.thinking_level
    if recorded.model != (model.provider, model.id) and not is_placeholder(model.provider, model.id):
        session.append_model_change(model.provider, model.id)
    if (recorded.thinking_level or "off") != level:
        session.append_thinking_level_change(level)
    # a branch leading with a system message records the prompt there (pi 1.6); else the entry records the
    # option, which an agent with system_messages=True seeds its transcript's leading message from
    if not recorded.leads_with_system_message and (recorded.system_prompt or "") != agent.system_prompt:
        session.append_entry("custom", customType=SYSTEM_PROMPT_TYPE, data={"content": agent.system_prompt})


def _record_compaction(session: Session, result: Any) -> None:
    """pi's ``compaction`` entry: the summary, the id of the entry the first kept message comes
    from, the tokens before, what the summary cost, and (pi 1.6) the system message replayed."""
    ids = context_entry_ids(session.branch())
    if result.first_kept_index >= len(ids):
        logger.warning("the compacted transcript is not the session's branch: the compaction is not recorded")
        return
    fields: dict[str, Any] = {
        "summary": result.summary,
        "firstKeptEntryId": ids[result.first_kept_index],
        "tokensBefore": result.tokens_before,
        "usage": result.usage.to_dict(),
        "fromHook": False,
    }
    system = current_system_message(result.messages)
    if system is not None:
        fields["systemMessage"] = message_to_record(system)
    session.append_entry("compaction", **fields)
