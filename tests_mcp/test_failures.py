"""Servers that crash, exit, write garbage, stay silent or break JSON-RPC: clear errors, no hang."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from piagent import Agent
from piagent.mcp import (
    MCPClient,
    MCPConnectionError,
    MCPProtocolError,
    MCPTimeoutError,
    UnsupportedProtocolVersionError,
)
from piagent.testing import faux_message, faux_tool_call, register_faux_provider

from .conftest import HERE, everything, needs_sdk, sdk_stdio

BAD_SERVER = os.path.join(HERE, "bad_server.py")


def bad(mode: str, **options) -> MCPClient:
    return MCPClient.stdio(sys.executable, [BAD_SERVER, mode], **options)


def test_a_server_that_exits_at_start_is_a_clear_error_with_its_stderr() -> None:
    with pytest.raises(MCPConnectionError, match=r"exited with status 3.*no configuration found"):
        bad("crash")


def test_a_command_that_does_not_exist_is_a_clear_error() -> None:
    with pytest.raises(MCPConnectionError, match="cannot start MCP server"):
        MCPClient.stdio("/nonexistent/mcp-server")


def test_garbage_on_stdout_is_a_protocol_error_not_a_hang() -> None:
    with pytest.raises(MCPProtocolError, match="Welcome to my server"):
        bad("garbage", connect_timeout=60)


def test_a_server_that_never_answers_initialize_times_out() -> None:
    with pytest.raises(MCPTimeoutError, match="did not answer"):
        bad("silent", discover_timeout=0.5, connect_timeout=0.5)


def test_malformed_json_rpc_is_a_protocol_error() -> None:
    with pytest.raises(MCPProtocolError, match="malformed JSON-RPC response"):
        bad("malformed", protocol="2025-11-25")


def test_an_unknown_revision_in_the_answer_is_refused_naming_it() -> None:
    with pytest.raises(UnsupportedProtocolVersionError, match=r"'2099-01-01'.*2024-11-05, 2025-03-26"):
        bad("bad-version")


@needs_sdk
def test_a_server_killed_mid_call_fails_the_call_and_the_next_call_restarts_it() -> None:
    with sdk_stdio("2025-11-25") as client:
        first_pid = client._transport.process.pid
        outcome: list = []
        worker = threading.Thread(target=lambda: outcome.append(_raises(client.call_tool, "wait_forever")))
        worker.start()
        while "started=1" not in client.call_tool("calls_seen")["content"][0]["text"]:
            pass  # the call is running on the server once it counts it
        os.kill(first_pid, signal.SIGKILL)
        worker.join(timeout=30)
        assert isinstance(outcome[0], MCPConnectionError) and "status -9" in str(outcome[0])
        result = client.call_tool("add", {"a": 1, "b": 2})  # a new server process
        assert '"total": 3' in result["content"][0]["text"]
        assert client._transport.process.pid != first_pid


def test_a_server_exiting_mid_call_gives_the_agent_an_error_result_not_a_crash() -> None:
    faux = register_faux_provider()
    with bad("exit-on-call") as client:
        faux.set_responses([faux_message([faux_tool_call("echo", {})]), faux_message("done")])
        agent = Agent(model=faux.get_model(), tools=client.tools())
        result = agent.prompt("go")
        tool_result = agent.state.messages[2]
        assert tool_result.is_error and "exited with status 9" in tool_result.content[0].text
        assert result.stop_reason == "stop"


def test_closing_reaps_the_server_and_leaves_no_thread() -> None:
    before = set(threading.enumerate())
    client = everything()
    client.call_tool("echo", {"message": "x"})
    process = client._transport.process
    client.close()
    assert process.poll() is not None
    assert [t for t in threading.enumerate() if t not in before] == []


def test_an_unclosed_client_does_not_outlive_the_interpreter(tmp_path) -> None:
    from .conftest import EVERYTHING, NODE

    script = textwrap.dedent(
        f"""
        from piagent.mcp import MCPClient
        client = MCPClient.stdio({NODE!r}, [{EVERYTHING!r}])
        print(client._transport.process.pid, flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    pid = int(done.stdout.strip())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def _raises(function, *args):
    try:
        function(*args)
    except Exception as exc:
        return exc
    return None
