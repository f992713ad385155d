"""The worker side: ``attach(agent, ...)`` wires an agent to its run's Redis keys (docs/remote.md#the-worker).

One attachment per run id at a time, enforced by a lease (``owner`` key, renewed every second).
While attached:

* a reader thread blocks on the run's control stream (consumer group ``worker``, consumer
  ``owner``): steering and follow-up entries go into the agent's own queues (so its modes and
  atomic drain apply unchanged), an abort entry calls ``agent.abort()`` at once;
* a listener publishes every event to the capped events stream and, in the same transaction,
  acknowledges and deletes the control entry of a queued message when its ``message_end`` has
  been dispatched (after the session appended it): until then the entry stays in the group's
  pending list, and a later attachment delivers it again unless it reached the transcript;
* an optional approval hook asks another process before tool calls run.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from typing import Any, Callable, Optional, Union

import redis

from ..agent import Agent
from ..ai.types import TextContent, UserMessage
from ..exceptions import AgentBusyError, InvalidStateError, InvalidTypeError, InvalidValueError
from ..result import RunResult
from ..types import AgentMessage
from ._intents import RemoteIntents
from ._keys import CONSUMER, GROUP, RUN_TTL_MS, RunKeys, client_for, entries_of, redis_errors, stream_id, write_with_ttl
from ._publisher import Publisher
from ._scripts import CLAIM, RELEASE, RENEW
from .approval import Approval, approval_hook
from .errors import RemoteError, RunBusyError

__all__ = ["Attachment", "attach", "run_pending"]

logger = logging.getLogger("piagent.remote")

LEASE = 5.0  # seconds a dead worker keeps the run; a live one renews it every RENEW_EVERY (or lease / 3)
CLAIM_TIMEOUT = 15.0  # seconds attach() waits for another worker's lease before RunBusyError
READ_SLICE_MS = 1000  # the reader's blocking read, at most; it never blocks past the next renewal
RENEW_EVERY = 1.0  # seconds between lease renewals, counted from the claim; a third of a shorter lease
MAX_EVENTS = 10_000  # events kept per run (XADD MINID ~: a few more, and always the newest batch)
CLAIM_POLL = 0.05  # seconds between attempts to take a held lease
READ_COUNT = 500  # control entries per read
STATE_SLACK_MS = 3600 * 1000  # a renewal renews a state key's expiry once less than RUN_TTL_MS minus this is left


def attach(
    agent: Union[Agent, Callable[[str], Agent]],
    redis_url: Union[str, redis.Redis],
    run_id: str,
    approval: Optional[Approval] = None,
    *,
    lease: float = LEASE,
    claim_timeout: float = CLAIM_TIMEOUT,
    max_events: int = MAX_EVENTS,
) -> Attachment:
    """Drive ``agent`` from run ``run_id``'s Redis keys until the returned attachment is closed.

    ``agent``: an idle agent (attach before ``prompt()``/``continue_()``: the approval hook is
    read when a run starts), or a function ``run_id -> Agent`` called once the run's lease is
    held, so that only the worker owning the run loads its session (``attachment.agent`` is
    the agent it built). Messages a previous worker took but never delivered are queued
    again first. Waits up to ``claim_timeout`` seconds for another worker's lease (a dead one's
    expires after ``lease`` seconds), then raises :class:`RunBusyError`. Use it as a context
    manager: leaving the block detaches.
    """
    attachment = Attachment(agent, redis_url, run_id, approval, lease, max_events)
    attachment._open(claim_timeout)
    return attachment


class Attachment:
    """An agent driven from Redis; :meth:`close` (or leaving the ``with`` block) detaches it."""

    agent: Agent

    def __init__(
        self,
        agent: Union[Agent, Callable[[str], Agent]],
        redis_url: Union[str, redis.Redis],
        run_id: str,
        approval: Optional[Approval],
        lease: float,
        max_events: int,
    ) -> None:
        if not isinstance(agent, Agent) and not callable(agent):
            raise InvalidTypeError(f"attach() needs an Agent or a function returning one, got {type(agent).__name__}")
        if approval is not None and not isinstance(approval, Approval):
            raise InvalidTypeError(f"approval must be a piagent.remote.Approval or None, got {type(approval).__name__}")
        if not lease > 0 or not max_events > 0:
            raise InvalidValueError("lease and max_events must be positive")
        self._agent_or_factory = agent
        self.keys = RunKeys(run_id)
        self._approval = approval
        self._lease_ms = int(lease * 1000)
        self._renew_every = min(RENEW_EVERY, lease / 3)
        self._max_events = max_events
        self._redis = client_for(redis_url)
        self._token = uuid.uuid4().hex
        self._mark = (0, 0)  # where this attachment starts: an abort entry before it was for an earlier worker
        self._pending = 0  # entries of the group's pending list when the lease was taken
        self._renewed = 0.0  # time.monotonic() when the lease was last set (before the command)
        self._lock = threading.Lock()
        self._queued: dict[int, tuple[str, AgentMessage]] = {}  # id(message) -> (entry id, message)
        self._abort_reason: Optional[str] = None  # an abort received while attached
        self._failure: Optional[RemoteError] = None
        self._failure_raised = False
        self._stopping = threading.Event()
        self._reader: Optional[threading.Thread] = None
        self._publisher: Publisher
        self._unsubscribe: Any = None
        self._previous_hook: Any = None
        self._previous_journal: Any = None
        self._closed = False

    # -- opening ----------------------------------------------------------------------------

    def _open(self, claim_timeout: float) -> None:
        given = self._agent_or_factory
        if isinstance(given, Agent) and given.state.is_streaming:
            raise AgentBusyError("attach() the agent before its run starts, not during it")
        new = self._claim(claim_timeout)  # up to READ_COUNT entries never read, now in our pending list
        try:
            self.agent = given if isinstance(given, Agent) else _built(given, self.keys.run_id)
            if self._pending:
                self._recover()  # the older pending entries first: they were sent first
            self._handle_all(new)
            if len(new) == READ_COUNT:
                self._read_new(block=None)  # everything sent before attaching is queued on return
        except BaseException:
            self._release()
            raise
        self._publisher = Publisher(self._redis, self.keys, self._max_events, self._fail)
        self._unsubscribe = self.agent.subscribe(self._on_event)
        self._previous_journal = self.agent.intent_journal
        session: Any = self.agent.session if callable(getattr(self.agent.session, "record_intents", None)) else None
        self.agent.intent_journal = RemoteIntents(self._redis, self.keys, self._previous_journal or session, self._fail)
        if self._approval is not None:
            self._previous_hook = self.agent.before_tool_call
            self.agent.before_tool_call = approval_hook(
                self._approval, self._redis, self.keys, self._publisher.publish, self._previous_hook
            )
        self._reader = threading.Thread(target=self._read_loop, name=f"piagent-remote-{self.keys.run_id}", daemon=True)
        self._reader.start()

    def _claim(self, claim_timeout: float) -> list[tuple[str, Optional[dict[str, str]]]]:
        """Take the lease; the entries never read that the claim read (the rest of the stream waits)."""
        claim = self._redis.register_script(CLAIM)
        waited = threading.Event()
        attempts = max(1, int(claim_timeout / CLAIM_POLL))
        keys = [self.keys.owner, *self.keys.state()]
        args: list[Union[str, int]] = [self._token, self._lease_ms, GROUP, CONSUMER, READ_COUNT, RUN_TTL_MS]
        with redis_errors(f"attach() to run {self.keys.run_id!r}"):
            for _ in range(attempts):
                self._renewed = time.monotonic()
                claimed = claim(keys=keys, args=args)
                if claimed:
                    self._mark, self._pending = stream_id(str(claimed[0])), int(claimed[1])
                    return [(str(entry_id), dict(zip(flat[::2], flat[1::2]))) for entry_id, flat in claimed[2]]
                waited.wait(CLAIM_POLL)
        raise RunBusyError(
            f"run {self.keys.run_id!r} is attached to another live worker (waited {claim_timeout:g} s for its lease)"
        )

    def _recover(self) -> None:
        """Queue again what an earlier worker took and never delivered: the first ``_pending``
        entries of our consumer's pending list (the claim's own read comes after them)."""
        last, left = "0-0", self._pending
        with redis_errors(f"attach() to run {self.keys.run_id!r}"):
            while left:
                count = min(left, READ_COUNT)
                reply = self._redis.xreadgroup(GROUP, CONSUMER, {self.keys.control: last}, count=count)
                entries = entries_of(reply)
                if not entries:
                    return
                left -= len(entries)
                for entry_id, fields in entries:
                    last = entry_id
                    message = self._message(entry_id, fields)
                    if message is None or self._reached_transcript(entry_id, message):
                        self._acknowledge(entry_id)  # stale control entries, or delivered before a crash
                    else:
                        self._enqueue(entry_id, fields["kind"], message)  # type: ignore[index]  # a message has fields

    def _reached_transcript(self, entry_id: str, message: UserMessage) -> bool:
        """Did the crashed worker's session append this message (its index was noted at message_start)?"""
        index = _natural(self._redis.hget(self.keys.delivering, entry_id))
        messages = self.agent.state.messages
        if index is None or index >= len(messages):
            return False
        delivered = messages[index]
        return isinstance(delivered, UserMessage) and delivered.to_dict() == message.to_dict()

    # -- the reader thread --------------------------------------------------------------------

    def _read_loop(self) -> None:
        renew = self._redis.register_script(RENEW)
        keys = [self.keys.owner, *self.keys.state()]
        try:
            while not self._stopping.is_set():
                due = self._renewed + self._renew_every - time.monotonic()  # seconds until the next renewal
                if due <= 0:
                    self._renewed, due = time.monotonic(), self._renew_every
                    if not renew(keys=keys, args=[self._token, self._lease_ms, RUN_TTL_MS, STATE_SLACK_MS]):
                        raise RemoteError(f"run {self.keys.run_id!r}: this worker's lease was lost (Redis restarted?)")
                self._read_new(block=max(1, min(READ_SLICE_MS, int(due * 1000))))  # BLOCK 0 would wait forever
        except Exception as exc:  # Redis gone, restarted (NOGROUP) or lease lost: end the run clearly
            if not self._stopping.is_set():
                self._fail(exc)

    def _read_new(self, block: Optional[int]) -> None:
        """Handle the entries never read by any worker: wait up to ``block`` ms for some, or read
        until none is left (None)."""
        while True:
            reply = self._redis.xreadgroup(GROUP, CONSUMER, {self.keys.control: ">"}, count=READ_COUNT, block=block)
            entries = entries_of(reply)
            self._handle_all(entries)
            if block is not None or len(entries) < READ_COUNT:
                return

    def _handle_all(self, entries: list[tuple[str, Optional[dict[str, str]]]]) -> None:
        done = [entry_id for entry_id, fields in entries if self._handle(entry_id, fields or {})]
        if done:
            self._acknowledge(*done)  # together, in one round trip

    def _handle(self, entry_id: str, fields: dict[str, str]) -> bool:
        """Act on one control entry; True if it is done with (to acknowledge now), False for a
        message (acknowledged once delivered) or our wake entry (``close()`` deletes it)."""
        kind = fields.get("kind")
        message = self._message(entry_id, fields)
        if message is not None:
            self._enqueue(entry_id, str(kind), message)
            return False
        if kind == "abort" and stream_id(entry_id) > self._mark:
            self._abort_reason = fields.get("reason") or "Aborted from another process"
            self.agent.abort(self._abort_reason)
        elif kind == "wake" and fields.get("token") == self._token:
            self._stopping.set()
            return False
        elif kind not in ("abort", "wake", "attached"):
            logger.warning("run %r: ignored a control entry of unknown kind %r", self.keys.run_id, kind)
        return True

    def _message(self, entry_id: str, fields: Optional[dict[str, str]]) -> Optional[UserMessage]:
        """The user message of a steer/follow_up entry, else None; a malformed one is reported
        (a warning) and skipped, never the end of the worker."""
        try:
            return _message(fields)
        except ValueError as exc:
            logger.warning("run %r: skipped control entry %s: %s", self.keys.run_id, entry_id, exc)
            return None

    def _enqueue(self, entry_id: str, kind: str, message: AgentMessage) -> None:
        with self._lock:
            self._queued[id(message)] = (entry_id, message)
        queue = self.agent.steering_queue if kind == "steer" else self.agent.follow_up_queue
        queue.put(message)

    def _acknowledge(self, *entry_ids: str) -> None:
        pipe = self._redis.pipeline(transaction=True)
        pipe.xack(self.keys.control, GROUP, *entry_ids)
        pipe.xdel(self.keys.control, *entry_ids)
        pipe.execute()

    # -- the listener (run thread) ------------------------------------------------------------

    def _on_event(self, event: Any) -> None:
        if self._failure is not None:
            # once per run (the run ends with this error; its failure events are not sent), and
            # at the start of any later run: nothing reaches Redis any more
            if not self._failure_raised or event.type == "agent_start":
                self._failure_raised = True
                raise self._failure
            return
        if event.type == "agent_start" and self._abort_reason is not None:
            self.agent.abort(self._abort_reason)  # aborted while attached and idle: this run is the one
        queued = None
        if event.type in ("message_start", "message_end"):
            with self._lock:
                queued = self._queued.get(id(event.message))
        if queued is None:
            self._publisher.publish(wire_event(event))
            return
        entry_id = queued[0]
        if event.type == "message_start":
            # Where the message will land in the transcript, in Redis before the session can append
            # it (written from this thread: one round trip, no hand-off to the publisher and back):
            # after a crash, the next worker tells from it whether it did.
            try:
                write_with_ttl(
                    self._redis, self.keys, "HSET", self.keys.delivering, entry_id, len(self.agent.state.messages)
                )
            except redis.RedisError as exc:
                self._fail(exc)
                self._failure_raised = True
                raise self._failure from exc  # type: ignore[misc]  # _fail() has set it
            self._publisher.publish(wire_event(event))
            return

        def acknowledge(pipe: Any) -> None:  # delivered (the session, if any, has appended it)
            pipe.xack(self.keys.control, GROUP, entry_id)
            pipe.xdel(self.keys.control, entry_id)
            pipe.hdel(self.keys.delivering, entry_id)

        self._publisher.publish(wire_event(event), acknowledge)
        with self._lock:
            self._queued.pop(id(event.message), None)

    def _fail(self, exc: BaseException) -> None:
        """Redis is gone or lost the run's state: stop the run; its next event raises the error."""
        error = exc if isinstance(exc, RemoteError) else _lost(self.keys.run_id, exc)
        if self._failure is None:
            logger.error("%s", error)
            self._failure = error
        self.agent.abort(self._failure)

    # -- closing ------------------------------------------------------------------------------

    def close(self) -> None:
        """Detach: stop the reader, unhook the agent, give the lease up. Idempotent.

        Messages read but not delivered stay pending in Redis for the next attachment (and leave
        the agent's queues). Closing during a run aborts it first.
        """
        if self._closed:
            return
        self._closed = True
        if self.agent.state.is_streaming:
            self.agent.abort(f"detached from run {self.keys.run_id!r}")
            with contextlib.suppress(InvalidStateError):  # closed from the run thread itself
                self.agent.wait_for_idle(self._lease_ms / 1000)
        self._stopping.set()
        wake = None
        with contextlib.suppress(redis.RedisError):  # Redis gone: the reader stops at its next read
            # NOMKSTREAM: a stream Redis lost (the reader has stopped on it) is not made again without its expiry
            added = self._redis.xadd(self.keys.control, {"kind": "wake", "token": self._token}, nomkstream=True)
            wake = None if added is None else str(added)
        if self._unsubscribe is not None:  # while the reader wakes up
            self._unsubscribe()
            self._publisher.close()
        if self._reader is not None:
            self._reader.join(self._lease_ms / 1000 + READ_SLICE_MS / 1000)
        if self._approval is not None:
            self.agent.before_tool_call = self._previous_hook
        if self._unsubscribe is not None:
            self.agent.intent_journal = self._previous_journal
        self._forget_undelivered()
        try:
            self._release(wake)
        except redis.RedisError as exc:
            logger.warning("run %r: could not give the lease up (it expires by itself): %s", self.keys.run_id, exc)

    def _forget_undelivered(self) -> None:
        with self._lock:
            ours, self._queued = self._queued, {}
        if not ours:
            return
        for queue in (self.agent.steering_queue, self.agent.follow_up_queue):
            queue.requeue([m for m in queue.drain("all") if id(m) not in ours])

    def _release(self, wake: Optional[str] = None) -> None:
        """Give the lease up; and delete our ``wake`` entry (read by the reader or not) in the same round trip."""
        pipe = self._redis.pipeline(transaction=True)
        if wake is not None:
            pipe.xack(self.keys.control, GROUP, wake)
            pipe.xdel(self.keys.control, wake)
        pipe.eval(RELEASE, 1, self.keys.owner, self._token)  # the body: no NOSCRIPT round trip
        pipe.execute()

    def __enter__(self) -> Attachment:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Attachment run_id={self.keys.run_id!r}{' closed' if self._closed else ''}>"


