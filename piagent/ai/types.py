"""Messages, content blocks, usage, models, contexts and stream events of the LLM layer.

Every class is a dataclass with snake_case attributes. ``to_dict()`` gives pi's camelCase
JSON (``stopReason``, ``toolCallId``, ``mimeType``...), and :func:`message_from_dict` /
:func:`content_from_dict` read it back, so transcripts stay wire-compatible with pi.
Timestamps are Unix epoch milliseconds.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from typing_extensions import Literal

from ..exceptions import InvalidTypeError, InvalidValueError
from .capabilities import Capabilities
from .compat import check_compat

if TYPE_CHECKING:
    from ..abort import AbortSignal

__all__ = [
    "AssistantContent",
    "AssistantMessage",
    "AssistantMessageEvent",
    "Context",
    "Cost",
    "CostTier",
    "ImageContent",
    "Message",
    "Model",
    "OnPayload",
    "OnResponse",
    "OutputFormat",
    "StopReason",
    "StreamOptions",
    "SystemMessage",
    "TextContent",
    "ThinkingContent",
    "Tool",
    "ToolCall",
    "ToolChoice",
    "ToolResultMessage",
    "Usage",
    "UserContent",
    "UserMessage",
    "content_from_dict",
    "message_from_dict",
    "now_ms",
]

#: ``refusal``: the model declined to answer (a normal end, not an error; the refusal's text is
#: in the content and its category in ``AssistantMessage.refusal``), see docs/models.md#refusals.
StopReason = Literal["stop", "length", "toolUse", "error", "aborted", "refusal"]


def now_ms() -> int:
    """The current time as integer Unix epoch milliseconds."""
    return int(time.time() * 1000)


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


# --------------------------------------------------------------------------- content


@dataclass
class TextContent:
    text: str = ""
    text_signature: Optional[str] = None
    type: Literal["text"] = field(default="text", init=False)

    def to_dict(self) -> dict[str, Any]:
        return _drop_none({"type": "text", "text": self.text, "textSignature": self.text_signature})


@dataclass
class ThinkingContent:
    thinking: str = ""
    thinking_signature: Optional[str] = None
    redacted: bool = False
    type: Literal["thinking"] = field(default="thinking", init=False)

    def to_dict(self) -> dict[str, Any]:
        d = _drop_none({"type": "thinking", "thinking": self.thinking, "thinkingSignature": self.thinking_signature})
        if self.redacted:
            d["redacted"] = True
        return d


@dataclass
class ImageContent:
    data: str
    mime_type: str
    type: Literal["image"] = field(default="image", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "image", "data": self.data, "mimeType": self.mime_type}


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    thought_signature: Optional[str] = None
    type: Literal["toolCall"] = field(default="toolCall", init=False)

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "type": "toolCall",
                "id": self.id,
                "name": self.name,
                "arguments": self.arguments,
                "thoughtSignature": self.thought_signature,
            }
        )


AssistantContent = Union[TextContent, ThinkingContent, ToolCall]
UserContent = Union[TextContent, ImageContent]


def content_from_dict(d: Mapping[str, Any]) -> Any:
    """Read one content block from its camelCase dict form.

    Raises ``TypeError`` for a non-dict and ``ValueError`` naming what is wrong otherwise.
    """
    _check_mapping(d, "a content block")
    kind = d.get("type")
    if kind == "text":
        return TextContent(d.get("text", ""), d.get("textSignature"))
    if kind == "thinking":
        return ThinkingContent(d.get("thinking", ""), d.get("thinkingSignature"), bool(d.get("redacted", False)))
    if kind == "image":
        return ImageContent(_required(d, "data", "an image block"), _required(d, "mimeType", "an image block"))
    if kind == "toolCall":
        arguments = d.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise InvalidValueError(f"a toolCall block's 'arguments' must be an object, got {type(arguments).__name__}")
        return ToolCall(
            _required(d, "id", "a toolCall block"),
            _required(d, "name", "a toolCall block"),
            dict(arguments),
            d.get("thoughtSignature"),
        )
    raise InvalidValueError(f"Unknown content block type: {kind!r}")


def _check_mapping(d: Any, what: str) -> None:
    if not isinstance(d, Mapping):
        raise InvalidTypeError(f"{what} must be a dict (its to_dict() form), got {type(d).__name__}")


def _required(d: Mapping[str, Any], key: str, what: str) -> Any:
    if key not in d:
        raise InvalidValueError(f"{what} needs {key!r}; got keys {sorted(d)}")
    return d[key]


def _content_to_dict(content: Any) -> Any:
    if isinstance(content, str):
        return content
    return [block.to_dict() for block in content]


def _content_list_from(value: Any) -> Any:
    if isinstance(value, str):
        return value
    if value is not None and not isinstance(value, (list, tuple)):
        raise InvalidValueError(f"'content' must be a string or a list of blocks, got {type(value).__name__}")
    return [content_from_dict(block) for block in value or []]


# --------------------------------------------------------------------------- usage


@dataclass
class CostTier:
    """On a :class:`Model`: the prices (USD per million tokens) of a request whose input tokens
    (cached ones included) exceed ``input_tokens_above``, for all of its tokens."""

    input_tokens_above: int
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    cache_write_1h: float = 0.0


@dataclass
class Cost:
    """Money in USD for a :class:`Usage`; on a :class:`Model`, prices in USD per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0
    #: On a model: the price of a 1-hour cache write (Anthropic); 0 means ``cache_write``'s.
    cache_write_1h: float = 0.0
    #: On a model: higher prices for large requests (long-context pricing), lowest threshold first.
    tiers: list[CostTier] = field(default_factory=list)

    def for_input(self, input_tokens: int) -> Union[Cost, CostTier]:
        """The prices in force for a request of ``input_tokens``: the tier with the highest
        threshold below it, else these base prices."""
        chosen: Union[Cost, CostTier] = self
        for tier in sorted(self.tiers, key=lambda t: t.input_tokens_above):
            if input_tokens > tier.input_tokens_above:
                chosen = tier
        return chosen

    def to_dict(self) -> dict[str, Any]:
        d = {
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
            "total": self.total,
        }
        if self.cache_write_1h:
            d["cacheWrite1h"] = self.cache_write_1h
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Cost:
        return cls(
            d.get("input", 0),
            d.get("output", 0),
            d.get("cacheRead", 0),
            d.get("cacheWrite", 0),
            d.get("total", 0),
            d.get("cacheWrite1h", 0),
        )


