"""Drive a conversation of tasks.py from any process; each command is one short-lived process.

    python examples/celery_app/client.py start   conv-1 "Clean up the reports folder"
    python examples/celery_app/client.py events  conv-1 [--since EVENT_ID]   # one JSON line per event
    python examples/celery_app/client.py steer   conv-1 "Keep last year's files"
    python examples/celery_app/client.py approve conv-1 CALL_ID
    python examples/celery_app/client.py deny    conv-1 CALL_ID "not that one"
    python examples/celery_app/client.py abort   conv-1

``events`` prints until the run's ``agent_end`` (or 60 s without an event).
"""

from __future__ import annotations

import argparse
import json

from tasks import REDIS_URL, run_conversation

from piagent.remote import RunHandle
from piagent.remote.celery_task import start_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["start", "events", "steer", "approve", "deny", "abort"])
    parser.add_argument("run_id")
    parser.add_argument("args", nargs="*")
    parser.add_argument("--since", default=None, help="resume after this event id")
    options = parser.parse_args()
    with RunHandle(REDIS_URL, options.run_id) as handle:
        if options.command == "start":
            print(json.dumps({"task": start_run(run_conversation, options.run_id, " ".join(options.args)).id}))
        elif options.command == "events":
            for event in handle.events(since=options.since, timeout=60):
                print(json.dumps(event), flush=True)
                if event["type"] == "agent_end":
                    break
        elif options.command == "steer":
            print(json.dumps({"entry": handle.steer(" ".join(options.args))}))
        elif options.command == "approve":
            print(json.dumps({"decided": handle.approve(options.args[0])}))
        elif options.command == "deny":
            print(json.dumps({"decided": handle.deny(options.args[0], " ".join(options.args[1:]) or None)}))
        elif options.command == "abort":
            print(json.dumps({"aborted": handle.abort("stopped from the command line")}))


if __name__ == "__main__":
    main()