def _built(build_agent: Callable[[str], Agent], run_id: str) -> Agent:
    agent = build_agent(run_id)
    if not isinstance(agent, Agent):
        raise InvalidTypeError(f"the agent factory given to attach() returned {type(agent).__name__}, not an Agent")
    return agent


def wire_event(event: Any) -> dict[str, Any]:
    """The event as published: its ``to_dict()``, except that a ``message_update`` leaves out the
    partial message (its ``assistantMessageEvent`` carries the delta; ``message_end`` the whole
    message), so a long answer costs O(n) in Redis, not O(n²) (docs/remote.md#events)."""
    if event.type == "message_update":  # built without serialising the partial message at all
        return {
            "type": "message_update",
            "assistantMessageEvent": event.assistant_message_event.to_dict(with_partial=False),
        }
    return event.to_dict()


def run_pending(agent: Agent) -> Optional[RunResult]:
    """Run whatever the conversation has pending, until nothing is; returns the last run's result.

    A transcript cut short by a crash (it ends with a user message, a tool result, or an
    assistant message whose tool calls have no results) is continued first; then queued
    messages are run: steering, else follow-ups, as ``continue_()`` does (or as the first prompt
    of an empty transcript). Stops after a run that failed or was aborted (what is still queued
    waits for the next call). None if there was nothing to do.
    """
    result: Optional[RunResult] = None
    while True:
        messages = agent.state.messages
        tail = messages[-1] if messages else None
        if tail is not None and (_unfinished(tail) or agent.has_queued_messages()):
            outcome = agent.continue_()
        elif agent.has_queued_messages():
            outcome = agent.prompt(_first_prompt(agent))
        else:
            return result
        assert isinstance(outcome, RunResult)  # wait=True
        result = outcome
        if result.stop_reason in ("error", "aborted"):
            return result


