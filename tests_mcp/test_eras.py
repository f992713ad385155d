"""Choosing and speaking a protocol revision, against servers of every era."""

from __future__ import annotations

import pytest

from piagent.mcp import MCPClient, UnsupportedProtocolVersionError

from .conftest import FILESYSTEM, LEGACY_EVERYTHING, NODE, everything, needs_sdk, sampling_answer, sdk_stdio

ALL_CALLBACKS = {
    "sampling": sampling_answer("blue"),
    "elicitation": lambda params: {"action": "accept", "content": {"name": "Ann"}},
}


def exercise(client: MCPClient, roots_dir: str) -> None:
    """Tools, a call with structured output, and each server-to-client request type."""
    names = [t.name for t in client.tools()]
    assert {"add", "greet", "colour", "roots"} <= set(names)
    assert client.call_tool("add", {"a": 2, "b": 40})["content"][0]["text"].replace(" ", "").find('"total":42') >= 0
    assert client.call_tool("colour")["content"][0]["text"] == "the model said blue"
    assert client.call_tool("roots")["content"][0]["text"].startswith("file://")
    greeting = client.call_tool("greet")
    assert greeting["content"][0]["text"] == "hello Ann, aged 30"


@needs_sdk
@pytest.mark.parametrize(
    ("protocol", "expected"),
    [("auto", "2026-07-28"), ("2026-07-28", "2026-07-28"), ("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18")],
)
def test_sdk_server_over_stdio_in_each_era(protocol: str, expected: str, tmp_path) -> None:
    with sdk_stdio(protocol, roots=[str(tmp_path)], **ALL_CALLBACKS) as client:
        assert client.protocol_version == expected
        exercise(client, str(tmp_path))


@needs_sdk
@pytest.mark.parametrize(
    ("protocol", "expected"),
    [("auto", "2026-07-28"), ("2026-07-28", "2026-07-28"), ("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18")],
)
def test_sdk_server_over_http_in_each_era(protocol: str, expected: str, sdk_http: str, tmp_path) -> None:
    with MCPClient.http(sdk_http, protocol=protocol, roots=[str(tmp_path)], **ALL_CALLBACKS) as client:
        assert client.protocol_version == expected
        assert (client._transport.session_id is None) == (expected == "2026-07-28")
        exercise(client, str(tmp_path))


@needs_sdk
def test_revisions_before_2025_06_18_have_no_elicitation(sdk_http: str) -> None:
    with MCPClient.http(sdk_http, protocol="2025-03-26", **ALL_CALLBACKS) as client:
        assert client.protocol_version == "2025-03-26"
        result = client.call_tool("add", {"a": 1, "b": 1})  # structuredContent is simply ignored
        assert client.tools()[0].name == "add" and result["content"]
        with pytest.raises(Exception, match="elicitation"):
            client.call_tool("greet")  # the capability cannot be declared in 2025-03-26


def test_auto_falls_back_to_initialize_on_the_reference_server() -> None:
    with everything() as client:
        assert client.protocol_version == "2025-11-25"
        assert "echo" in [t.name for t in client.tools()]


def test_auto_speaks_2024_11_05_to_a_server_of_that_era() -> None:
    """server-everything 2025.3.19 is built on SDK 1.0.1, which answers initialize with 2024-11-05."""
    with MCPClient.stdio(NODE, [LEGACY_EVERYTHING]) as client:
        assert client.protocol_version == "2024-11-05"
        result = client.call_tool("add", {"a": 2, "b": 3})
        assert "5" in result["content"][0]["text"]


def test_filesystem_server_in_auto(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("remember the milk")
    with MCPClient.stdio(NODE, [FILESYSTEM, str(tmp_path)]) as client:
        assert client.protocol_version == "2025-11-25"
        result = client.call_tool("read_text_file", {"path": str(tmp_path / "notes.txt")})
        assert result["content"][0]["text"] == "remember the milk"


def test_an_unknown_requested_revision_is_refused_naming_the_supported_ones() -> None:
    with pytest.raises(UnsupportedProtocolVersionError, match=r"'1999-01-01'.*2024-11-05.*2026-07-28"):
        everything(protocol="1999-01-01")


def test_forcing_the_stateless_era_on_a_handshake_server_fails_clearly() -> None:
    with pytest.raises(Exception, match="server/discover|Method not found"):
        everything(protocol="2026-07-28")
