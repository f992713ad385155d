"""The Anthropic Messages API (``api="anthropic-messages"``), streamed over SSE.

Request: ``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version`` (then
``model.headers`` and ``options.headers``). The version is :data:`ANTHROPIC_VERSION`
(``2026-10-21``, what the official SDK sends), which refuses ``temperature``/``top_p``/``top_k``
on every model; a request that carries a ``temperature`` the model accepts (Claude 4.5 and 4.6
with thinking off, per ``capabilities.sampling``) is sent as :data:`SAMPLING_VERSION`
(``2023-06-01``), the last version that takes it (docs/models.md#api-versions).
:func:`build_request` turns a :class:`Context` into the JSON body (a pure function);
:class:`AnthropicStreamMapper` turns each SSE event into builder events (also pure). The
provider glues them to the HTTP layer; every failure ends the stream as an ``error`` event.

Prompt caching: unless ``cache_retention == "none"``, the system prompt and the last user
message (or a later system message held at the end) carry ``cache_control: {"type":
"ephemeral"}`` (``"long"`` adds ``"ttl": "1h"``).

Tool changes in place (a model whose capabilities say ``tool_changes_in_place``, a transcript
with system messages, tools declared from the start; docs/llm.md#system-messages): ``tools``
stays the list the conversation started with, followed by :data:`DEFERRED_PLACEHOLDER`; each
later system message carries ``tool_removal`` and ``tool_addition`` blocks (a tool defined by
value), under the :data:`INLINE_TOOLS_BETA` header.

Thinking follows ``model.capabilities`` (docs/models.md#thinking-levels):

* ``adaptive`` models: ``thinking: {"type": "adaptive", "display": "summarized"}`` plus
  ``output_config: {"effort": ...}``; off is ``{"type": "disabled"}`` where the model accepts
  it, ``{"type": "between_tools"}`` where that is its lowest setting (Sonnet 5.5; no effort is
  sent with it), its lowest effort where it always thinks;
* ``budget`` models: ``thinking: {"type": "enabled", "budget_tokens": N}`` with ``max_tokens``
  raised to fit the budget, and the interleaved-thinking beta header when tools are sent;
  off sends nothing.

``temperature`` is left out where the model rejects it (one-time warning). A forced tool
choice is never combined with thinking (the API rejects it): thinking is turned off for that
request where the model allows it, else the choice becomes ``auto`` (one-time warning).

Response: ``stop_reason: "refusal"`` ends the message with ``stop_reason == "refusal"`` and
``message.refusal`` from ``stop_details``; usage records 1-hour cache writes apart
(``cache_creation.ephemeral_1h_input_tokens``) and thinking tokens
(``output_tokens_details.thinking_tokens``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Optional

from ..builder import MessageBuilder
from ..capabilities import (
    BUDGET_DEFAULT,
    Capabilities,
    allowed_temperature,
    capabilities_of,
    is_forced,
    plan_thinking,
    tool_changes_in_place,
    warn_once,
)
from ..output import add_anthropic_output
from ..registry import register_api_provider
from ..stream import AssistantMessageEventStream
from ..transcript import current_tools, is_system_message, render_system_message_update, take_leading_system_message
from ..transform import transform_messages
from ..types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    Model,
    StopReason,
    StreamOptions,
    ToolResultMessage,
)
from ._common import (
    ProviderStreamError,
    default_max_tokens,
    max_tokens_with_budget,
    parse_event_object,
    reasoning_budget,
    stream_events,
    tool_choice_name,
)
from ._rejections import open_learning

__all__ = [
    "ANTHROPIC_VERSION",
    "API",
    "DEFERRED_PLACEHOLDER",
    "INLINE_TOOLS_BETA",
    "SAMPLING_VERSION",
    "AnthropicStreamMapper",
    "build_request",
    "normalize_tool_call_id",
    "request_headers",
    "stream_anthropic",
]

API = "anthropic-messages"
#: The API version requests are sent with (the ``anthropic`` SDK's since 2.0).
ANTHROPIC_VERSION = "2026-10-21"
#: The version a request carrying ``temperature`` is sent with: 2026-10-21 refuses sampling fields.
SAMPLING_VERSION = "2023-06-01"
INTERLEAVED_THINKING_BETA = "interleaved-thinking-2025-05-14"
#: Tools defined by value in a ``tool_addition`` block (the SDK's ``AnthropicBetaParam``).
INLINE_TOOLS_BETA = "inline-tools-2026-09-15"
#: Ends ``tools`` while tool changes are sent in place, as pi-ai 1.6 does: a deferred tool
#: (``defer_loading``), so never offered to the model. Anthropic's docs do not ask for it.
DEFERRED_PLACEHOLDER: dict[str, Any] = {
    "name": "piagent_deferred_placeholder",
    "description": "A placeholder that is never available; do not call it.",
    "input_schema": {"type": "object", "properties": {}, "required": []},
    "defer_loading": True,
}
REDACTED_THINKING_TEXT = "[Reasoning redacted]"

STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "stop",
    "pause_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "toolUse",
}
FAILED_STOP_REASONS = {
    "sensitive": "The response was withheld as sensitive content (stop_reason: sensitive)",
}


# --------------------------------------------------------------------------- request

_TOOL_ID_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def normalize_tool_call_id(tool_call_id: str, *_: Any) -> str:
    """A tool-call id Anthropic accepts (``^[a-zA-Z0-9_-]+$``, at most 64 characters)."""
    cleaned = _TOOL_ID_INVALID.sub("_", tool_call_id)[:64]
    return cleaned or "tool_call"


def _cache_control(options: StreamOptions) -> Optional[dict[str, Any]]:
    retention = options.cache_retention or "short"
    if retention == "none":
        return None
    control: dict[str, Any] = {"type": "ephemeral"}
    if retention == "long":
        control["ttl"] = "1h"
    return control


def _image_block(block: Any) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": block.mime_type, "data": block.data}}


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for block in content:
        if block.type == "text":
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        elif block.type == "image":
            blocks.append(_image_block(block))
    return blocks


def _assistant_blocks(message: AssistantMessage) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if block.type == "text":
            if block.text:
                blocks.append({"type": "text", "text": block.text})
        elif block.type == "thinking":
            if block.redacted:
                if block.thinking_signature:
                    blocks.append({"type": "redacted_thinking", "data": block.thinking_signature})
            elif block.thinking_signature:
                blocks.append({"type": "thinking", "thinking": block.thinking, "signature": block.thinking_signature})
            elif block.thinking.strip():
                # Without a signature the API would reject it as thinking; keep it as text.
                blocks.append({"type": "text", "text": block.thinking})
        elif block.type == "toolCall":
            blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.arguments})
    return blocks


def _tool_result_block(message: ToolResultMessage) -> dict[str, Any]:
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    content = _user_blocks(message.content)
    if content:
        result["content"] = content
    if message.is_error:
        result["is_error"] = True
    return result


def _tool_definition(tool: Any) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}


def _system_blocks(message: Any, tool_changes: bool) -> list[dict[str, Any]]:
    """A later system message's content: its text, then (``tool_changes``) a ``tool_removal`` per
    tool withdrawn (not one it defines again) and a ``tool_addition`` per tool it defines."""
    text = render_system_message_update(message)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    if tool_changes:
        added = message.tools_added or []
        redefined = {tool.name for tool in added}
        blocks += [
            {"type": "tool_removal", "tool": {"type": "tool_reference", "name": name}}
            for name in message.tools_removed or ()
            if name not in redefined
        ]
        blocks += [
            {"type": "tool_addition", "tool": {"type": "tool_definition", "definition": _tool_definition(tool)}}
            for tool in added
        ]
    return blocks


def convert_messages(messages: list[Any], tool_changes: bool = False) -> list[dict[str, Any]]:
    """Already-transformed messages as Anthropic ``messages`` (tool results merged per turn).

    A system message (only for a model that takes them in place, docs/llm.md#system-messages)
    is held back until just before the next assistant message sent, or the end, as pi-ai does: a
    tool result must follow its tool use directly, so nothing may come between them. The ones
    held to the same place go as one, their blocks in order: a system message may not be adjacent
    to another. With ``tool_changes`` each carries its tool changes too.
    """
    out: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []  # at most one system message
    for message in messages:
        if is_system_message(message):
            blocks = _system_blocks(message, tool_changes)
            if blocks and held:
                held[0]["content"] += blocks
            elif blocks:
                held.append({"role": "system", "content": blocks})
        elif message.role == "user":
            blocks = _user_blocks(message.content)
            if blocks:
                out.append({"role": "user", "content": blocks})
        elif message.role == "assistant":
            blocks = _assistant_blocks(message)
            if blocks:
                out.extend(held)
                held.clear()
                out.append({"role": "assistant", "content": blocks})
        elif message.role == "toolResult":
            block = _tool_result_block(message)
            previous = out[-1] if out else None
            if (
                previous is not None
                and previous["role"] == "user"
                and previous["content"]
                and all(b["type"] == "tool_result" for b in previous["content"])
            ):
                previous["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
    return out + held


def _tool_choice(choice: Any) -> Optional[dict[str, Any]]:
    """``options.tool_choice`` in Anthropic's form; raises ``ValueError`` for an unknown one."""
    name = tool_choice_name(choice)
    if name is not None:
        return {"type": "tool", "name": name}
    if choice is None:
        return None
    return {"type": "any" if choice == "required" else choice}


def _thinking_fields(
    model: Model, caps: Capabilities, options: StreamOptions, thinking: bool, effort: Optional[str]
) -> dict[str, Any]:
    """The ``thinking`` / ``output_config`` / ``max_tokens`` fields for the planned thinking."""
    fields: dict[str, Any] = {}
    if caps.thinking == "adaptive":
        if thinking:
            config: dict[str, Any] = {"type": "adaptive"}
            if caps.thinking_display:
                config["display"] = "summarized"
            fields["thinking"] = config
            if effort:
                fields["output_config"] = {"effort": effort}
        elif caps.thinking_off in ("disabled", "between_tools"):
            fields["thinking"] = {"type": caps.thinking_off}
    elif caps.thinking == "budget" and thinking and effort:
        budget = reasoning_budget(effort, options, model)
        fields["max_tokens"], budget = max_tokens_with_budget(options, model, budget)
        config = {"type": "enabled", "budget_tokens": budget}
        if caps.thinking_display:
            config["display"] = "summarized"
        fields["thinking"] = config
    return fields


def _plan(model: Model, context: Context, options: StreamOptions) -> tuple[Capabilities, bool, Optional[str], Any]:
    """``(capabilities, thinking on, effort, tool_choice)`` after the forced-choice rule."""
    caps = capabilities_of(model, BUDGET_DEFAULT)
    thinking, effort = plan_thinking(caps, options.reasoning)
    choice = options.tool_choice
    if context.tools and is_forced(choice) and (thinking or not caps.forced_tool_choice):
        if caps.forced_tool_choice and caps.thinking_off is not None:
            warn_once(
                ("forced-choice-thinking", model.provider, model.id),
                f"{model.provider}:{model.id}: a forced tool choice cannot be combined with thinking; "
                "thinking is off for such requests",
            )
            thinking, effort = False, None
        else:
            warn_once(
                ("forced-choice", model.provider, model.id),
                f"{model.provider}:{model.id} refuses a forced tool choice; "
                'it is sent as "auto" (the model may answer without calling the tool)',
            )
            choice = "auto"
    return caps, thinking, effort, choice


def _request_context(model: Model, context: Context) -> tuple[Context, bool]:
    """``(context, tool changes in place)``: the context with a leading system message (kept by
    the registry when the model takes tool changes in place) folded in; changes are rendered in
    place when it declared tools, else the request's tools are the transcript's current ones."""
    if not tool_changes_in_place(model):
        return context, False
    lead, folded = take_leading_system_message(context)
    if lead is None:
        return context, False
    if folded.tools:
        return folded, True
    return Context(folded.system_prompt, folded.messages, current_tools(folded.messages) or None), False


def build_request(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The JSON body of a streaming Messages request for ``context`` (before ``on_payload``)."""
    context, tool_changes = _request_context(model, context)
    cache = _cache_control(options)
    messages = convert_messages(transform_messages(context.messages, model, normalize_tool_call_id), tool_changes)
    if cache is not None:
        for message in reversed(messages):
            if message["role"] in ("user", "system"):  # a held system message may come last (pi-ai 1.6)
                last = dict(message["content"][-1])
                last["cache_control"] = cache
                message["content"][-1] = last
                break

    caps, thinking, effort, choice = _plan(model, context, options)
    max_tokens = options.max_tokens or default_max_tokens(model)
    payload: dict[str, Any] = {"model": model.id, "messages": messages, "max_tokens": max_tokens, "stream": True}
    if context.system_prompt:
        system: dict[str, Any] = {"type": "text", "text": context.system_prompt}
        if cache is not None:
            system["cache_control"] = cache
        payload["system"] = [system]
    for key, value in _thinking_fields(model, caps, options, thinking, effort).items():
        if key == "output_config":  # shared with other settings (e.g. a response format): merged
            payload.setdefault("output_config", {}).update(value)
        else:
            payload[key] = value
    temperature = allowed_temperature(model, caps, options.temperature, thinking)
    if temperature is not None:
        payload["temperature"] = temperature
    if context.tools:
        payload["tools"] = [_tool_definition(t) for t in context.tools]
        if tool_changes:
            payload["tools"].append(dict(DEFERRED_PLACEHOLDER))
        tool_choice = _tool_choice(choice)
        if tool_choice is not None:
            payload["tool_choice"] = tool_choice
    user_id = (options.metadata or {}).get("user_id")
    if user_id is not None:
        payload["metadata"] = {"user_id": str(user_id)}
    if options.output_format is not None:
        add_anthropic_output(payload, options.output_format)
    return payload


def request_headers(model: Model, context: Context, options: StreamOptions) -> dict[str, str]:
    """Headers the request needs besides the key: ``anthropic-version`` (:data:`SAMPLING_VERSION`
    when a temperature is sent, else :data:`ANTHROPIC_VERSION`) and the betas: inline tools when
    tool changes are sent in place, interleaved thinking for budget thinking with tools on the
    models that need it."""
    context, tool_changes = _request_context(model, context)
    caps, thinking, _, _ = _plan(model, context, options)
    sampling = allowed_temperature(model, caps, options.temperature, thinking) is not None
    headers = {"anthropic-version": SAMPLING_VERSION if sampling else ANTHROPIC_VERSION}
    betas = [INLINE_TOOLS_BETA] if tool_changes else []
    if thinking and context.tools and caps.thinking == "budget" and caps.interleaved_thinking_beta:
        betas.append(INTERLEAVED_THINKING_BETA)
    if betas:
        headers["anthropic-beta"] = ",".join(betas)
    return headers


def _key_headers(api_key: str) -> dict[str, str]:
    return {"x-api-key": api_key}


# --------------------------------------------------------------------------- response


class AnthropicStreamMapper:
    """Feeds one Anthropic SSE event at a time into a :class:`MessageBuilder`.

    :meth:`feed` returns the builder events for one wire event (possibly none) and raises
    :class:`ProviderStreamError` for an in-stream ``error``; :meth:`finish` returns the
    closing events once ``message_stop`` arrived, and raises if it never did.
    """

    def __init__(self, builder: MessageBuilder) -> None:
        self.builder = builder
        self._blocks: dict[int, int] = {}  # wire index -> content index
        self._stop_reason: Optional[str] = None
        self._stop_details: Optional[dict[str, Any]] = None
        self.stopped = False

    def _read_usage(self, usage: dict[str, Any]) -> None:
        target = self.builder.message.usage
        if usage.get("input_tokens") is not None:
            target.input = usage["input_tokens"]
        if usage.get("output_tokens") is not None:
            target.output = usage["output_tokens"]
        if usage.get("cache_read_input_tokens") is not None:
            target.cache_read = usage["cache_read_input_tokens"]
        if usage.get("cache_creation_input_tokens") is not None:
            target.cache_write = usage["cache_creation_input_tokens"]
        creation = usage.get("cache_creation")
        if isinstance(creation, dict) and creation.get("ephemeral_1h_input_tokens") is not None:
            target.cache_write_1h = int(creation["ephemeral_1h_input_tokens"] or 0)
        details = usage.get("output_tokens_details")
        if isinstance(details, dict) and details.get("thinking_tokens") is not None:
            target.reasoning = int(details["thinking_tokens"] or 0)
        target.compute_cost(self.builder.model)

    def feed(self, event: dict[str, Any]) -> list[AssistantMessageEvent]:
        kind = event.get("type")
        builder = self.builder
        if kind == "message_start":
            message = event.get("message") or {}
            if message.get("id"):
                builder.message.response_id = message["id"]
            builder.report_model(message.get("model"))
            self._read_usage(message.get("usage") or {})
            return []
        if kind == "content_block_start":
            return self._block_start(event.get("index", 0), event.get("content_block") or {})
        if kind == "content_block_delta":
            return self._block_delta(event.get("index", 0), event.get("delta") or {})
        if kind == "content_block_stop":
            index = self._blocks.pop(event.get("index", 0), None)
            return [builder.end_block(index)] if index is not None else []
        if kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason"):
                self._stop_reason = delta["stop_reason"]
            if isinstance(delta.get("stop_details"), dict):
                self._stop_details = delta["stop_details"]
            self._read_usage(event.get("usage") or {})
            return []
        if kind == "message_stop":
            self.stopped = True
            return []
        if kind == "error":
            error = event.get("error") or {}
            message = error.get("message") or "unknown error"
            label = error.get("type")
            raise ProviderStreamError(f"{label}: {message}" if label else message)
        return []  # ping and event types added later carry nothing we use

    def _block_start(self, wire_index: int, block: dict[str, Any]) -> list[AssistantMessageEvent]:
        """Open the block; content the start event already carries becomes its first delta."""
        builder = self.builder
        kind = block.get("type")
        if kind == "text":
            event, first, add = builder.text_start(), block.get("text"), builder.text_delta
        elif kind == "thinking":
            event = builder.thinking_start(block.get("signature") or None)
            first, add = block.get("thinking"), builder.thinking_delta
        elif kind == "redacted_thinking":
            event = builder.thinking_start(block.get("data") or None, redacted=True)
            first, add = REDACTED_THINKING_TEXT, builder.thinking_delta
        elif kind == "tool_use":
            event = builder.toolcall_start(block.get("id") or "", block.get("name") or "")
            first, add = (json.dumps(block["input"]) if block.get("input") else None), builder.toolcall_delta
        else:
            return []  # server tools, citations...: not represented in pi's content model
        index = event.block_index
        self._blocks[wire_index] = index
        return [event, add(index, first)] if first else [event]

    def _block_delta(self, wire_index: int, delta: dict[str, Any]) -> list[AssistantMessageEvent]:
        index = self._blocks.get(wire_index)
        if index is None:
            return []
        kind = delta.get("type")
        builder = self.builder
        if kind == "text_delta" and delta.get("text"):
            return [builder.text_delta(index, delta["text"])]
        if kind == "thinking_delta" and delta.get("thinking"):
            return [builder.thinking_delta(index, delta["thinking"])]
        if kind == "signature_delta" and delta.get("signature"):
            builder.set_thinking_signature(index, delta["signature"], append=True)
            return []
        if kind == "input_json_delta" and delta.get("partial_json"):
            return [builder.toolcall_delta(index, delta["partial_json"])]
        return []

    def finish(self) -> list[AssistantMessageEvent]:
        """Close open blocks and return them plus the terminal ``done`` event."""
        if not self.stopped:
            raise ProviderStreamError("The stream ended before message_stop")
        events = list(self.builder.end_all())
        reason = self._stop_reason or "end_turn"
        if reason in FAILED_STOP_REASONS:
            raise ProviderStreamError(FAILED_STOP_REASONS[reason])
        if reason == "refusal":
            details = self._stop_details or {}
            self.builder.message.refusal = {
                "category": details.get("category"),
                "explanation": details.get("explanation"),
            }
            events.append(self.builder.done("refusal"))
            return events
        mapped = STOP_REASONS.get(reason)
        if mapped is None:
            raise ProviderStreamError(f"Unhandled stop reason: {reason}")
        events.append(self.builder.done(mapped))
        return events


# --------------------------------------------------------------------------- provider


def stream_anthropic(model: Model, context: Context, options: StreamOptions) -> AssistantMessageEventStream:
    """Stream a Messages API response; failures end the stream as an ``error`` event."""

    def body(builder: MessageBuilder) -> Iterator[AssistantMessageEvent]:
        url = model.base_url.rstrip("/") + "/v1/messages"

        def headers(api_key: str) -> dict[str, str]:
            return {**_key_headers(api_key), **request_headers(model, context, options)}

        def build() -> dict[str, Any]:
            return build_request(model, context, options)

        with open_learning(model, options, url, build, headers, BUDGET_DEFAULT) as http:
            yield builder.start()
            mapper = AnthropicStreamMapper(builder)
            for _name, data in http.sse():
                for event in mapper.feed(parse_event_object(data)):
                    yield event
                if mapper.stopped:
                    http.release()
                    break
            for event in mapper.finish():
                yield event

    return stream_events(model, options, body)


register_api_provider(API, stream_anthropic, stream_anthropic, system_messages=True, tool_changes=True)
