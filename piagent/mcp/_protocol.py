"""Protocol constants and small pure helpers shared by the transports and the client.

The rules these implement are written in docs/mcp.md (revisions, eras, ``_meta``, headers).
"""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Iterator, Mapping
from typing import Any, Optional

__all__ = [
    "HANDSHAKE_VERSIONS",
    "LATEST_HANDSHAKE_VERSION",
    "LATEST_STATELESS_VERSION",
    "STATELESS_VERSIONS",
    "SUPPORTED_VERSIONS",
    "fill_elicitation_defaults",
    "header_params",
    "header_value",
    "param_headers",
    "x_mcp_header_problem",
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


X_MCP_HEADER = "x-mcp-header"
"""The ``inputSchema`` property annotation naming an ``Mcp-Param-{name}`` header (2026-07-28)."""
PARAM_HEADER_PREFIX = "Mcp-Param-"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # an HTTP field name (RFC 9110 token)
_HEADER_TYPES = ("string", "integer", "boolean")
_ONE_SCHEMA = ("items", "contains", "additionalProperties", "propertyNames", "unevaluatedItems",
               "unevaluatedProperties", "not", "if", "then", "else", "contentSchema")  # fmt: skip
_SCHEMA_LISTS = ("prefixItems", "allOf", "anyOf", "oneOf")
_SCHEMA_MAPS = ("patternProperties", "dependentSchemas", "$defs", "definitions")


def _annotations(schema: Any) -> Iterator[tuple[Optional[tuple[str, ...]], dict]]:
    """Every subschema holding ``x-mcp-header`` with its path of ``properties`` keys, or None
    when it is not reached through ``properties`` only (``$ref`` is never followed)."""
    stack: list[tuple[Optional[tuple[str, ...]], Any]] = [((), schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        if X_MCP_HEADER in node:
            yield (path or None), node  # the root itself is no parameter
        properties = node.get("properties")
        if isinstance(properties, dict):
            stack.extend(((*path, key) if path is not None else None, sub) for key, sub in properties.items())
        stack.extend((None, node.get(keyword)) for keyword in _ONE_SCHEMA)
        for keyword in _SCHEMA_LISTS + _SCHEMA_MAPS:
            value = node.get(keyword)
            subs = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
            stack.extend((None, sub) for sub in subs)


def x_mcp_header_problem(schema: Any) -> Optional[str]:
    """Why a tool's ``inputSchema`` has an invalid ``x-mcp-header`` annotation, or None when it has none.

    An annotation must name an RFC 9110 token, unique ignoring case, on a ``string``, ``integer``
    or ``boolean`` property reached from the root through ``properties`` keys only
    (docs/mcp.md#parameter-headers).
    """
    seen: dict[str, str] = {}
    for path, node in _annotations(schema):
        name = node[X_MCP_HEADER]
        if path is None:
            return f"{X_MCP_HEADER} {name!r:.60} is not on a property reached through 'properties' only"
        where = ".".join(path)
        if not isinstance(name, str) or not _TOKEN.fullmatch(name):
            return f"{X_MCP_HEADER} {name!r:.60} of {where!r} is not an HTTP header name"
        if node.get("type") not in _HEADER_TYPES:
            return f"{X_MCP_HEADER} {name!r} is on {where!r}, whose type is not string, integer or boolean"
        if name.lower() in seen:
            return f"{X_MCP_HEADER} {name!r} is on both {seen[name.lower()]!r} and {where!r}"
        seen[name.lower()] = where
    return None


HeaderParam = tuple[tuple[str, ...], str, Any]
"""An ``x-mcp-header`` parameter: its path of ``properties`` keys, its header name, its declared type."""


def header_params(schema: Any) -> list[HeaderParam]:
    """The ``x-mcp-header`` parameters of an ``inputSchema`` that passed the check (found once
    per listing: walking the schema at every call would cost more than the rest of it)."""
    return [(path, node[X_MCP_HEADER], node.get("type")) for path, node in _annotations(schema) if path is not None]


def param_headers(params: list[HeaderParam], arguments: Mapping[str, Any]) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers of a ``tools/call`` with ``arguments`` (``params``: :func:`header_params`).

    Each annotated argument present and not null is mirrored: strings as they are, integers in
    decimal, booleans as ``true``/``false``, each through :func:`header_value`.
    """
    headers: dict[str, str] = {}
    for path, name, declared in params:
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, Mapping) else None
        text = _header_text(value, declared)
        if text is not None:
            headers[PARAM_HEADER_PREFIX + name] = header_value(text)
    return headers


def _header_text(value: Any, declared: Any) -> Optional[str]:
    if isinstance(value, bool):
        return "true" if value else "false"
    if declared == "integer" and isinstance(value, float) and value.is_integer():
        return str(int(value))  # an integer written as 42.0
    if isinstance(value, (str, int, float)):
        return str(value)
    return None  # null, absent or not a scalar: no header


def fill_elicitation_defaults(content: Optional[dict], schema: Any) -> dict:
    """``content`` with every property it leaves out taken from the schema's ``default`` (SEP-1034)."""
    filled = dict(content or {})
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict):
        for name, prop in properties.items():
            if name not in filled and isinstance(prop, dict) and "default" in prop:
                filled[name] = copy.deepcopy(prop["default"])
    return filled
