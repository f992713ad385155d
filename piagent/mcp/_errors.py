"""The exceptions of :mod:`piagent.mcp`, all under :class:`MCPError` (a :class:`~piagent.PiAgentError`)."""

from __future__ import annotations

from typing import Any, Optional

from ..exceptions import PiAgentError

__all__ = [
    "MCPConnectionError",
    "MCPError",
    "MCPProtocolError",
    "MCPRemoteError",
    "MCPTimeoutError",
    "MCPToolError",
    "UnsupportedProtocolVersionError",
]


class MCPError(PiAgentError):
    """Base of every MCP client error."""


class MCPConnectionError(MCPError, ConnectionError):
    """The server could not be reached, exited, or closed its side of the connection."""


class MCPTimeoutError(MCPError, TimeoutError):
    """A request got no answer within its time limit."""


class MCPProtocolError(MCPError):
    """The server broke the protocol: garbage on stdout, malformed JSON-RPC, a bad result."""


class MCPToolError(MCPError):
    """A tool call the server reported as failed (``isError``); the message is what the model sees."""


class UnsupportedProtocolVersionError(MCPError):
    """No protocol revision both sides speak (the message names both lists)."""


class MCPRemoteError(MCPError):
    """A JSON-RPC error response: ``code``, ``message`` and ``data`` as the server sent them."""

    def __init__(self, code: int, message: str, data: Any = None, http_status: Optional[int] = None) -> None:
        super().__init__(f"{message} (MCP error {code})")
        self.code = code
        self.message = message
        self.data = data
        self.http_status = http_status
