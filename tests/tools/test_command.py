"""run_command: output, exit status, truncation, timeout, and killing the process group on abort."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any, Optional

import pytest

from piagent import (
    AbortController,
    AbortedError,
    AbortSignal,
    AgentContext,
    AgentLoopConfig,
    AgentToolResult,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
)
from piagent.testing import faux_message, faux_tool_call, register_faux_provider
from piagent.tools import run_command
from tests.support.waits import wait_until

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX shell and process groups")

WAIT = 10.0


def call(command: str, signal: Optional[AbortSignal] = None, **options: Any) -> str:
    t = run_command(**options)
    result = t.execute("c1", {"command": command}, signal or AbortController().signal, lambda p: None)
    return "".join(block.text for block in result.content)


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a killed orphan may wait to be reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in ("Z", "X")


def test_combined_output_is_returned() -> None:
    assert call("echo out; echo err >&2") == "out\nerr"


def test_runs_in_the_given_directory(tmp_path: Path) -> None:
    (tmp_path / "marker.txt").write_text("")
    assert call("ls", cwd=tmp_path) == "marker.txt"


def test_no_output_says_so() -> None:
    assert call("true") == "(no output)"


def test_non_zero_exit_is_an_error_with_output_and_status() -> None:
    with pytest.raises(RuntimeError) as info:
        call("echo failing; exit 3")
    assert str(info.value) == "failing\n\nCommand exited with code 3"


def test_long_output_keeps_its_tail_with_a_note() -> None:
    text = call("seq 1 100000", max_output_bytes=20)
    total = sum(len(f"{i}\n") for i in range(1, 100001))
    assert text.startswith(f"[Output truncated: showing the last 20 of {total} bytes]\n")
    assert text.endswith("99999\n100000")


def test_command_outliving_its_timeout_is_killed() -> None:
    with pytest.raises(TimeoutError, match="Command timed out after 0.3 seconds and was killed"):
        call("echo started; exec sleep 30", timeout=0.3)


def test_abort_kills_the_whole_process_group_promptly(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    controller = AbortController()
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call(f"sleep 30 & echo $! > {pidfile}; wait", signal=controller.signal))
        except Exception as exc:
            outcome.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    assert wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), WAIT)
    pid = int(pidfile.read_text())
    assert alive(pid)
    controller.abort()
    worker.join(WAIT)  # far less than the 30s the sleep would take
    assert not worker.is_alive()
    assert isinstance(outcome[0], RuntimeError) and "Command aborted" in str(outcome[0])
    assert wait_until(lambda: not alive(pid), WAIT), f"sleep {pid} survived the abort"


def test_already_aborted_signal_starts_nothing(tmp_path: Path) -> None:
    controller = AbortController()
    controller.abort()
    with pytest.raises(AbortedError):
        call(f"touch {tmp_path / 'ran'}", signal=controller.signal)
    assert not (tmp_path / "ran").exists()


def test_background_child_holding_the_output_open_does_not_hang_the_call(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    text = call(f"sleep 30 & echo $! > {pidfile}; echo parent done")
    assert text == "parent done"
    pid = int(pidfile.read_text())
    assert wait_until(lambda: not alive(pid), WAIT)


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError):
        run_command(timeout=0)
    with pytest.raises(ValueError):
        run_command(cwd="/definitely/not/here")


def test_schema_shows_only_the_command() -> None:
    assert run_command().parameters == {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The shell command line to run."}},
        "required": ["command"],
        "additionalProperties": False,
    }


def test_tool_result_is_text(tmp_path: Path) -> None:
    result = run_command().execute("c", {"command": "echo hi"}, AbortController().signal, lambda p: None)
    assert isinstance(result, AgentToolResult) and result.content[0].text == "hi"


def test_aborting_the_run_kills_the_command_through_the_loop(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    controller = AbortController()
    faux = register_faux_provider()
    faux.set_responses(
        [faux_message([faux_tool_call("run_command", {"command": f"sleep 30 & echo $! > {pidfile}; wait"})])]
    )
    outcome: list[Any] = []

    def run() -> None:
        outcome.append(
            run_agent_loop(
                [UserMessage("go")],
                AgentContext(tools=[run_command(timeout=60)]),
                AgentLoopConfig(model=faux.get_model()),
                lambda event: None,
                signal=controller.signal,
            )
        )

    worker = threading.Thread(target=run)
    try:
        worker.start()
        assert wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), WAIT)
        pid = int(pidfile.read_text())
        controller.abort()
        worker.join(WAIT)
        assert not worker.is_alive()
    finally:
        faux.unregister()
    (result,) = [m for m in outcome[0] if isinstance(m, ToolResultMessage)]
    assert result.is_error and "Command aborted" in result.content[0].text
    assert wait_until(lambda: not alive(pid), WAIT), f"sleep {pid} survived the abort"
