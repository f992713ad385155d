"""The interactive ``piagent`` session in a real pseudo-terminal (tmux), against a scripted
OpenAI-compatible server: what the user sees on the screen while typing during an answer.

tmux renders the terminal, so the assertions are on the screen itself, not on the bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest

from piagent.ai.types import UserMessage
from piagent.sessions import JsonlSession
from tests.ai.providers.openai_wire import chat_text, chunk
from tests.support.scripted_server import ScriptedServer, Wait, sse

WAIT = 20.0

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None or sys.platform == "win32", reason="needs tmux (installed by .ci/run)"
)


class Screen:
    """A command running in a detached tmux session of a fixed size."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.name = f"piagent-test-{uuid.uuid4().hex[:8]}"
        self.tmux = ["tmux", "-L", self.name]  # a private tmux server: nothing shared with the user's
        shell_env = " ".join(f"{k}={_quote(v)}" for k, v in env.items())
        line = f"env -i {shell_env} {' '.join(_quote(c) for c in command)}; echo EXIT=$?; sleep 60"
        subprocess.run(
            [*self.tmux, "new-session", "-d", "-s", self.name, "-x", "100", "-y", "40", line], check=True, timeout=WAIT
        )

    def text(self) -> str:
        done = subprocess.run(
            [*self.tmux, "capture-pane", "-p", "-t", self.name], capture_output=True, text=True, timeout=WAIT
        )
        return done.stdout

    def title(self) -> str:
        """The terminal's title (an escape sequence that got through could set it)."""
        return subprocess.run(
            [*self.tmux, "display-message", "-p", "-t", self.name, "#{pane_title}"],
            capture_output=True,
            text=True,
            timeout=WAIT,
        ).stdout

    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.text().splitlines()]

    def wait_for(self, condition: Callable[[str], bool], what: str) -> str:
        """Poll the screen until ``condition`` holds (bounded by WAIT)."""
        deadline = time.monotonic() + WAIT
        while True:
            screen = self.text()
            if condition(screen):
                return screen
            if time.monotonic() > deadline:
                pytest.fail(f"never saw {what} on the screen:\n{screen}")
            time.sleep(0.05)

    def keys(self, *keys: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-t", self.name, *keys], check=True, timeout=WAIT)

    def type(self, text: str) -> None:
        subprocess.run([*self.tmux, "send-keys", "-l", "-t", self.name, text], check=True, timeout=WAIT)

    def close(self) -> None:
        subprocess.run([*self.tmux, "kill-server"], capture_output=True, timeout=WAIT)


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as scripted:
        yield scripted


def input_line_is_empty(screen: str) -> bool:
    return "›" in [line.rstrip() for line in screen.splitlines()]  # tmux drops trailing spaces


def piagent_screen(server: ScriptedServer, *args: str) -> Screen:
    env = {"PATH": os.environ.get("PATH", ""), "TERM": "xterm-256color", "HOME": os.environ.get("HOME", "/tmp")}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return Screen([sys.executable, "-m", "piagent", "--base-url", f"{server.url}/v1", "--model", "m1", *args], env)


def test_text_typed_while_the_answer_streams_stays_on_the_input_line_below_it(server: ScriptedServer) -> None:
    release = threading.Event()
    server.reply(
        sse(chunk({"role": "assistant", "content": ""}), chunk({"content": "The answer begins"}))
        + [Wait(release, WAIT)]
        + chat_text(" and ends here.")[1:]
    )
    server.reply(chat_text("Steered reply."))
    screen = piagent_screen(server)
    try:
        screen.wait_for(input_line_is_empty, "the input line")
        screen.type("hello")
        screen.keys("Enter")
        screen.wait_for(lambda s: "The answer begins" in s, "the first delta")
        screen.type("be brief")  # typed while the answer streams, not yet entered
        shown = screen.wait_for(lambda s: "› be brief" in s, "the typed text on the input line")
        lines = [line for line in shown.splitlines() if line.strip()]
        assert lines[-1].rstrip() == "› be brief"  # the input line is the last line, apart
        assert lines[-2].rstrip() == "The answer begins"  # the unfinished answer line above it
        screen.keys("Enter")
        screen.wait_for(lambda s: "(steering queued: be brief)" in s, "the steering note")
        release.set()
        final = screen.wait_for(lambda s: "Steered reply." in s, "the steered answer")
        assert "The answer begins and ends here." in final.splitlines()  # never mixed with typing
        assert "» be brief" in final
        screen.keys("C-d")
        screen.wait_for(lambda s: "EXIT=0" in s, "exit status 0 after Ctrl-D")
    finally:
        release.set()
        screen.close()


def test_unknown_commands_help_and_double_ctrl_c_in_a_terminal(server: ScriptedServer) -> None:
    screen = piagent_screen(server)
    try:
        screen.wait_for(input_line_is_empty, "the input line")
        screen.type("/nope")
        screen.keys("Enter")
        screen.wait_for(lambda s: "unknown command /nope" in s, "the unknown-command note")
        screen.type("/help")
        screen.keys("Enter")
        screen.wait_for(lambda s: "/follow TEXT" in s, "the command list")
        screen.keys("C-c")
        screen.wait_for(lambda s: "(Ctrl-C again, /quit or Ctrl-D to quit)" in s, "the Ctrl-C hint")
        screen.keys("C-c")
        screen.wait_for(lambda s: "EXIT=130" in s, "exit status 130 after a double Ctrl-C")
        assert not server.requests  # nothing reached the model
    finally:
        screen.close()


def test_a_prompt_on_a_session_another_agent_is_writing_is_refused_on_screen_and_the_next_one_runs(
    server: ScriptedServer, tmp_path: Path
) -> None:
    path = tmp_path / "shared.jsonl"
    JsonlSession(path).append_message(UserMessage("Capital of France?"))
    server.reply(chat_text("Rome."))
    env = {"PATH": os.environ.get("PATH", ""), "TERM": "xterm-256color", "HOME": str(tmp_path)}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    command = [sys.executable, "-m", "piagent", "--base-url", f"{server.url}/v1", "--model", "m1"]
    screen = Screen([*command, "--session", str(path)], env)
    release = JsonlSession(path).begin_run()  # another agent's run, in progress
    try:
        screen.wait_for(input_line_is_empty, "the input line")
        screen.type("And Italy?")
        screen.keys("Enter")
        busy = f"piagent: session {path} is being written by another agent's run"
        screen.wait_for(lambda s: busy in s.replace("\n", ""), "the busy note")  # wrapped at 100 columns
        assert not server.requests
        release()
        screen.type("And Italy?")
        screen.keys("Enter")
        screen.wait_for(lambda s: "Rome." in s, "the answer once the other run has ended")
        screen.keys("C-d")
        screen.wait_for(lambda s: "EXIT=0" in s, "exit status 0 after Ctrl-D")
    finally:
        release()
        screen.close()
    assert [m.role for m in JsonlSession(path).messages()] == ["user", "user", "assistant"]


def test_escape_sequences_in_the_answer_neither_retitle_nor_clear_the_terminal(server: ScriptedServer) -> None:
    server.reply(chat_text("kept line\n", "title\x1b]2;owned\x07 clear\x1b[2J\x1b[H end"))
    screen = piagent_screen(server, "--no-session", "hi")
    try:
        shown = screen.wait_for(lambda s: "EXIT=" in s, "the end of the run")
        assert "EXIT=0" in shown
        assert "kept line" in shown  # not cleared away
        assert "title\\x1b]2;owned\\x07 clear\\x1b[2J\\x1b[H end" in shown
        assert "owned" not in screen.title()
    finally:
        screen.close()


def test_a_log_line_quoting_a_hostile_session_file_cannot_retitle_the_terminal(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """Log lines (warnings, and everything ``-v`` prints: an MCP server's stderr...) quote
    untrusted text too: on a terminal their control characters are shown, not obeyed."""
    path = tmp_path / "hostile.jsonl"
    JsonlSession(path).append_message(UserMessage("Capital of France?"))
    entry = json.loads(path.read_text().splitlines()[-1])
    entry["id"] = "x\x1b]2;owned\x07"  # OSC 2: sets the window title; twice, so it is logged
    with open(path, "a") as file:
        file.write(json.dumps(entry) + "\n" + json.dumps(entry) + "\n")
    server.reply(chat_text("Paris."))
    screen = piagent_screen(server, "--session", str(path), "And?")
    try:
        shown = screen.wait_for(lambda s: "EXIT=" in s, "the run's end")
        assert "owned" not in screen.title()
        assert "entry id x\\x1b]2;owned\\x07 appears twice" in shown.replace("\n", "")
    finally:
        screen.close()


def test_an_mcp_servers_stderr_shown_with_v_neither_retitles_nor_clears_the_terminal(server: ScriptedServer) -> None:
    hostile = os.path.join(os.path.dirname(__file__), "support", "hostile_mcp_server.py")
    said = "--stderr=title\\x1b]2;owned\\x07 clear\\x1b[2J\\x1b[H end"
    server.reply(chat_text("kept line"))
    screen = piagent_screen(server, "--no-session", "-v", "--mcp", f"{sys.executable} {hostile} '{said}'", "hi")
    try:
        shown = screen.wait_for(lambda s: "EXIT=" in s, "the end of the run")
        assert "EXIT=0" in shown and "kept line" in shown
        assert "title\\x1b]2;owned\\x07 clear\\x1b[2J\\x1b[H end" in shown
        assert "owned" not in screen.title()
    finally:
        screen.close()
