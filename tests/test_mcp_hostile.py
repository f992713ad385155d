"""The MCP client against hostile servers: real processes and real loopback HTTP servers.

A server is third-party code: whatever it does, a call ends within its timeout or abort, memory
and threads stay bounded, and ``close()`` returns. Thread counts and memory are measured in a
subprocess (``run_client``), so that nothing another test left behind is counted.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
from typing import Any, Callable

import pytest

from piagent import AbortController, AbortedError
from piagent.mcp import MCPClient, MCPConnectionError, MCPProtocolError, MCPTimeoutError

from .support.waits import WAIT

HOSTILE = os.path.join(os.path.dirname(__file__), "support", "hostile_mcp_server.py")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hostile(*extra_tools: str, **options: Any) -> MCPClient:
    return MCPClient.stdio(sys.executable, [HOSTILE, *extra_tools], protocol="2025-11-25", **options)


def outcome_within(fn: Callable[[], Any], timeout: float = WAIT) -> Any:
    """``fn()``'s result or exception, run on a thread; fails the test if it has not ended by ``timeout``."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(fn())
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"still blocked after {timeout} s"
    return box[0]


def run_client(code: str, timeout: float = 60) -> dict:
    """Run ``code`` in a fresh interpreter (``HOSTILE`` defined); it prints one JSON object last."""
    prelude = f"import json, sys, threading\nHOSTILE = {HOSTILE!r}\n"
    done = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- stdio ------------------------------------------------------------------------------------


def test_a_server_that_stops_reading_stdin_blocks_neither_a_call_nor_its_abort_nor_close() -> None:
    client = hostile(timeout=30)
    client.call_tool("stop_reading")
    big = "x" * 1_000_000  # far more than a pipe holds
    timed_out = outcome_within(lambda: client.call_tool("echo", {"text": big}, timeout=0.5))
    assert isinstance(timed_out, MCPTimeoutError)
    controller = AbortController()
    threading.Timer(0.2, controller.abort).start()
    aborted = outcome_within(lambda: client.call_tool("echo", {"text": big}, signal=controller.signal))
    assert isinstance(aborted, AbortedError)
    assert outcome_within(client.close, timeout=3 * WAIT) is None


def test_the_process_exits_after_an_aborted_call_to_a_server_that_stops_reading() -> None:
    result = run_client(
        """
        from piagent import AbortController, AbortedError
        from piagent.mcp import MCPClient
        client = MCPClient.stdio(sys.executable, [HOSTILE], protocol="2025-11-25")
        client.call_tool("stop_reading")
        controller = AbortController()
        threading.Timer(0.2, controller.abort).start()
        try:
            client.call_tool("echo", {"text": "x" * 1_000_000}, signal=controller.signal)
        except AbortedError:
            print(json.dumps({"aborted": True}))
        """,
        timeout=30,
    )
    assert result == {"aborted": True}


def test_a_server_that_never_reads_its_input_ends_the_connection_once_the_bound_is_queued() -> None:
    from piagent.mcp._stdio import MAX_PENDING_INPUT_BYTES

    with hostile(timeout=30) as client:
        client.call_tool("stop_reading")
        chunk = "x" * (MAX_PENDING_INPUT_BYTES // 4)
        errors = [outcome_within(lambda: client.call_tool("echo", {"text": chunk}, timeout=0.2)) for _ in range(4)]
        assert isinstance(errors[-1], MCPConnectionError)
        assert "does not read its input" in str(errors[-1])
        assert client.call_tool("echo", {"text": "a new server"})["content"][0]["text"] == "a new server"


def test_a_deeply_nested_line_fails_the_call_and_the_connection_keeps_working() -> None:
    with hostile(timeout=None) as client:
        error = outcome_within(lambda: client.call_tool("nested", {"depth": 100_000}))
        assert isinstance(error, MCPProtocolError)
        assert "nested too deeply" in str(error)
        assert client.call_tool("echo", {"text": "still here"})["content"][0]["text"] == "still here"


def test_server_requests_are_answered_on_a_bounded_number_of_threads() -> None:
    result = run_client(
        """
        from piagent.mcp import MCPClient
        from piagent.mcp._connection import ANSWER_THREADS, MAX_SERVER_REQUESTS
        release, entered, peak = threading.Event(), [], [0]

        def sampling(params):
            entered.append(1)
            peak[0] = max(peak[0], threading.active_count())
            release.wait(30)
            return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}

        client = MCPClient.stdio(sys.executable, [HOSTILE], protocol="2025-11-25", sampling=sampling)
        before = threading.active_count()
        client.call_tool("ping_flood", {"count": 3000})
        client.call_tool("sample_flood", {"count": 1000})
        client.call_tool("echo", {"text": "all sent"})  # answered after the floods were read
        peak[0] = max(peak[0], threading.active_count())
        release.set()
        client.close()
        print(json.dumps({"extra": peak[0] - before, "answer_threads": ANSWER_THREADS}))
        """
    )
    assert result["extra"] <= result["answer_threads"]


def test_a_long_stderr_line_is_logged_cut_to_its_bound(caplog: pytest.LogCaptureFixture) -> None:
    from piagent.mcp._stdio import MAX_STDERR_LINE_BYTES

    size = MAX_STDERR_LINE_BYTES * 4 + 1
    with caplog.at_level(logging.INFO, logger="piagent.mcp.server"), hostile() as client:
        client.call_tool("stderr_line", {"size": size})
    lines = [r.getMessage() for r in caplog.records if r.name == "piagent.mcp.server"]
    assert len(lines) == 1
    assert len(lines[0]) < MAX_STDERR_LINE_BYTES + 100
    assert f"[{size - MAX_STDERR_LINE_BYTES:,} more bytes cut]" in lines[0]
