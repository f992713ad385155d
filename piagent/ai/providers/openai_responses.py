"""OpenAI responses API (``api="openai-responses"``): OpenAI's own models.

``POST {base_url}/responses`` with ``stream: true`` and ``store: false``. The system prompt
goes in ``instructions``; history becomes input items (``message``, ``function_call``,
``function_call_output``, and for the same model its ``reasoning`` items, replayed with their
``encrypted_content``, which is requested through ``include``).

What is kept on the message so the next request can replay it exactly:

* a thinking block's signature is the JSON of its ``reasoning`` output item;
* a text block's signature is the id of its ``message`` output item, or, when the item has a
  ``phase`` (``commentary`` / ``final_answer``), ``{"id": ..., "phase": ...}`` as JSON: the
  phase is sent back with the item, as the API asks;
* a tool call's id is ``"<call_id>|<item id>"``; tool results answer it with the ``call_id`` part.

Streaming: ``response.created`` (id), ``response.output_item.added`` opens a block per output
item, text / reasoning-summary / argument deltas fill it, ``response.output_item.done`` closes
it, ``response.completed`` (or ``response.incomplete``) carries usage and status;
``response.failed`` and ``error`` events end the stream with an error. A stream cut before the
terminal event is an error. Refusal parts are text and end the message with
``stop_reason == "refusal"``.

Tool changes in place (a model whose capabilities say ``tool_changes_in_place``, a transcript
with system messages; docs/llm.md#system-messages), as pi-ai 1.6 sends them: no top-level
``tools``; every tool is declared in an ``additional_tools`` input item, the ones the
conversation started with at the head of ``input``, each later system message's additions where
it stands (after the first, preceded by a note that the item adds to the earlier ones), and its
removals named in its text, since an item cannot withdraw a tool.

Thinking follows ``model.capabilities`` (docs/models.md#thinking-levels): ``reasoning:
{"effort", "summary": "auto"}``, ``{"effort": "none"}`` for off where the model has it; a
``temperature`` the model rejects is left out (one-time warning). Usage records cache writes
(``input_tokens_details.cache_write_tokens``) and reasoning tokens.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Optional

from ..builder import MessageBuilder
from ..capabilities import EFFORT_DEFAULT, allowed_temperature, allowed_tool_choice, tool_changes_in_place
from ..json_stream import parse_streaming_json
from ..output import add_responses_output
from ..registry import register_api_provider
from ..stream import AssistantMessageEventStream
from ..transcript import is_system_message, render_system_message_update, take_leading_system_message
from ..transform import is_same_model, transform_messages
from ..types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    Model,
    StopReason,
    StreamOptions,
    TextContent,
    ThinkingContent,
)
from ._common import (
    ProviderStreamError,
    parse_event_json,
    stream_events,
    tool_choice_name,
)
from ._openai import (
    CONTENT_FILTER_MESSAGE,
    TOOL_IMAGES_INTRO,
    bearer_headers,
    cache_fields,
    data_uri,
    openai_usage,
    reasoning_effort,
    safe_call_id,
    tool_result_parts,
    with_default_max_tokens,
)
from ._rejections import open_learning

__all__ = ["API", "build_payload", "stream_openai_responses", "stream_simple_openai_responses"]

API = "openai-responses"


# --------------------------------------------------------------------------- request


def _split_id(tool_call_id: str) -> list[str]:
    call_id, _, item_id = tool_call_id.partition("|")
    return [call_id, item_id]


def _text_signature(item: dict[str, Any]) -> Optional[str]:
    """What a text block keeps of its ``message`` item: the id, and the phase when there is one."""
    if item.get("phase"):
        return json.dumps({"id": item.get("id"), "phase": item["phase"]}, separators=(",", ":"))
    return item.get("id")


def _split_text_signature(signature: str) -> tuple[str, Optional[str]]:
    if signature.startswith("{"):
        try:
            value = json.loads(signature)
        except ValueError:
            return signature, None
        if isinstance(value, dict):
            return str(value.get("id") or ""), value.get("phase")
    return signature, None


def _user_item(content: Any) -> dict[str, Any]:
    if isinstance(content, str):
        return {"role": "user", "content": [{"type": "input_text", "text": content}]}
    parts: list[dict[str, Any]] = []
    for block in content:
        if block.type == "text":
            parts.append({"type": "input_text", "text": block.text})
        elif block.type == "image":
            parts.append({"type": "input_image", "image_url": data_uri(block), "detail": "auto"})
    return {"role": "user", "content": parts}


def _assistant_items(message: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    same = is_same_model(message, model)
    items: list[dict[str, Any]] = []
    for block in message.content:
        if block.type == "thinking":
            if same and block.thinking_signature:
                try:
                    item = json.loads(block.thinking_signature)
                except ValueError:
                    continue  # not ours: nothing the API could verify
                if isinstance(item, dict) and item.get("type") == "reasoning":
                    items.append(item)
        elif block.type == "text":
            if not block.text:
                continue
            if same and block.text_signature:
                item_id, phase = _split_text_signature(block.text_signature)
                item = {
                    "type": "message",
                    "role": "assistant",
                    "id": item_id,
                    "status": "completed",
                    "content": [{"type": "output_text", "text": block.text, "annotations": []}],
                }
                if phase:
                    item["phase"] = phase
                items.append(item)
            else:
                items.append({"role": "assistant", "content": block.text})
        elif block.type == "toolCall":
            call_id, item_id = _split_id(block.id)
            item = {
                "type": "function_call",
                "call_id": call_id,
                "name": block.name,
                "arguments": json.dumps(block.arguments),
            }
            if same and item_id:
                item["id"] = item_id
            items.append(item)
    return items


def _normalize_call_id(call_id: str, *_: Any) -> str:
    """A call id the Responses API accepts (at most 64 characters)."""
    return safe_call_id(call_id, 64)


def _function_tool(tool: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": False,
    }


def _tools_update_note(unavailable: list[str]) -> str:
    """Said before every ``additional_tools`` item after the first: models otherwise read the
    latest item as the whole tool set (pi-ai 1.6's finding)."""
    note = (
        "The tools below are added to the ones declared earlier, which remain available unless "
        "they were said to be unavailable; a tool declared again is available again, with its new definition."
    )
    return note + (f"\nStill unavailable: {', '.join(unavailable)}." if unavailable else "")


def _removal_note(names: list[str]) -> str:
    return "These tools are no longer available; do not call them:\n" + "\n".join(f"- {n}" for n in names)


class _ToolChanges:
    """The ``additional_tools`` items of a request sending tool changes in place."""

    def __init__(self, role: str) -> None:
        self.role = role
        self.declared = False
        self.unavailable: list[str] = []

    def added(self, tools: list[Any]) -> list[dict[str, Any]]:
        names = {tool.name for tool in tools}
        self.unavailable = [name for name in self.unavailable if name not in names]
        if not tools:
            return []
        items = [{"role": self.role, "content": _tools_update_note(self.unavailable)}] if self.declared else []
        self.declared = True
        return items + [{"type": "additional_tools", "role": "developer", "tools": [_function_tool(t) for t in tools]}]

    def removed(self, message: Any) -> str:
        """The note naming what ``message`` withdraws (not what it defines again), or ""."""
        again = {tool.name for tool in message.tools_added or []}
        names = [name for name in message.tools_removed or () if name not in again]
        self.unavailable += [name for name in names if name not in self.unavailable]
        return _removal_note(names) if names else ""


def _input(model: Model, context: Context, tool_changes: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    developer = model.reasoning and (model.compat or {}).get("supports_developer_role") is not False
    role = "developer" if developer else "system"
    changes = _ToolChanges(role) if tool_changes else None
    if changes is not None:
        out += changes.added(list(context.tools or []))

    def flush_images() -> None:
        if images:
            out.append({"role": "user", "content": [{"type": "input_text", "text": TOOL_IMAGES_INTRO}] + images[:]})
            images.clear()

    for message in transform_messages(context.messages, model, _normalize_call_id):
        kind = getattr(message, "role", None)
        if kind != "toolResult":
            flush_images()
        if kind == "user":
            out.append(_user_item(message.content))
        elif is_system_message(message):  # in place: the model accepts it (docs/llm.md#system-messages)
            parts = [render_system_message_update(message)]
            if changes is not None:
                out += changes.added(list(message.tools_added or []))
                parts.append(changes.removed(message))
            text = "\n\n".join(part for part in parts if part)
            if text:
                out.append({"role": role, "content": text})
        elif kind == "assistant":
            out.extend(_assistant_items(message, model))
        elif kind == "toolResult":
            text, pictures = tool_result_parts(message)
            out.append({"type": "function_call_output", "call_id": _split_id(message.tool_call_id)[0], "output": text})
            images.extend({"type": "input_image", "image_url": data_uri(b), "detail": "auto"} for b in pictures)
    flush_images()
    return out


def _tool_choice(choice: Any) -> Any:
    name = tool_choice_name(choice)
    return {"type": "function", "name": name} if name else choice


def build_payload(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The JSON body for ``POST /responses`` (before ``on_payload``)."""
    tool_changes = False
    if tool_changes_in_place(model):  # the registry kept the leading system message
        lead, context = take_leading_system_message(context)
        tool_changes = lead is not None
    payload: dict[str, Any] = {
        "model": model.id,
        "input": _input(model, context, tool_changes),
        "stream": True,
        "store": False,
    }
    if context.system_prompt:
        payload["instructions"] = context.system_prompt
    if options.max_tokens:
        payload["max_output_tokens"] = options.max_tokens
    caps, thinking, effort = reasoning_effort(model, options.reasoning)
    temperature = allowed_temperature(model, caps, options.temperature, thinking)
    if temperature is not None:
        payload["temperature"] = temperature
    if context.tools and not tool_changes:
        payload["tools"] = [_function_tool(t) for t in context.tools]
    if options.tool_choice is not None:
        payload["tool_choice"] = _tool_choice(allowed_tool_choice(model, caps, options.tool_choice))
    if caps.reasoning:
        payload["include"] = ["reasoning.encrypted_content"]
        if thinking and effort:
            payload["reasoning"] = {"effort": effort, "summary": "auto"}
        elif effort:
            payload["reasoning"] = {"effort": effort}
    if options.session_id and options.cache_retention != "none":
        payload["prompt_cache_key"] = options.session_id
    payload.update(cache_fields(model, caps, options, "responses"))
    if options.output_format is not None:
        add_responses_output(payload, options.output_format)
    return payload


# --------------------------------------------------------------------------- response


#: The delta events, and the builder method each one feeds.
_DELTAS = {
    "response.output_text.delta": MessageBuilder.text_delta,
    "response.refusal.delta": MessageBuilder.text_delta,
    "response.reasoning_summary_text.delta": MessageBuilder.thinking_delta,
    "response.reasoning_text.delta": MessageBuilder.thinking_delta,
    "response.function_call_arguments.delta": MessageBuilder.toolcall_delta,
}


class _Events:
    """Turns responses-API stream events into builder events; state of one response."""

    def __init__(self, builder: MessageBuilder, model: Model) -> None:
        self.builder = builder
        self.model = model
        self.blocks: dict[Any, int] = {}  # output_index -> content index of its open block
        self.arguments: dict[int, str] = {}  # content index -> final argument text
        self.finished = False
        self.refused = False

    def _index(self, event: dict[str, Any]) -> Optional[int]:
        """The content index of the still-open block of this output item, if any."""
        return self.blocks.get(event.get("output_index"))

    def feed(self, event: dict[str, Any]) -> Iterator[AssistantMessageEvent]:
        kind = event.get("type", "")
        b = self.builder
        if kind in ("response.created", "response.in_progress"):
            response = event.get("response") or {}
            if response.get("id"):
                b.message.response_id = str(response["id"])
            b.report_model(response.get("model"))
        elif kind == "response.output_item.added":
            yield from self._item_added(event)
        elif kind in _DELTAS:
            if kind == "response.refusal.delta":
                self.refused = True
            index = self._index(event)
            if index is not None and event.get("delta"):
                yield _DELTAS[kind](b, index, event["delta"])
        elif kind == "response.reasoning_summary_part.added":
            index = self._index(event)
            if index is not None and event.get("summary_index", 0) > 0:
                yield b.thinking_delta(index, "\n\n")
        elif kind == "response.function_call_arguments.done":
            index = self._index(event)
            if index is not None and isinstance(event.get("arguments"), str):
                self.arguments[index] = event["arguments"]
        elif kind == "response.output_item.done":
            yield from self._item_done(event)
        elif kind in ("response.completed", "response.incomplete"):
            yield from self._completed(event.get("response") or {})
        elif kind == "response.failed":
            response = event.get("response") or {}
            error = response.get("error") or {}
            self._record_usage(response)
            raise ProviderStreamError(
                f"Provider error: {error.get('message') or error.get('code') or 'response failed'}"
            )
        elif kind == "error":
            detail = (
                event.get("message")
                or (event.get("error") or {}).get("message")
                or event.get("code")
                or "unknown error"
            )
            raise ProviderStreamError(f"Provider error: {detail}")

    def _item_added(self, event: dict[str, Any]) -> Iterator[AssistantMessageEvent]:
        item = event.get("item") or {}
        kind = item.get("type")
        if kind == "message":
            started = self.builder.text_start(text_signature=_text_signature(item))
        elif kind == "reasoning":
            started = self.builder.thinking_start()
        elif kind == "function_call":
            started = self.builder.toolcall_start(
                f"{item.get('call_id', '')}|{item.get('id', '')}", item.get("name", "")
            )
            if item.get("arguments"):
                self.blocks[event.get("output_index")] = started.block_index
                yield started
                yield self.builder.toolcall_delta(started.block_index, item["arguments"])
                return
        else:
            return  # built-in tools (web search...) are not part of pi's message model
        self.blocks[event.get("output_index")] = started.block_index
        yield started

    def _item_done(self, event: dict[str, Any]) -> Iterator[AssistantMessageEvent]:
        index = self.blocks.pop(event.get("output_index"), None)
        if index is None:
            return
        item = event.get("item") or {}
        kind = item.get("type")
        b = self.builder
        block = b.message.content[index]
        if kind == "reasoning":
            if not (isinstance(block, ThinkingContent) and block.thinking):
                summary = "\n\n".join(part.get("text", "") for part in item.get("summary") or [])
                if summary:
                    yield b.thinking_delta(index, summary)
            yield b.thinking_end(index, thinking_signature=json.dumps(item, separators=(",", ":")))
        elif kind == "message":
            parts = item.get("content") or []
            if any(part.get("type") == "refusal" for part in parts):
                self.refused = True
            if not (isinstance(block, TextContent) and block.text):
                text = "".join(part.get("text") or part.get("refusal") or "" for part in parts)
                if text:
                    yield b.text_delta(index, text)
            yield b.text_end(index, text_signature=_text_signature(item))
        elif kind == "function_call":
            raw = item.get("arguments") if isinstance(item.get("arguments"), str) else self.arguments.get(index)
            arguments = parse_streaming_json(raw) if raw else None
            yield b.toolcall_end(index, arguments if isinstance(arguments, dict) else None)
        else:
            yield b.end_block(index)

    def _record_usage(self, response: dict[str, Any]) -> None:
        usage = response.get("usage") or {}
        details = usage.get("input_tokens_details") or {}
        self.builder.message.usage = openai_usage(
            self.model,
            usage.get("input_tokens"),
            usage.get("output_tokens"),
            cached=details.get("cached_tokens"),
            cache_written=details.get("cache_write_tokens"),
            reasoning=(usage.get("output_tokens_details") or {}).get("reasoning_tokens"),
        )

    def _completed(self, response: dict[str, Any]) -> Iterator[AssistantMessageEvent]:
        if response.get("id"):
            self.builder.message.response_id = str(response["id"])
        self.builder.report_model(response.get("model"))
        self._record_usage(response)
        yield from self.builder.end_all()
        self.finished = True
        status = response.get("status") or "completed"
        reason: StopReason
        if status == "completed":
            reason = "toolUse" if self.builder.message.tool_calls else "stop"
            if reason == "stop" and self.refused:
                self.builder.message.refusal = {"category": None, "explanation": None}
                reason = "refusal"
        elif status == "incomplete":
            cause = (response.get("incomplete_details") or {}).get("reason")
            if cause == "content_filter":
                raise ProviderStreamError(CONTENT_FILTER_MESSAGE)
            reason = "length"
        else:
            raise ProviderStreamError(f"The response ended with status {status}")
        yield self.builder.done(reason)


def _body(
    model: Model, context: Context, options: StreamOptions, builder: MessageBuilder
) -> Iterator[AssistantMessageEvent]:
    url = model.base_url.rstrip("/") + "/responses"

    def build() -> dict[str, Any]:
        return build_payload(model, context, options)

    with open_learning(model, options, url, build, bearer_headers, EFFORT_DEFAULT) as http:
        yield builder.start()
        state = _Events(builder, model)
        for _name, data in http.sse():
            if data.strip() == b"[DONE]":
                http.release()
                break
            event = parse_event_json(data)
            if isinstance(event, dict):
                for produced in state.feed(event):
                    if produced.type == "done":
                        http.release()
                    yield produced
                if state.finished:
                    return
        raise ProviderStreamError("The stream ended before the response was complete (no response.completed)")


def stream_openai_responses(model: Model, context: Context, options: StreamOptions) -> AssistantMessageEventStream:
    """Stream a response; failures end the stream with an ``error`` event (never raised)."""
    return stream_events(model, options, lambda builder: _body(model, context, options, builder))


def stream_simple_openai_responses(
    model: Model, context: Context, options: StreamOptions
) -> AssistantMessageEventStream:
    """:func:`stream_openai_responses` with ``max_tokens`` defaulting to ``min(model.max_tokens, 32000)``."""
    return stream_openai_responses(model, context, with_default_max_tokens(model, options))


register_api_provider(
    API, stream_openai_responses, stream_simple_openai_responses, system_messages=True, tool_changes=True
)
