"""Ctrl-C during ``prompt()`` ends the run as ``abort()`` does, then raises (docs/loop.md#rule-22).

Each test runs a small program in a child process and sends it a real SIGINT, as a terminal's
Ctrl-C arrives, once the child printed that its answer streams. The child reports, as one
JSON line, what its listeners saw, its transcript, and whether ``prompt()`` raised
``KeyboardInterrupt``; then it prompts again, to show the agent is usable.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.ai.providers.openai_wire import chat_text, chunk
from tests.support.scripted_server import ScriptedServer, Wait, sse

pytestmark = [
    pytest.mark.timeout(30),
    pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process is POSIX"),
]

WAIT = 10.0  # bound of every wait; never reached when the code is right

CHILD = r"""
import json, sys
from piagent import Agent
from piagent.ai import custom_model
from piagent.testing import faux_message, register_faux_provider

mode = sys.argv[1]
if mode == "faux":
    # paced so that, after its first piece, the answer waits ~1000 s for the next: only an abort ends it
    faux = register_faux_provider(tokens_per_second=0.004)
    faux.set_responses([faux_message("Once upon a time " * 20), faux_message("usable again")])
    agent = Agent(model=faux.get_model())
else:
    agent = Agent(model=custom_model("m1", base_url=sys.argv[2], provider="vllm"))
events, ends = [], []

def report(event):
    if event.type == "message_update":
        if event.assistant_message_event.type == "text_delta" and not events[-1:] == ["streaming"]:
            events.append("streaming")
            print("STREAMING " + json.dumps(event.message.content[0].text), flush=True)
        return
    events.append(event.type)
    if event.type == "message_end" and event.message.role == "assistant":
        ends.append(event.message)
        if mode == "hold":  # the run is finishing: wait here until a second Ctrl-C
            print("FINISHING", flush=True)
            sys.stdin.readline()

unsubscribe = agent.subscribe(report)
try:
    agent.prompt("Tell me a story")
    interrupted = False
except KeyboardInterrupt:
    interrupted = True
last = agent.state.messages[-1]
outcome = dict(
    interrupted=interrupted,
    events=[e for e in events if e != "streaming"],
    roles=[m.role for m in agent.state.messages],
    stop_reason=getattr(last, "stop_reason", None),
    text=last.text if last.role == "assistant" else None,
    error_message=agent.state.error_message,
    ended=[(m.stop_reason, m.text) for m in ends],
    idle=not agent.state.is_streaming and agent.signal is None and agent.state.streaming_message is None,
)
if mode == "faux":
    faux.tokens_per_second = None
unsubscribe()
outcome["next"] = agent.prompt("And now?").text
print("OUTCOME " + json.dumps(outcome), flush=True)
"""

# the prompt's message, then the answer cut short, as abort() ends a run
ABORTED_RUN = [
    *("agent_start", "turn_start", "message_start", "message_end"),
    *("message_start", "message_end", "turn_end", "agent_end"),
]


def child(tmp_path: Path, *argv: str, program: str = CHILD) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["PIAGENT_HOME"] = str(tmp_path)
    return subprocess.Popen(
        [sys.executable, "-c", program, *argv],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def line_within(process: subprocess.Popen[str], prefix: str) -> str:
    """The rest of the child's next line, which must start with ``prefix`` (read on a helper thread,
    given up after WAIT seconds)."""
    box: list[str] = []
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: box.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(WAIT)
    line = box[0] if box else ""
    assert line.split(" ", 1)[0].strip() == prefix, line
    return line[len(prefix) :].strip()


def outcome_after_ctrl_c(process: subprocess.Popen[str], *markers: str) -> tuple[str, dict[str, Any]]:
    """A Ctrl-C each time the child prints the next of ``markers``; the rest of the first marker's
    line and the child's outcome (the child must then exit 0)."""
    try:
        lines = []
        for marker in markers:
            lines.append(line_within(process, marker))
            process.send_signal(signal.SIGINT)
        outcome = json.loads(line_within(process, "OUTCOME"))
        process.communicate(timeout=WAIT)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(WAIT)
    assert process.returncode == 0
    return lines[0], outcome


def interrupted_outcome(process: subprocess.Popen[str], second_ctrl_c: bool = False) -> tuple[str, dict[str, Any]]:
    """Ctrl-C once the child streams (again once it holds the finishing run); its partial text and outcome."""
    streaming, outcome = outcome_after_ctrl_c(process, "STREAMING", *(["FINISHING"] if second_ctrl_c else []))
    return json.loads(streaming), outcome


