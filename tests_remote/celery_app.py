"""The Celery app the tests' worker processes run (``celery -A tests_remote.celery_app worker``).

Broker and result backend are databases 1 and 2 of the test's redis-server; piagent's run keys
live in database 0. ``PIAGENT_TEST_VISIBILITY`` (seconds) is the broker's visibility timeout:
how long an unacknowledged task waits before it is delivered again (short in the crash tests).
"""

from __future__ import annotations

import os

from celery import Celery

from piagent.remote.celery_task import agent_task

from . import chaos_agent
from .scenarios import APPROVAL, build_agent, redis_url


def _database(number: int) -> str:
    return redis_url().rsplit("/", 1)[0] + f"/{number}"


app = Celery("piagent_tests", broker=_database(1), backend=_database(2))
visibility = float(os.environ.get("PIAGENT_TEST_VISIBILITY", "3600"))
app.conf.update(
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    broker_transport_options={
        "visibility_timeout": visibility,
        "unacked_restore_interval": 1,
        "unacked_restore_throttle": 1,
    },
    result_expires=600,
)

run_conversation = agent_task(app, build_agent, redis_url())
run_with_approval = agent_task(app, build_agent, redis_url(), approval=APPROVAL, name="tests.run_with_approval")
run_chaos = agent_task(app, chaos_agent.build_agent, redis_url(), name="tests.run_chaos")
