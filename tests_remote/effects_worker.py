"""A worker process for the remote effects tests: one run with an approved ``charge``, SIGKILLed at a point.

    python -m tests_remote.effects_worker REDIS_URL RUN_ID SESSION LEDGER KILL

KILL: ``before-intent`` (the approval was taken, the call's intent is being stored) or
``after-effect`` (the charge is in the ledger, its result not stored).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from piagent import Agent, tool
from piagent.remote import Approval, attach, run_pending
from piagent.sessions import JsonlStore, Session
from piagent.testing import faux_message, faux_tool_call, register_faux_provider

CALL_ID = "call_charge_1"


def respond(context: Any, options: Any, state: Any, model: Any) -> Any:
    if any(m.role == "toolResult" for m in context.messages):
        return faux_message("done")
    return faux_message([faux_tool_call("charge", {"item": "a"}, CALL_ID)])


def charging_tool(ledger: str, kill: str) -> Any:
    @tool
    def charge(item: str) -> str:
        """Charge an item."""
        with open(ledger, "a") as file:
            file.write(f"{item}\n")
            file.flush()
            os.fsync(file.fileno())
        if kill == "after-effect":
            os.kill(os.getpid(), signal.SIGKILL)
        return f"charged {item}"

    return charge


class DyingStore(JsonlStore):
    """Dies (SIGKILL) when asked to store an intent, if told to: the crash between approval and intent."""

    def __init__(self, path: str, kill: str) -> None:
        super().__init__(path)
        self.kill = kill

    def append(self, header: dict[str, Any], entries: Sequence[dict[str, Any]]) -> None:
        if self.kill == "before-intent" and any(e.get("customType") == "piagent.tool_intent" for e in entries):
            os.kill(os.getpid(), signal.SIGKILL)
        super().append(header, entries)


def main(url: str, run_id: str, session_path: str, ledger: str, kill: str) -> None:
    faux = register_faux_provider()
    faux.set_responses([respond] * 5)
    session = Session(DyingStore(session_path, kill))
    agent = Agent(model=faux.get_model(), tools=[charging_tool(ledger, kill)], session=session)
    with attach(agent, url, run_id, approval=Approval(tools={"charge"}, timeout=30)):
        run_pending(agent)


if __name__ == "__main__":
    main(*sys.argv[1:])