@dataclass
class Usage:
    """Token counts of one response; ``input`` excludes cached tokens, ``output`` includes reasoning.

    ``cache_write_1h`` is the part of ``cache_write`` written with a 1-hour lifetime (Anthropic;
    priced at ``model.cost.cache_write_1h``); ``reasoning`` is the part of ``output`` spent on
    reasoning, when the provider reports it. Both appear in ``to_dict()`` only when non-zero.
    Cache writes of a model without a cache-write price are priced as input (OpenAI's).
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: Cost = field(default_factory=Cost)
    cache_write_1h: int = 0
    reasoning: int = 0

    def to_dict(self) -> dict[str, Any]:
        d = {
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
            "totalTokens": self.total_tokens,
            "cost": self.cost.to_dict(),
        }
        if self.cache_write_1h:
            d["cacheWrite1h"] = self.cache_write_1h
        if self.reasoning:
            d["reasoning"] = self.reasoning
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Usage:
        return cls(
            d.get("input", 0),
            d.get("output", 0),
            d.get("cacheRead", 0),
            d.get("cacheWrite", 0),
            d.get("totalTokens", 0),
            Cost.from_dict(d.get("cost") or {}),
            d.get("cacheWrite1h", 0),
            d.get("reasoning", 0),
        )

    def add(self, other: Usage) -> None:
        """Add ``other`` into this usage, in place (used to sum a run)."""
        self.input += other.input
        self.output += other.output
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write
        self.cache_write_1h += other.cache_write_1h
        self.reasoning += other.reasoning
        self.total_tokens += other.total_tokens
        for name in ("input", "output", "cache_read", "cache_write", "total"):
            setattr(self.cost, name, getattr(self.cost, name) + getattr(other.cost, name))

    def compute_cost(self, model: Model) -> None:
        """Fill ``total_tokens`` and ``cost`` from the counts and the model's prices per million."""
        self.total_tokens = self.input + self.output + self.cache_read + self.cache_write
        prices = model.cost.for_input(self.input + self.cache_read + self.cache_write)
        long_writes = min(self.cache_write_1h, self.cache_write)
        write_price = prices.cache_write or prices.input
        long_price = prices.cache_write_1h or write_price
        self.cost = Cost(
            prices.input * self.input / 1e6,
            prices.output * self.output / 1e6,
            prices.cache_read * self.cache_read / 1e6,
            (write_price * (self.cache_write - long_writes) + long_price * long_writes) / 1e6,
        )
        self.cost.total = self.cost.input + self.cost.output + self.cost.cache_read + self.cost.cache_write


