"""``piagent --mcp "COMMAND ARGS"`` and ``--mcp-url URL`` add MCP servers' tools to the agent."""

from __future__ import annotations

import io

import pytest

from piagent.cli import main
from piagent.testing import faux_message, faux_tool_call, register_faux_provider

from .conftest import EVERYTHING, FILESYSTEM, NODE, needs_sdk


@pytest.fixture(autouse=True)
def _sessions_in_a_temporary_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command records every run in the user's session directory: keep these out of ~."""
    monkeypatch.setenv("PIAGENT_SESSIONS_DIR", str(tmp_path_factory.mktemp("piagent-sessions")))


def run(*argv: str, responses: list) -> tuple[int, str, str]:
    faux = register_faux_provider()
    faux.set_responses(responses)
    out, err = io.StringIO(), io.StringIO()
    try:
        code = main(list(argv), stdin=io.StringIO(""), stdout=out, stderr=err, model=faux.get_model())
    finally:
        faux.unregister()
    return code, out.getvalue(), err.getvalue()


def test_mcp_option_adds_a_stdio_servers_tools(tmp_path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    calls = [
        faux_tool_call("echo", {"message": "hi"}),
        faux_tool_call("read_text_file", {"path": str(tmp_path / "a.txt")}),
    ]
    code, out, err = run(
        "--mcp", f"{NODE} {EVERYTHING}",
        "--mcp", f"{NODE} {FILESYSTEM} {tmp_path}",
        "go",
        responses=[faux_message(calls), faux_message("done")],
    )  # fmt: skip
    assert code == 0 and out == "done\n"
    assert "✓ echo (" in err and "Echo: hi" in err and "✓ read_text_file (" in err and "alpha" in err


@needs_sdk
def test_mcp_url_option_adds_an_http_servers_tools(sdk_http: str) -> None:
    responses = [faux_message([faux_tool_call("add", {"a": 2, "b": 3})]), faux_message("ok")]
    code, out, err = run("--mcp-url", sdk_http, "go", responses=responses)
    assert code == 0 and '"total": 5' in err


def test_a_server_that_cannot_start_is_a_usage_error_naming_it() -> None:
    code, out, err = run("--mcp", "/nonexistent/server --flag", "go", responses=[])
    assert code == 2 and "--mcp /nonexistent/server --flag: cannot start MCP server" in err


def test_two_servers_offering_the_same_tool_is_a_usage_error() -> None:
    code, out, err = run("--mcp", f"{NODE} {EVERYTHING}", "--mcp", f"{NODE} {EVERYTHING}", "go", responses=[])
    assert code == 2 and "another MCP server already offers" in err and "echo" in err
