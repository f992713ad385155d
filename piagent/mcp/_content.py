"""MCP tools as :class:`~piagent.AgentTool`s, and MCP call results as piagent content.

Mapping (docs/mcp.md#results): text → text; image → image; audio → a text note (the model
APIs take no audio in tool results) with the data kept in ``details``; an embedded resource →
its text (or an image when it is one, else a note); a resource link → a text line naming it.
``details`` is the raw MCP result; its ``structuredContent`` is also the result's
``structured_content``.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any, Optional

from ..ai.types import ImageContent, TextContent
from ..ai.validation import schema_problem
from ..types import AgentTool
from ._errors import MCPProtocolError, MCPToolError

__all__ = ["MCPTool", "OutputCheck", "content_from_result"]


@dataclass
class MCPTool(AgentTool):
    """An :class:`AgentTool` backed by an MCP server's tool; the MCP definition is kept."""

    mcp_name: str = ""
    annotations: dict = field(default_factory=dict)
    output_schema: Optional[dict] = None
    definition: dict = field(default_factory=dict)
    client: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.execute = _with_structured_content(self.execute)


def _with_structured_content(execute: Any) -> Any:
    """``execute`` whose results carry the server's ``structuredContent`` (kept in ``details``, the
    raw MCP result) as ``structured_content``: for programs and UIs, not sent to the model."""
    if getattr(execute, "_fills_structured_content", False):
        return execute  # dataclasses.replace() runs __post_init__ again

    def execute_with_structured_content(*args: Any) -> Any:
        result = execute(*args)
        details = getattr(result, "details", None)
        if isinstance(details, dict) and "structuredContent" in details and result.structured_content is None:
            result.structured_content = details["structuredContent"]
        return result

    execute_with_structured_content._fills_structured_content = True  # type: ignore[attr-defined]
    return execute_with_structured_content


def _size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data)


def _block(block: Any) -> list[Any]:
    if not isinstance(block, dict):
        return [TextContent(json.dumps(block))]
    kind = block.get("type")
    if kind == "text":
        return [TextContent(str(block.get("text", "")))]
    if kind == "image" and isinstance(block.get("data"), str):
        return [ImageContent(block["data"], str(block.get("mimeType") or "image/png"))]
    if kind == "audio":
        mime = block.get("mimeType") or "audio"
        return [TextContent(f"[audio {mime}, {_size(str(block.get('data', '')))} bytes: kept in details]")]
    if kind == "resource" and isinstance(block.get("resource"), dict):
        resource = block["resource"]
        uri, mime = resource.get("uri", ""), resource.get("mimeType") or ""
        if isinstance(resource.get("text"), str):
            return [TextContent(f"[resource {uri}]\n{resource['text']}")]
        blob = str(resource.get("blob", ""))
        if mime.startswith("image/"):
            return [ImageContent(blob, mime)]
        return [TextContent(f"[resource {uri} ({mime or 'binary'}), {_size(blob)} bytes: kept in details]")]
    if kind == "resource_link":
        parts = [str(block.get("name") or ""), str(block.get("uri") or "")]
        if block.get("mimeType"):
            parts.append(f"({block['mimeType']})")
        if block.get("description"):
            parts.append(f"- {block['description']}")
        return [TextContent("[resource link] " + " ".join(p for p in parts if p))]
    return [TextContent(json.dumps(block))]


class OutputCheck:
    """A tool's ``outputSchema``, checked and compiled into a validator once, on first use.

    One per tool, kept for all its calls: building a validator (the schema checked against
    its metaschema) costs far more than validating one result with it. A schema that could
    hold the GIL for minutes on a result (:func:`~piagent.ai.validation.schema_problem`) is
    refused, as tool parameters are.
    """

    def __init__(self, schema: dict) -> None:
        self.schema = schema
        self._validator: Any = None

    @property
    def validator(self) -> Any:
        """The compiled validator; raises :class:`MCPProtocolError` if the schema is not valid."""
        if self._validator is None:
            import jsonschema  # on first use, as piagent's other validators: keeps imports fast

            problem = schema_problem(self.schema)
            if problem is not None:
                raise MCPProtocolError(f"the tool's outputSchema is refused: {problem}")
            cls = jsonschema.validators.validator_for(self.schema)
            try:
                cls.check_schema(self.schema)
            except jsonschema.SchemaError as exc:
                raise MCPProtocolError(f"the tool's outputSchema is not a valid JSON Schema: {exc.message}") from exc
            self._validator = cls(self.schema)
        return self._validator

    def check(self, value: Any) -> None:
        """Raise :class:`MCPProtocolError` unless ``value`` matches the schema."""
        import jsonschema

        if self.validator.is_valid(value):  # the usual case, and the cheapest test
            return
        error = jsonschema.exceptions.best_match(self.validator.iter_errors(value))
        if error is not None:
            raise MCPProtocolError(f"structuredContent does not match the tool's outputSchema: {error.message}")


def content_from_result(result: dict, output_check: Optional[OutputCheck], structured: bool) -> list[Any]:
    """The result's content as piagent blocks; raises :class:`MCPToolError` for ``isError``.

    ``structured`` says whether the revision has ``structuredContent`` (2025-06-18 on): then
    it is checked with ``output_check`` (the tool's ``outputSchema``) and, when there is no
    other content, shown as JSON.
    """
    raw = result.get("content")
    blocks = [piece for block in (raw if isinstance(raw, list) else []) for piece in _block(block)]
    if result.get("isError") is True:
        text = "\n".join(b.text for b in blocks if isinstance(b, TextContent)) or "the tool reported an error"
        raise MCPToolError(text)
    if structured and "structuredContent" in result:
        if output_check is not None:
            output_check.check(result["structuredContent"])
        if not blocks:
            blocks = [TextContent(json.dumps(result["structuredContent"], ensure_ascii=False))]
    return blocks
