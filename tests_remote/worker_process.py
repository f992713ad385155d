"""A worker process without Celery: ``python -m tests_remote.worker_process RUN_ID``.

Attaches the scenario's agent to the run and runs what is pending, prints the run's result as a
JSON line, then does it again for each line read on stdin (one agent: its transcript carries
over).
"""

from __future__ import annotations

import json
import sys

from piagent.remote import attach, run_pending

from .scenarios import build_agent, redis_url


def main(run_id: str) -> None:
    agent = build_agent(run_id)
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


if __name__ == "__main__":
    main(sys.argv[1])