# --------------------------------------------------------------------------- messages


class _ShownInNotebooks:
    def _repr_html_(self) -> str:
        """How Jupyter shows the message (escaped HTML, see :mod:`piagent.ai.display`)."""
        from .display import message_html

        return message_html(self)


@dataclass
class SystemMessage(_ShownInNotebooks):
    """A system message in the transcript (pi 1.6): the prompt and the tool declarations.

    The leading one is the system prompt (``content``) with its named ``sections`` and the
    tools it declares (``tools_added``); a later one adds instructions (``content``), replaces
    sections by name (a None value removes one) and declares tools that become available
    (``tools_added``) or stop being available (``tools_removed``, names) from that point on.
    Replaying every system message in order gives the current prompt and tools
    (:mod:`piagent.ai.transcript`).
    """

    content: Union[str, list[TextContent]] = ""
    sections: Optional[dict[str, Optional[str]]] = None
    tools_added: Optional[list[Tool]] = None
    tools_removed: Optional[list[str]] = None
    timestamp: int = field(default_factory=now_ms)
    role: Literal["system"] = field(default="system", init=False)

    @property
    def text(self) -> str:
        """``content``'s text (not the sections)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(block.text for block in self.content if block.type == "text")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": "system", "content": _content_to_dict(self.content)}
        if self.sections:
            d["sections"] = dict(self.sections)
        if self.tools_added:
            d["toolsAdded"] = [tool.to_dict() for tool in self.tools_added]
        if self.tools_removed:
            d["toolsRemoved"] = [{"name": name} for name in self.tools_removed]
        d["timestamp"] = self.timestamp
        return d


@dataclass
class UserMessage(_ShownInNotebooks):
    content: Union[str, list[UserContent]]
    timestamp: int = field(default_factory=now_ms)
    role: Literal["user"] = field(default="user", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"role": "user", "content": _content_to_dict(self.content), "timestamp": self.timestamp}


@dataclass
class AssistantMessage(_ShownInNotebooks):
    content: list[AssistantContent] = field(default_factory=list)
    api: str = ""
    provider: str = ""
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    stop_reason: StopReason = "stop"
    error_message: Optional[str] = None
    response_id: Optional[str] = None
    #: The model the provider reports having answered with, only when it differs from ``model``
    #: (an alias resolved to a dated version, a router's pick); None when it is the same.
    response_model: Optional[str] = None
    timestamp: int = field(default_factory=now_ms)
    role: Literal["assistant"] = field(default="assistant", init=False)
    #: With ``stop_reason == "refusal"``: ``{"category": str | None, "explanation": str | None}``.
    refusal: Optional[dict[str, Any]] = None
    #: The thinking level the agent loop asked this answer for (pi 1.6); None outside the loop.
    thinking_level: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return _drop_none(
            {
                "role": "assistant",
                "content": _content_to_dict(self.content),
                "api": self.api,
                "provider": self.provider,
                "model": self.model,
                "responseId": self.response_id,
                "responseModel": self.response_model,
                "usage": self.usage.to_dict(),
                "stopReason": self.stop_reason,
                "errorMessage": self.error_message,
                "refusal": self.refusal,
                "thinkingLevel": self.thinking_level,
                "timestamp": self.timestamp,
            }
        )

    @property
    def text(self) -> str:
        """The concatenated text blocks."""
        return "".join(block.text for block in self.content if block.type == "text")

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool-call blocks, in order."""
        return [block for block in self.content if isinstance(block, ToolCall)]

    def snapshot(self) -> AssistantMessage:
        """A shallow copy with its own content list (O(blocks), never O(text))."""
        copy = object.__new__(AssistantMessage)
        state = self.__dict__.copy()
        state["content"] = self.content[:]
        copy.__dict__ = state  # one dict copy: cheaper than filling a new instance's dict
        return copy


