"""A zygote for the crash test: imports piagent once, then forks one agent run per command.

Commands on stdin, one per line; each answered with one line on stdout:

    run PATH EVENTS CONTROL     fork a child that prompts an agent recording into PATH;
                                answers its pid
    resume PATH EVENTS CONTROL  fork a child that resumes the session at PATH with continue_()
    kill PID                    SIGKILL the child (it is still unreaped, so the pid is its own)
    wait PID                    reap the child; answers its exit status

The child reads the number of the checkpoint to stop at from the CONTROL fifo (0: none), reports
every checkpoint on the EVENTS fifo and, at that one, says "stopped" and waits for a byte on
CONTROL: the test either lets it go on or kills it right there. Checkpoints: every agent event
(so mid-stream between deltas, at each turn), each tool's start (mid-tool-batch), and each
``message_end`` after the session appended the message ("ended" with the message's JSON).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading
import traceback
from typing import Any

from piagent import Agent, tool
from piagent.sessions import JsonlSession
from piagent.testing import faux_message, faux_tool_call, register_faux_provider

FINAL = "All three lookups are done."


def respond(context: Any, options: Any, state: Any, model: Any) -> Any:
    """The scripted model: answer a user prompt with a parallel tool batch, tool results with the end."""
    last = context.messages[-1]
    if last.role == "user":
        return faux_message(
            [faux_tool_call("lookup", {"key": key}) for key in ("alpha", "beta", "gamma")],
        )
    return faux_message(FINAL)


class Reporter:
    """Reports every checkpoint; at the one numbered by the test, says "stopped" and waits for a byte."""

    def __init__(self, events_path: str, control_path: str) -> None:
        self.events = open(events_path, "w", buffering=1)  # noqa: SIM115 - lives as long as the child
        self.control = open(control_path, "rb", buffering=0)  # noqa: SIM115 - likewise
        self.stop_at = int(self.control.readline())  # 0: never stop
        self.count = 0
        self.lock = threading.Lock()

    def checkpoint(self, line: str) -> None:
        with self.lock:
            self.count += 1
            self.events.write(line + "\n")
            if self.count == self.stop_at:
                self.events.write("stopped\n")
                if not self.control.read(1):
                    os._exit(3)  # the test went away


def child(mode: str, path: str, events_path: str, control_path: str) -> None:
    reporter = Reporter(events_path, control_path)
    faux = register_faux_provider(api="faux-crash", chunk_tokens=(2, 2))
    faux.set_responses([respond] * 20)

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        reporter.checkpoint(f"tool {key}")
        return f"value of {key}"

    agent = Agent(model=faux.get_model(), tools=[lookup], session=JsonlSession(path))

    def listen(event: Any) -> None:
        if event.type == "message_end":
            reporter.checkpoint("ended " + json.dumps(event.message.to_dict()))
        else:
            reporter.checkpoint(event.type)

    agent.subscribe(listen)
    if mode == "run" or not agent.state.messages:  # (a resume: killed before the prompt was stored)
        result = agent.prompt("Look up alpha, beta and gamma.")
    elif agent.state.messages[-1].role == "assistant" and agent.state.messages[-1].stop_reason == "stop":
        result = None  # the conversation had finished
    else:
        result = agent.continue_()
    reporter.events.write(f"finished {result.stop_reason if result else 'already'}\n")
    reporter.events.close()


def warm_up() -> None:
    """Run once in the zygote, so that each fork starts with piagent's first-use costs paid."""
    with tempfile.TemporaryDirectory() as directory:
        control = os.path.join(directory, "control")
        with open(control, "w") as file:
            file.write("0\n")
        child("run", os.path.join(directory, "warm.jsonl"), os.devnull, control)


def main() -> None:
    warm_up()
    children: dict[int, None] = {}
    for line in sys.stdin:
        command, *args = line.split()
        if command in ("run", "resume"):
            pid = os.fork()
            if pid == 0:
                try:
                    child(command, *args)
                except BaseException:
                    traceback.print_exc()
                    os._exit(1)
                os._exit(0)
            children[pid] = None
            answer = str(pid)
        elif command == "kill":
            os.kill(int(args[0]), signal.SIGKILL)
            answer = "ok"
        elif command == "wait":
            _, status = os.waitpid(int(args[0]), 0)
            children.pop(int(args[0]), None)
            answer = str(os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status)
        else:
            answer = f"unknown command {command}"
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
