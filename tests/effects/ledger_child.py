"""A zygote for the effects tests: imports piagent once, then forks one agent process per command.

Commands on stdin, one per line, each answered with the child's exit status (``-9``: killed)::

    STORE SESSION_PATH LEDGER_PATH TRACE_PATH KILL_AT

The child opens the session (``jsonl`` or ``sqlite``) and drives it to its end: ``prompt()``
on an empty one, ``continue_()`` on one left unfinished, nothing on a finished one. Its tools
append to LEDGER (a file outside piagent, fsynced): ``charge`` (``replay="never"``) one line
per effect, ``lookup`` (``replay="safe"``) nothing. Every checkpoint (each agent event, after
the session stored what it records; each tool's start; each effect) is appended to TRACE;
at checkpoint number KILL_AT (0: none), or the first labelled KILL_AT ("+" for spaces), the
child SIGKILLs itself, so the last line of TRACE is where it died.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from typing_extensions import Protocol

from piagent import Agent, AgentTool, idempotency_key, tool
from piagent.sessions import JsonlSession, Session, SqliteSession
from piagent.testing import faux_message, faux_tool_call, register_faux_provider

FINAL = "Every charge is settled."
PROMPT = "Charge a, b and c."
BATCHES = [
    [("charge", {"item": "a"}), ("charge", {"item": "b"}), ("lookup", {"item": "x"})],  # a parallel batch
    [("charge", {"item": "c"})],
]


def respond(context: Any, options: Any, state: Any, model: Any) -> Any:
    """The scripted model: the batches in order (counted by the assistant messages before), then the end."""
    done = sum(1 for m in context.messages if m.role == "assistant" and m.tool_calls)
    if done < len(BATCHES):
        return faux_message([faux_tool_call(name, args) for name, args in BATCHES[done]])
    return faux_message(FINAL)


class Checkpoints:
    """KILL_AT: a number (the checkpoint counted from 1) or a label, spaces written as "_"."""

    def __init__(self, trace_path: str, kill_at: str) -> None:
        self.trace = os.open(trace_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.kill_at = kill_at.replace("+", " ")
        self.count = 0

    def hit(self, label: str) -> None:
        self.count += 1
        os.write(self.trace, f"{label}\n".encode())
        if self.kill_at in (str(self.count), label):
            os.kill(os.getpid(), signal.SIGKILL)


class Points(Protocol):
    def hit(self, label: str) -> None: ...


def ledger_tools(points: Points, ledger_path: str) -> list[AgentTool]:
    """``charge`` ("never": appends ``<idempotency key> <item>`` to LEDGER, fsynced) and ``lookup``
    ("safe": nothing), each passing its checkpoints to ``points``."""

    @tool
    def charge(item: str) -> str:
        """Charge an item (an effect outside piagent)."""
        points.hit(f"before effect {item}")
        with open(ledger_path, "a") as ledger:
            ledger.write(f"{idempotency_key()} {item}\n")
            ledger.flush()
            os.fsync(ledger.fileno())
        points.hit(f"after effect {item}")
        return f"charged {item}"

    @tool(replay="safe")
    def lookup(item: str) -> str:
        """Look an item up."""
        points.hit(f"lookup {item}")
        return f"{item} is known"

    return [charge, lookup]


def ledger_agent(session: Session, points: Points, ledger_path: str) -> Agent:
    """The scripted agent charging a, b and c with :func:`ledger_tools`; every event is a checkpoint."""
    faux = register_faux_provider(chunk_tokens=(2, 4))
    faux.set_responses([respond] * 10)
    agent = Agent(model=faux.get_model(), tools=ledger_tools(points, ledger_path), session=session)
    agent.subscribe(lambda event: points.hit(event.type))
    return agent


def run(store: str, session_path: str, ledger_path: str, trace_path: str, kill_at: str) -> None:
    session = JsonlSession(session_path) if store == "jsonl" else SqliteSession(session_path, "run-1")
    agent = ledger_agent(session, Checkpoints(trace_path, kill_at), ledger_path)
    messages = agent.state.messages
    if not messages:
        agent.prompt(PROMPT)
    elif not (messages[-1].role == "assistant" and not messages[-1].tool_calls):
        agent.continue_()
    session.close()


def main() -> None:
    for line in sys.stdin:
        store, session_path, ledger_path, trace_path, kill_at = line.split()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                run(store, session_path, ledger_path, trace_path, kill_at)
            except BaseException:
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        sys.stdout.write(f"{code}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