@dataclass
class ToolResultMessage(_ShownInNotebooks):
    tool_call_id: str
    tool_name: str
    content: list[UserContent] = field(default_factory=list)
    details: Any = None
    is_error: bool = False
    timestamp: int = field(default_factory=now_ms)
    usage: Optional[Usage] = None
    """What the tool's own model calls cost, if it reported it (not the run's context)."""
    duration_ms: Optional[int] = None
    """How long the tool ran, in milliseconds on a monotonic clock; None when it did not run."""
    role: Literal["toolResult"] = field(default="toolResult", init=False)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "role": "toolResult",
            "toolCallId": self.tool_call_id,
            "toolName": self.tool_name,
            "content": _content_to_dict(self.content),
            "isError": self.is_error,
            "timestamp": self.timestamp,
        }
        if self.details is not None:
            d["details"] = self.details
        if self.usage is not None:
            d["usage"] = self.usage.to_dict()
        if self.duration_ms is not None:
            d["durationMs"] = self.duration_ms
        return d

    @property
    def text(self) -> str:
        return "".join(block.text for block in self.content if block.type == "text")


Message = Union[SystemMessage, UserMessage, AssistantMessage, ToolResultMessage]


def message_from_dict(d: Mapping[str, Any]) -> Message:
    """Read a message from pi's camelCase dict form (the inverse of ``to_dict()``).

    Raises ``ValueError`` for an unknown role (application messages are the caller's to read)
    or a field that is missing or malformed, ``TypeError`` for something that is not a dict.
    """
    _check_mapping(d, "a message")
    role = d.get("role")
    ts = d.get("timestamp")
    try:
        stamp: dict[str, Any] = {} if ts is None else {"timestamp": int(ts)}
    except (TypeError, ValueError):
        raise InvalidValueError(
            f"a message's 'timestamp' must be an integer (epoch milliseconds), got {ts!r}"
        ) from None
    if role == "user":
        return UserMessage(_content_list_from(d.get("content", "")), **stamp)
    if role == "system":
        return _system_message_from(d, stamp)
    if role == "assistant":
        return AssistantMessage(
            content=_content_list_from(d.get("content") or []),
            api=d.get("api", ""),
            provider=d.get("provider", ""),
            model=d.get("model", ""),
            usage=Usage.from_dict(d.get("usage") or {}),
            stop_reason=d.get("stopReason", "stop"),
            error_message=d.get("errorMessage"),
            response_id=d.get("responseId"),
            response_model=d.get("responseModel"),
            refusal=d.get("refusal"),
            thinking_level=d.get("thinkingLevel") if isinstance(d.get("thinkingLevel"), str) else None,
            **stamp,
        )
    if role == "toolResult":
        return ToolResultMessage(
            tool_call_id=_required(d, "toolCallId", "a toolResult message"),
            tool_name=d.get("toolName", ""),
            content=_content_list_from(d.get("content") or []),
            details=d.get("details"),
            is_error=bool(d.get("isError", False)),
            usage=Usage.from_dict(d["usage"]) if isinstance(d.get("usage"), Mapping) else None,
            duration_ms=_optional_int(d.get("durationMs")),
            **stamp,
        )
    raise InvalidValueError(f"Unknown message role: {role!r}")


def _system_message_from(d: Mapping[str, Any], stamp: dict[str, Any]) -> SystemMessage:
    sections = d.get("sections")
    if sections is not None and not (
        isinstance(sections, Mapping)
        and all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in sections.items())
    ):
        raise InvalidValueError("a system message's 'sections' must map names to strings or null")
    added = d.get("toolsAdded")
    removed = d.get("toolsRemoved")
    if added is not None and not isinstance(added, list):
        raise InvalidValueError("a system message's 'toolsAdded' must be a list of tools")
    if removed is not None and not (
        isinstance(removed, list) and all(isinstance(r, Mapping) and isinstance(r.get("name"), str) for r in removed)
    ):
        raise InvalidValueError("a system message's 'toolsRemoved' must be a list of {name} objects")
    return SystemMessage(
        content=_content_list_from(d.get("content", "")),
        sections=dict(sections) if sections is not None else None,
        tools_added=[Tool.from_dict(tool) for tool in added] if added is not None else None,
        tools_removed=[r["name"] for r in removed] if removed is not None else None,
        **stamp,
    )


