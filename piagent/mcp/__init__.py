"""A synchronous Model Context Protocol client: MCP servers' tools as piagent tools.

    from piagent.mcp import MCPClient

    with MCPClient.stdio("mcp-server-filesystem", ["/srv/docs"]) as files:
        agent = Agent(model=model, tools=files.tools(), prepare_next_turn=files.prepare_next_turn)

Threads, ``requests`` and no other dependency. What it speaks and how: docs/mcp.md.
"""

from __future__ import annotations

from ._content import MCPTool
from ._errors import (
    MCPConnectionError,
    MCPError,
    MCPProtocolError,
    MCPRemoteError,
    MCPTimeoutError,
    MCPToolError,
    UnsupportedProtocolVersionError,
)
from ._protocol import HANDSHAKE_VERSIONS, STATELESS_VERSIONS, SUPPORTED_VERSIONS
from .client import MCPClient, Root

__all__ = [
    "HANDSHAKE_VERSIONS",
    "MCPClient",
    "MCPConnectionError",
    "MCPError",
    "MCPProtocolError",
    "MCPRemoteError",
    "MCPTimeoutError",
    "MCPTool",
    "MCPToolError",
    "Root",
    "STATELESS_VERSIONS",
    "SUPPORTED_VERSIONS",
    "UnsupportedProtocolVersionError",
]
