"""A worker process without Celery: ``python -m tests_remote.worker_process RUN_ID``.

Attaches the scenario's agent to the run and runs what is pending, prints the run's result as a
JSON line, then does it again for each line read on stdin (one agent: its transcript carries
over). ``PIAGENT_TEST_KILL_AT=TEXT`` kills the process at that user message's ``message_end``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from piagent.remote import attach, run_pending

from .scenarios import build_agent, redis_url


def main(run_id: str) -> None:
    agent = build_agent(run_id)
    kill_at = os.environ.get("PIAGENT_TEST_KILL_AT")
    if kill_at:  # subscribed after the session's listener and before attach()'s: SIGKILL in between
        agent.subscribe(lambda event: _kill_at(event, kill_at))
    while True:
        with attach(agent, redis_url(), run_id):
            result = run_pending(agent)
        summary = {
            "stopReason": result.stop_reason if result else None,
            "errorMessage": result.error_message if result else None,
            "text": result.text if result else None,
            "transcript": [m.to_dict() for m in agent.state.messages],
        }
        print(json.dumps(summary), flush=True)
        if not sys.stdin.readline():
            return


def _kill_at(event: Any, text: str) -> None:
    """SIGKILL this process at the ``message_end`` of the user message ``text``: the session has
    appended it, the control stream entry is not acknowledged yet."""
    message = getattr(event, "message", None)
    if event.type == "message_end" and message.role == "user" and message.content[0].text == text:
        os.kill(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1])
