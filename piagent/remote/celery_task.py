"""Celery recipe: "run this conversation's agent as a task" (see docs/remote.md#celery).

    app = Celery("site", broker="redis://localhost:6379/0")
    run_conversation = agent_task(app, build_agent, "redis://localhost:6379/0")

    result = start_run(run_conversation, "conversation-42", "Summarise the report")   # web process
    result = resend_if_lost(run_conversation, "conversation-42", result) or result  # now and then

The task takes only the run id: what to run is in Redis (queued messages) and in the agent's
session (a run cut short). So a redelivered task (``acks_late``, the worker died) resumes from the
session and runs each queued message exactly once; a duplicate task finds nothing to do.
Importing this module needs Celery; the rest of :mod:`piagent.remote` does not.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any, Callable, Optional, Union

import redis

try:
    from celery import Celery, Task
    from celery.result import AsyncResult
    from kombu.serialization import loads, prepare_accept_content
except ModuleNotFoundError as exc:
    from .._extras import missing_extra

    raise missing_extra(exc, "piagent.remote.celery_task", "celery") from exc

from ..agent import Agent
from ..exceptions import InvalidValueError
from ..result import RunResult
from ._keys import RunKeys, client_for, redis_errors
from .approval import Approval
from .errors import RunBusyError
from .handle import RunHandle
from .worker import attach, run_pending

__all__ = ["agent_task", "resend_if_lost", "start_run"]

logger = logging.getLogger("piagent.remote")

BUSY_RETRY_DELAY = 1.0  # seconds before a task finding its run held by a live worker is retried


def agent_task(
    app: Celery,
    build_agent: Callable[[str], Agent],
    redis_url: Union[str, redis.Redis],
    *,
    approval: Optional[Approval] = None,
    name: str = "piagent.run_conversation",
    **task_options: Any,
) -> Task:
    """Register the task ``name(run_id)``: take the run's lease, build its agent, run what is pending.

    ``build_agent(run_id)`` returns the conversation's agent, with its session (a run resumed
    after a crash starts from it); it is called only once the run's lease is held, so a
    duplicate delivery never loads the session while another worker is still writing it. The
    task is ``acks_late`` and ``reject_on_worker_lost`` (a message is acknowledged when the task
    returns, and redelivered if its worker dies), unless ``task_options`` say otherwise. It
    returns a summary of the last run (JSON-serialisable).
    """
    options: dict[str, Any] = {"acks_late": True, "reject_on_worker_lost": True, **task_options}

    @app.task(name=name, bind=True, **options)
    def run_conversation(self: Task, run_id: str) -> dict[str, Any]:
        try:
            with attach(build_agent, redis_url, run_id, approval) as attachment:  # builds it holding the lease
                result = run_pending(attachment.agent)
        except RunBusyError as exc:  # a duplicate delivery while the first one still runs
            logger.info("%s; retrying in %g s", exc, BUSY_RETRY_DELAY)
            raise self.retry(exc=exc, countdown=BUSY_RETRY_DELAY) from exc
        return _summary(run_id, result)

    run_conversation.redis_url = redis_url
    return run_conversation


def start_run(task: Task, run_id: str, text: str) -> AsyncResult:
    """Queue ``text`` for run ``run_id`` and send ``task`` (made by :func:`agent_task`) to run it.

    The message goes to Redis first, so it runs exactly once whichever task (this one, a running
    one or a redelivered one) takes it.
    """
    with RunHandle(task.redis_url, run_id) as handle:
        handle.follow_up(text)
    return task.delay(run_id)


def resend_if_lost(task: Task, run_id: str, result: AsyncResult) -> Optional[AsyncResult]:
    """Send ``task`` for run ``run_id`` again if its task message was lost; returns the new
    task's result (track it instead of ``result``), or None if nothing was lost.

    ``result`` is the run's last task (from :func:`start_run` or an earlier call; the app needs a
    result backend). Lost means: ``result`` is not ready, no worker holds the run's lease, and
    the broker holds no message of ``task`` for ``run_id``, neither queued nor taken and
    unacknowledged. Call it now and then for each run started and unfinished. Celery's Redis broker
    can lose a message taken by a worker killed at the wrong instant (docs/remote.md#celery);
    the run itself waits intact in Redis and its session, and the task sent again resumes it.
    A message moving between the checks may be seen lost: its duplicate is harmless. Needs the
    Redis broker (InvalidValueError for another).
    """
    with task.app.connection_for_read() as connection:
        if connection.transport.driver_type != "redis":
            raise InvalidValueError(f"resend_if_lost() reads Celery's Redis broker, not {connection.transport_cls!r}")
        if result.ready() or _leased(task.redis_url, run_id):
            return None
        channel = connection.default_channel
        queue = getattr(task, "queue", None) or task.app.amqp.router.route({}, task.name)["queue"].name
        # kombu's lists for the queue (one per priority step), read before its unacknowledged
        # messages: a message is popped from the first, then recorded in the second
        lists = [queue] + [f"{queue}{channel.sep}{step}" for step in channel.priority_steps if step]
        queued = [raw for name in lists for raw in channel.client.lrange(name, 0, -1)]
        held = queued + [_first(raw) for raw in channel.client.hvals(channel.unacked_key)]
        accept = prepare_accept_content(task.app.conf.accept_content)  # content types, from names
        if any(_carries(raw, task.name, run_id, accept) for raw in held) or result.ready():  # acknowledged in between
            return None
    logger.warning("run %r: its task message was lost by the broker; sending the task again", run_id)
    return task.delay(run_id)


def _leased(redis_url: Union[str, redis.Redis], run_id: str) -> bool:
    with redis_errors(f"reading the lease of run {run_id!r}"):
        return bool(client_for(redis_url).exists(RunKeys(run_id).owner))


def _first(raw: Any) -> Any:
    """The message of an unacknowledged entry (``[message, exchange, routing key]`` as JSON)."""
    try:
        return json.loads(raw)[0]
    except (ValueError, TypeError, KeyError, IndexError):
        return None


def _carries(raw: Any, task_name: str, run_id: str, accept: Any) -> bool:
    """Whether a broker message (JSON text, or already decoded) is ``task_name(run_id)``; its
    body is decoded only if of a content type the app accepts."""
    try:
        message = json.loads(raw) if isinstance(raw, (str, bytes)) else raw
        if message["headers"]["task"] != task_name:
            return False
        body = message["body"]
        if message["properties"].get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = loads(body, message["content-type"], message["content-encoding"], accept=accept)[0]
    except Exception:  # not a Celery task message of an accepted type: not ours
        return False
    return isinstance(args, (list, tuple)) and list(args[:1]) == [run_id]


def _summary(run_id: str, result: Optional[RunResult]) -> dict[str, Any]:
    if result is None:
        return {"runId": run_id, "ran": False}
    return {
        "runId": run_id,
        "ran": True,
        "text": result.text,
        "stopReason": result.stop_reason,
        "errorMessage": result.error_message,
        "messages": len(result.messages),
    }