def test_ctrl_c_while_a_faux_answer_streams_ends_the_run_as_an_abort_then_raises(tmp_path):
    partial, outcome = interrupted_outcome(child(tmp_path, "faux"))
    assert outcome["interrupted"] is True
    assert outcome["events"] == ABORTED_RUN
    assert partial and ("Once upon a time " * 20).startswith(partial)  # the first piece only
    assert outcome["roles"] == ["user", "assistant"]
    assert (outcome["stop_reason"], outcome["text"]) == ("aborted", partial)  # the streamed text kept
    assert outcome["ended"] == [["aborted", partial]]
    assert outcome["error_message"] == "Request was aborted"
    assert outcome["idle"] is True and outcome["next"] == "usable again"


def test_ctrl_c_while_an_http_answer_streams_ends_the_run_as_an_abort_then_raises(tmp_path):
    release = threading.Event()
    with ScriptedServer() as server:
        head = sse(chunk({"role": "assistant", "content": ""}), chunk({"content": "Partial"}))
        server.reply(head + [Wait(release, WAIT)] + chat_text(" never seen"))
        server.reply(chat_text("Back."))
        try:
            partial, outcome = interrupted_outcome(child(tmp_path, "http", f"{server.url}/v1"))
        finally:
            release.set()
    assert partial == "Partial"
    assert outcome["interrupted"] is True
    assert outcome["events"] == ABORTED_RUN
    assert outcome["roles"] == ["user", "assistant"]
    assert (outcome["stop_reason"], outcome["text"]) == ("aborted", "Partial")
    assert outcome["ended"] == [["aborted", "Partial"]]
    assert outcome["error_message"] == "Request was aborted"
    assert outcome["idle"] is True and outcome["next"] == "Back."
    # the aborted answer stays in the transcript, out of the next request (docs/llm.md#history-normalisation)
    assert [m["role"] for m in server.requests[-1].json["messages"]] == ["user", "user"]


def test_a_second_ctrl_c_while_the_run_finishes_raises_at_once_and_leaves_the_agent_usable(tmp_path):
    """The first Ctrl-C aborts; the run is held in a listener of its aborted message_end; the
    second Ctrl-C raises there at once: no turn_end or agent_end, the agent settled all the same."""
    release = threading.Event()
    with ScriptedServer() as server:
        head = sse(chunk({"role": "assistant", "content": ""}), chunk({"content": "Partial"}))
        server.reply(head + [Wait(release, WAIT)] + chat_text(" never seen"))
        server.reply(chat_text("Back."))
        try:
            _, outcome = interrupted_outcome(child(tmp_path, "hold", f"{server.url}/v1"), second_ctrl_c=True)
        finally:
            release.set()
    assert outcome["interrupted"] is True
    assert outcome["events"] == ABORTED_RUN[:6]  # raised inside the message_end listener
    assert outcome["roles"] == ["user", "assistant"]
    assert (outcome["stop_reason"], outcome["text"]) == ("aborted", "Partial")
    assert outcome["idle"] is True and outcome["next"] == "Back."


HOOK_CHILD = r"""
import json, threading
from piagent import Agent, tool
from piagent.testing import faux_message, faux_tool_call, register_faux_provider

faux = register_faux_provider()
faux.set_responses([faux_message([faux_tool_call("noop", {})]), faux_message("usable again")])

@tool
def noop() -> str:
    '''Nothing.'''
    return "ok"

def ask_the_user(context, signal):
    print("ASKING", flush=True)
    threading.Event().wait()  # stands for input(): only an exception ends this wait

agent = Agent(model=faux.get_model(), tools=[noop], before_tool_call=ask_the_user)
try:
    agent.prompt("go")
    interrupted = False
except KeyboardInterrupt:
    interrupted = True
agent.before_tool_call = None
outcome = dict(interrupted=interrupted, idle=not agent.state.is_streaming, next=agent.prompt("again").text)
print("OUTCOME " + json.dumps(outcome), flush=True)
"""


def test_ctrl_c_in_a_hook_waiting_for_the_user_interrupts_the_hook_at_once(tmp_path):
    """A Ctrl-C that lands in the program's own code (a hook waiting on input()) raises there, as
    Python would: an abort alone would leave the hook waiting for an answer nobody gives."""
    _, outcome = outcome_after_ctrl_c(child(tmp_path, program=HOOK_CHILD), "ASKING")
    assert outcome == {"interrupted": True, "idle": True, "next": "usable again"}
