"""Drive a conversation of tasks.py from any process; each command is one short-lived process.

    python client.py start   conv-1 "Clean up the reports folder"
    python client.py events  conv-1 [--since EVENT_ID]   # one JSON line per event
    python client.py steer   conv-1 "Keep last year's files"
    python client.py approve conv-1 CALL_ID
    python client.py deny    conv-1 CALL_ID "not that one"
    python client.py abort   conv-1

``events`` follows one run: the run in progress from its ``agent_start``, or, when the last run
has ended, the next one; it prints until that run's ``agent_end`` (or 60 s without an event).
``--since EVENT_ID`` resumes after an event instead.
"""

from __future__ import annotations

import argparse
import json

import redis
from tasks import REDIS_URL, run_conversation

from piagent.remote import RunHandle
from piagent.remote.celery_task import start_run


def latest_run(run_id: str) -> str:
    """The event id to follow the latest run from: the one before the ``agent_start`` of a run in
    progress, or the last event when the last run has ended (then ``events`` waits for the next).

    The events stream is ``piagent:{run_id}:events``, read newest first: each entry a batch of
    events, one JSON a line, numbered up to the entry's id (docs/remote.md#the-events-stream).
    """
    client = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        entries = client.xrevrange(f"piagent:{{{run_id}}}:events")
    finally:
        client.close()
    newest_first = []  # (event id, type)
    for entry_id, fields in entries:
        ms, last = entry_id.split("-")
        lines = (fields.get("events") or fields.get("event") or "{}").split("\n")  # "event": an older worker's
        for back, line in enumerate(reversed(lines)):
            newest_first.append((f"{ms}-{int(last) - back}", json.loads(line).get("type")))
    for position, (event_id, kind) in enumerate(newest_first):
        if kind == "agent_end":
            return event_id
        if kind == "agent_start":
            return newest_first[position + 1][0] if position + 1 < len(newest_first) else "0-0"
    return "0-0"


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
            for event in handle.events(since=options.since or latest_run(options.run_id), timeout=60):
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
