"""Protocol constants and small pure helpers shared by the transports and the client.

The rules these implement are written in docs/mcp.md (revisions, eras, ``_meta``, headers).
"""

from __future__ import annotations

import base64
import copy
from typing import Any, Optional

__all__ = [
    "HANDSHAKE_VERSIONS",
    "LATEST_HANDSHAKE_VERSION",
    "LATEST_STATELESS_VERSION",
    "STATELESS_VERSIONS",
    "SUPPORTED_VERSIONS",
    "fill_elicitation_defaults",
    "header_value",
]

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""Revisions that open with ``initialize``, oldest first."""
STATELESS_VERSIONS = ("2026-07-28",)
"""Revisions that carry version and capabilities in every request's ``_meta``."""
SUPPORTED_VERSIONS = HANDSHAKE_VERSIONS + STATELESS_VERSIONS
LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[-1]
LATEST_STATELESS_VERSION = STATELESS_VERSIONS[-1]

# JSON-RPC and MCP error codes the client acts on.
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
HEADER_MISMATCH = -32020
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_VERSION = -32022
STATELESS_ERROR_CODES = (HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_VERSION)
"""Errors only a stateless (2026-07-28) server sends: positive evidence of that era."""

META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"

NAMED_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
"""Methods whose ``Mcp-Name`` header mirrors a parameter (2026-07-28 over HTTP)."""


def at_least(version: str, minimum: str) -> bool:
    """True when ``version`` is ``minimum`` or a later known revision."""
    return SUPPORTED_VERSIONS.index(version) >= SUPPORTED_VERSIONS.index(minimum)


def header_value(value: str) -> str:
    """``value`` as an HTTP header value: as is when plain visible ASCII, else the base64 sentinel form."""
    plain = (
        value == value.strip()
        and all(0x20 <= ord(c) <= 0x7E for c in value)
        and not (value.startswith("=?base64?") and value.endswith("?="))
    )
    if plain:
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def fill_elicitation_defaults(content: Optional[dict], schema: Any) -> dict:
    """``content`` with every property it leaves out taken from the schema's ``default`` (SEP-1034)."""
    filled = dict(content or {})
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict):
        for name, prop in properties.items():
            if name not in filled and isinstance(prop, dict) and "default" in prop:
                filled[name] = copy.deepcopy(prop["default"])
    return filled