def _unfinished(message: AgentMessage) -> bool:
    role = getattr(message, "role", None)
    return role != "assistant" or getattr(message, "stop_reason", None) == "toolUse"


def _first_prompt(agent: Agent) -> list[AgentMessage]:
    steering = agent.steering_queue.drain(agent.steering_mode)
    return steering or agent.follow_up_queue.drain(agent.follow_up_mode)


def _message(fields: Optional[dict[str, str]]) -> Optional[UserMessage]:
    """The user message of a steer/follow_up entry (its producer's timestamp kept), else None;
    ValueError for one whose timestamp is not a count of milliseconds."""
    if not fields or fields.get("kind") not in ("steer", "follow_up"):
        return None
    timestamp = _natural(fields.get("timestamp") or "0")
    if timestamp is None:
        got = str(fields.get("timestamp"))[:40]
        raise InvalidValueError(f"a {fields['kind']} entry's timestamp must be milliseconds, got {got!r}")
    return UserMessage([TextContent(fields.get("text", ""))], timestamp=timestamp)


def _natural(text: Any) -> Optional[int]:
    """``text`` as a whole number of at most 16 ASCII digits, else None (``int()`` takes other
    scripts' digits and raises on some characters ``str.isdigit`` accepts, such as ``²``)."""
    if isinstance(text, str) and text.isascii() and text.isdigit() and len(text) <= 16:
        return int(text)
    return None


def _lost(run_id: str, exc: BaseException) -> RemoteError:
    return RemoteError(f"run {run_id!r}: lost Redis ({type(exc).__name__}: {exc}); the run was stopped")
