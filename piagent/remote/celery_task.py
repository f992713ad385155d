"""Celery recipe: "run this conversation's agent as a task" (see docs/remote.md#celery).

    app = Celery("site", broker="redis://localhost:6379/0")
    run_conversation = agent_task(app, build_agent, "redis://localhost:6379/0")

    start_run(run_conversation, "conversation-42", "Summarise the report")   # web process

The task takes only the run id: what to run is in Redis (queued messages) and in the agent's
session (a run cut short). So a redelivered task (``acks_late``, the worker died) resumes from the
session and runs each queued message exactly once; a duplicate task finds nothing to do.
Importing this module needs Celery; the rest of :mod:`piagent.remote` does not.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional, Union

import redis
from celery import Celery, Task
from celery.result import AsyncResult

from ..agent import Agent
from ..result import RunResult
from .approval import Approval
from .errors import RunBusyError
from .handle import RunHandle
from .worker import attach, run_pending

__all__ = ["agent_task", "start_run"]

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