def _optional_int(value: Any) -> Optional[int]:
    """An integer field that may be absent; anything but a number reads as absent."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return int(value) if abs(value) < 2**63 else None


# --------------------------------------------------------------------------- model, tool, context


@dataclass
class Model:
    """A model and where to reach it; ``api`` selects the provider in the registry.

    ``capabilities`` says how the model is driven (thinking control, what it rejects; see
    :mod:`piagent.ai.capabilities`); None means the API's defaults for a model declared by hand.
    ``family`` names its catalogue family; ``shutdown`` (ISO date) and ``successor`` come from
    the provider's deprecation notices. ``compat`` is checked whenever it is set (see
    :mod:`piagent.ai.compat`).
    """

    id: str
    name: str = ""
    api: str = "unknown"
    provider: str = "unknown"
    base_url: str = ""
    reasoning: bool = False
    input: list[str] = field(default_factory=lambda: ["text"])
    cost: Cost = field(default_factory=Cost)
    context_window: int = 0
    max_tokens: int = 0
    headers: Optional[dict[str, str]] = field(default=None, repr=False)
    compat: Optional[dict[str, Any]] = None
    capabilities: Optional[Capabilities] = None
    family: str = ""
    shutdown: Optional[str] = None
    successor: Optional[str] = None

    def __post_init__(self) -> None:
        if not self.name:
            self.name = self.id

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "compat" and value is not None:
            value = check_compat(value)
        object.__setattr__(self, name, value)


@dataclass
class Tool:
    """What a model sees of a tool: a name, a description and a JSON Schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_dict(self) -> dict[str, Any]:
        """pi's tool declaration: name, description and parameters (what the model sees)."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    @classmethod
    def from_dict(cls, d: Any) -> Tool:
        _check_mapping(d, "a tool declaration")
        name, parameters = d.get("name"), d.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(name, str) or not isinstance(parameters, Mapping):
            raise InvalidValueError("a tool declaration needs a string 'name' and an object 'parameters'")
        return cls(name, str(d.get("description") or ""), dict(parameters))


@dataclass
class Context:
    """What a stream function receives: the system prompt, the messages and the tools."""

    system_prompt: Optional[str] = None
    messages: list[Message] = field(default_factory=list)
    tools: Optional[list[Tool]] = None


@dataclass
class OutputFormat:
    """Ask the model to answer with JSON matching ``schema`` (docs/structured-output.md).

    ``schema`` is a JSON Schema whose root is an object; ``name`` (letters, digits, ``_`` and
    ``-``) names it where an API wants a name. Each provider sends it in its API's native form;
    a provider that has none ignores it.
    """

    name: str
    schema: dict[str, Any]
    description: str = ""


ToolChoice = Union[Literal["auto", "none", "required"], dict[str, str], None]
"""None (the API's default), "auto", "none", "required", or ``{"name": tool}`` (that tool must be called)."""

OnPayload = Callable[[Any, "Model"], Any]
"""``on_payload(payload, model)``: sees a request body before it is sent; a non-None return replaces it."""

OnResponse = Callable[[dict[str, Any], "Model"], object]
"""``on_response({"status", "headers"}, model)``: sees every HTTP response's status and headers."""


@dataclass
class StreamOptions:
    """Options of one model call. Providers ignore what they cannot use.

    ``reasoning`` is a level (``minimal``, ``low``, ``medium``, ``high``, ``xhigh``, ``max``) or
    None for "off"; providers map it to the model's own control
    (docs/models.md#thinking-levels). ``api_key`` and ``headers`` never appear in a repr.

    ``tool_choice`` is None (the API's default), ``"auto"``, ``"none"``, ``"required"`` (some tool
    must be called) or ``{"name": "<tool>"}`` (that tool must be called). Each provider maps it to
    its API's form: OpenAI chat ``"auto"|"none"|"required"|{"type": "function", "function":
    {"name"}}``, OpenAI responses ``{"type": "function", "name"}``, Anthropic ``{"type":
    "auto"|"none"|"any"|"tool"}``, Google ``toolConfig.functionCallingConfig.mode``
    ``AUTO|NONE|ANY`` (+ ``allowedFunctionNames``). Anything else ends the stream with an error.

    ``on_payload(payload, model)`` sees the request body before it is sent; a non-None return
    replaces it. ``on_response({"status", "headers"}, model)`` sees every HTTP response.

    Bounds of one model call (None: the default; docs/providers.md#limits): ``timeout_ms``
    bounds each wait for the connection and the response headers and, unless
    ``idle_timeout_ms`` is set, the wait between two stream events (default 600,000: ten
    minutes); ``deadline_ms`` bounds the whole call, retries included (default 3,600,000: one
    hour); ``max_response_bytes`` bounds the decompressed body (default 256 MiB) and
    ``max_event_bytes`` one SSE line or event (default 16 MiB).

    ``output_format`` asks for a JSON answer in a schema (docs/structured-output.md#providers).
    """

    temperature: Optional[float] = None
    max_tokens: Optional[int] = None
    signal: Optional[AbortSignal] = None
    api_key: Optional[str] = field(default=None, repr=False)
    cache_retention: Optional[str] = None
    session_id: Optional[str] = None
    on_payload: Optional[OnPayload] = None
    on_response: Optional[OnResponse] = None
    headers: Optional[dict[str, str]] = field(default=None, repr=False)
    timeout_ms: Optional[int] = None
    max_retries: Optional[int] = None
    max_retry_delay_ms: Optional[int] = None
    idle_timeout_ms: Optional[int] = None
    deadline_ms: Optional[int] = None
    max_response_bytes: Optional[int] = None
    max_event_bytes: Optional[int] = None
    metadata: Optional[dict[str, Any]] = None
    reasoning: Optional[str] = None
    thinking_budgets: Optional[dict[str, int]] = None
    tool_choice: ToolChoice = None
    output_format: Optional[OutputFormat] = None

    @classmethod
    def from_object(cls, obj: Any, **overrides: Any) -> StreamOptions:
        """Build options from any object carrying (some of) the same attribute names."""
        values = {f.name: getattr(obj, f.name, None) for f in fields(cls)}
        values.update(overrides)
        return cls(**values)


# --------------------------------------------------------------------------- stream events


@dataclass
class AssistantMessageEvent:
    """One event of an assistant message stream (docs/llm.md#stream-events).

    ``partial`` is the message accumulated so far (absent on ``done``/``error``); ``done``
    carries ``reason`` and ``message``, ``error`` carries ``reason`` and ``error`` (the final
    message with ``stop_reason`` error or aborted).
    """

    type: str
    partial: Optional[AssistantMessage] = None
    content_index: Optional[int] = None
    delta: Optional[str] = None
    content: Optional[str] = None
    tool_call: Optional[ToolCall] = None
    reason: Optional[StopReason] = None
    message: Optional[AssistantMessage] = None
    error: Optional[AssistantMessage] = None

    @property
    def block_index(self) -> int:
        """The ``content_index`` of a block event; ValueError for an event about no block."""
        if self.content_index is None:
            raise InvalidValueError(f"a {self.type!r} event has no content index")
        return self.content_index

    def to_dict(self, with_partial: bool = True) -> dict[str, Any]:
        """pi's camelCase form; ``with_partial=False`` leaves out ``partial``, the message so far."""
        d: dict[str, Any] = {"type": self.type}
        if self.content_index is not None:
            d["contentIndex"] = self.content_index
        if self.delta is not None:
            d["delta"] = self.delta
        if self.content is not None:
            d["content"] = self.content
        if self.tool_call is not None:
            d["toolCall"] = self.tool_call.to_dict()
        if self.reason is not None:
            d["reason"] = self.reason
        if self.message is not None:
            d["message"] = self.message.to_dict()
        if self.error is not None:
            d["error"] = self.error.to_dict()
        if self.partial is not None and with_partial:
            d["partial"] = self.partial.to_dict()
        return d
