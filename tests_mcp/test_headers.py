"""The stateless era's request headers over HTTP: ``Mcp-Name`` and ``x-mcp-header`` mirroring.

The official SDK's server checks ``Mcp-Param-*`` headers against the body and refuses a
``tools/call`` whose headers are missing or wrong with -32020, so a call that succeeds is
the proof that piagent sent them right. The conformance framework's header scenarios run
in test_conformance.py.
"""

from __future__ import annotations

import logging
from typing import Optional

import pytest
import requests

from piagent.mcp import MCPClient

from .conftest import needs_sdk

pytestmark = needs_sdk


def raw_call(url: str, arguments: dict, headers: Optional[dict] = None) -> requests.Response:
    """A hand-made stateless ``tools/call`` of ``route``: only the headers given besides the standard ones."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "route",
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    standard = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": "route",
    }
    return requests.post(url, json=body, headers={**standard, **(headers or {})}, timeout=10)


def test_the_sdk_server_refuses_a_call_without_its_param_headers(sdk_http: str) -> None:
    """What makes the next test a proof: the server does check the headers."""
    arguments = {"region": "eu-west", "priority": 3}
    refused = raw_call(sdk_http, arguments)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == -32020
    wrong = raw_call(sdk_http, arguments, {"Mcp-Param-Region": "us-east", "Mcp-Param-Priority": "3"})
    assert wrong.status_code == 400 and wrong.json()["error"]["code"] == -32020
    right = raw_call(sdk_http, arguments, {"Mcp-Param-Region": "eu-west", "Mcp-Param-Priority": "3"})
    assert right.status_code == 200, right.text


@pytest.mark.parametrize(
    "region",
    ["eu-west", "Zürich", " padded ", "line1\nline2", "=?base64?literal?=", "tab\tinside", ""],
)
def test_annotated_arguments_are_mirrored_in_headers_the_server_accepts(sdk_http: str, region: str) -> None:
    with MCPClient.http(sdk_http, protocol="2026-07-28") as client:
        client.tools()
        result = client.call_tool("route", {"region": region, "priority": 7, "verbose": True, "note": "x"})
        assert not result.get("isError"), result
        assert result["content"][0]["text"] == f"routed to {region!r} at 7, verbose=True"


def test_a_whole_number_written_as_a_float_is_sent_as_an_integer(sdk_http: str) -> None:
    with MCPClient.http(sdk_http, protocol="2026-07-28") as client:
        result = client.call_tool("route", {"region": "eu", "priority": 7.0})  # never listed: listed first
        assert result["content"][0]["text"] == "routed to 'eu' at 7, verbose=False"


def test_a_header_mismatch_lists_the_tools_again_and_retries_once(
    sdk_http: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A tool added after the listing: its first call has no Mcp-Param-Region, the server says -32020."""
    with MCPClient.http(sdk_http, protocol="2026-07-28") as client:
        client.tools()
        client.call_tool("add_routed_tool_quietly", {"name": "late_router"})  # not listed: no schema known
        with caplog.at_level(logging.INFO, logger="piagent.mcp"):
            result = client.call_tool("late_router", {"region": "ap-south"})
        assert result["content"][0]["text"] == "late_router in ap-south"
        assert any("refused the headers" in r.getMessage() for r in caplog.records)
        assert "late_router" in [t.name for t in client.tools()]


def test_the_handshake_era_sends_no_param_headers_and_needs_none(sdk_http: str) -> None:
    with MCPClient.http(sdk_http, protocol="2025-11-25") as client:
        result = client.call_tool("route", {"region": "Zürich", "priority": 1})
        assert result["content"][0]["text"] == "routed to 'Zürich' at 1, verbose=False"
