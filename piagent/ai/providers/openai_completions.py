"""OpenAI chat completions (``api="openai-completions"``): OpenAI and every compatible server.

``POST {base_url}/chat/completions`` with ``stream: true`` (``false`` where a server cannot
stream an automatic tool choice, see below). The same code speaks to OpenAI,
Groq, DeepSeek, OpenRouter, xAI, Mistral and local servers (Ollama, vLLM, llama.cpp, LM
Studio). Where servers differ, ``model.compat`` decides; unset keys are detected from
``base_url``:

================================  ==========================================================
``max_tokens_field``              ``"max_completion_tokens"``, unless the model's capabilities,
                                  a local server (localhost) or mistral.ai (which rejects the
                                  other field) say ``"max_tokens"``
``supports_developer_role``       system prompt of a reasoning model sent as ``developer`` (api.openai.com)
``supports_usage_in_streaming``   send ``stream_options.include_usage`` (default True)
``supports_reasoning_effort``     send ``reasoning_effort`` (False for x.ai and DeepSeek, unless
                                  the model's capabilities declare an ``effort`` control)
``supports_prompt_cache_key``     send ``prompt_cache_key`` from ``session_id`` (api.openai.com)
``supports_prompt_cache_retention`` send ``cache_retention`` as ``prompt_cache_retention`` /
                                  ``prompt_cache_options`` (api.openai.com; also read by the
                                  Responses API)
``send_reasoning_back``           replay the same model's thinking in the field it arrived in
                                  (``reasoning_content`` for DeepSeek-style servers; default True)
``tool_call_ids``                 ``"mistral"`` (9 alphanumerics, mistral.ai) or ``"openai"``
                                  (<= 40 of ``[A-Za-z0-9_-]``)
``tool_result_name``              add ``name`` to tool messages (mistral.ai)
``supports_null_content``         an assistant message with only tool calls has ``content: null``
                                  (False sends ``""``); the default depends on the server, see
                                  :mod:`._servers` and ``docs/servers.md``
``structured_output_form``        ``response_format`` for ``output_format``: ``"json_schema"``
                                  (OpenAI's) or ``"json_object"`` (``{type, schema}``, the
                                  llama.cpp family); an unknown local server that refuses the
                                  first gets the second, see ``docs/servers.md#structured-output``
``streams_tool_choice_auto``      a request with tools and ``tool_choice: "auto"`` (said
                                  explicitly when tools go without a choice) is streamed; False
                                  sends it unstreamed; an unknown local server or one of the
                                  llama.cpp family that answers it with an empty stream gets it
                                  unstreamed within the same call, and later if that worked, see
                                  ``docs/servers.md#tool-calls``
================================  ==========================================================

``supports_mid_convo_system_messages`` (default: the model's ``system_messages_in_place``
capability) sends a transcript's later system messages in place instead of folding them into
the system prompt (pi 1.6, ``docs/llm.md#system-messages``).

Thinking follows ``model.capabilities`` (docs/models.md#thinking-levels): ``effort`` models
get ``reasoning_effort`` (``"none"`` for off where the model has it), ``toggle`` models
(DeepSeek) get ``thinking: {"type": "enabled"|"disabled"}`` plus ``reasoning_effort``. A
``temperature`` the model rejects is left out (one-time warning). A model that refuses
function tools together with reasoning here reasons at its "off" setting when tools are sent.

Streaming: ``refusal`` deltas are text and end the message with ``stop_reason == "refusal"``;
``content`` deltas are text, ``reasoning_content``/``reasoning``/``reasoning_text``
deltas are thinking (the field name is kept as the thinking signature), tool calls are keyed
by ``index`` (an id or name repeated in later deltas, as llama.cpp does, is the same value).
Text and tool-call blocks stay open side by side and are closed in content order at the end.
A stream cut before any ``finish_reason`` is an error; one that has its ``finish_reason`` but
lacks ``[DONE]`` (or the usage chunk) is accepted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from collections.abc import Generator, Iterator
from typing import Any, Optional

from ...exceptions import HttpStatusError, InvalidValueError
from ..builder import MessageBuilder
from ..capabilities import EFFORT_DEFAULT, Capabilities, allowed_temperature, allowed_tool_choice, warn_once
from ..output import add_chat_completions_output
from ..registry import register_api_provider
from ..stream import AssistantMessageEventStream
from ..transcript import is_system_message, render_system_message_update
from ..transform import is_same_model, transform_messages
from ..types import AssistantMessage, AssistantMessageEvent, Context, Model, StopReason, StreamOptions
from ._common import (
    ProviderStreamError,
    is_local_url,
    open_request,
    parse_event_json,
    parse_event_object,
    stream_events,
    tool_choice_name,
)
from ._http import HttpStream
from ._openai import (
    CONTENT_FILTER_MESSAGE,
    TOOL_IMAGES_INTRO,
    bearer_headers,
    cache_fields,
    data_uri,
    is_openai_host,
    openai_usage,
    reasoning_effort,
    safe_call_id,
    tool_result_parts,
    with_default_max_tokens,
)
from ._rejections import open_learning
from ._servers import (
    is_streamed_auto_tool_choice,
    learn_compat,
    may_fail_streams_silently,
    refuses_json_schema_output,
    refuses_streamed_tool_choice,
    server_compat,
)

logger = logging.getLogger(__name__)

__all__ = ["API", "build_payload", "resolve_compat", "stream_openai_completions", "stream_simple_openai_completions"]

API = "openai-completions"
REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
_REASONING_KEYS = frozenset(REASONING_FIELDS)
_STOP_REASONS: dict[str, StopReason] = {
    "stop": "stop",
    "end": "stop",
    "length": "length",
    "tool_calls": "toolUse",
    "function_call": "toolUse",
}


# --------------------------------------------------------------------------- compat


def resolve_compat(model: Model) -> dict[str, Any]:
    """The server differences for ``model``: detected from ``base_url``, overridden by ``model.compat``."""
    url = model.base_url.lower()
    openai = is_openai_host(url)
    mistral = "mistral.ai" in url
    # A model's declared capabilities come before what its URL suggests (docs/models.md#custom-models).
    caps = model.capabilities
    declared = caps.max_tokens_field if caps is not None else None
    compat: dict[str, Any] = {
        "max_tokens_field": declared
        or ("max_tokens" if mistral or is_local_url(model.base_url) else "max_completion_tokens"),
        "supports_developer_role": openai,
        "supports_usage_in_streaming": True,
        "supports_reasoning_effort": (caps is not None and caps.thinking == "effort")
        or not ("x.ai" in url or "deepseek.com" in url),
        "supports_prompt_cache_key": openai,
        "send_reasoning_back": True,
        "tool_call_ids": "mistral" if mistral else "openai",
        "tool_result_name": mistral,
    }
    compat.update(server_compat(model))
    compat.update(model.compat or {})
    return compat


def _mistral_id(call_id: str) -> str:
    alnum = re.sub(r"[^A-Za-z0-9]", "", call_id)
    if len(alnum) >= 9:
        return alnum[-9:]
    return (alnum + hashlib.sha1(call_id.encode()).hexdigest())[:9]


def _normalizer(compat: dict[str, Any]) -> Any:
    if compat["tool_call_ids"] == "mistral":
        return lambda call_id, model, source: _mistral_id(call_id)
    return lambda call_id, model, source: safe_call_id(call_id, 40)


# --------------------------------------------------------------------------- request


def _user_content(content: Any) -> Any:
    """A string for text alone (servers that render ``content`` into a chat template, such as
    llama-cpp-python's, take a list of parts as text or drop it), else the parts."""
    if isinstance(content, str):
        return content
    if all(block.type == "text" for block in content):
        return "".join(block.text for block in content)
    parts: list[dict[str, Any]] = []
    for block in content:
        if block.type == "text":
            parts.append({"type": "text", "text": block.text})
        elif block.type == "image":
            parts.append({"type": "image_url", "image_url": {"url": data_uri(block)}})
    return parts


def _assistant_entry(message: AssistantMessage, model: Model, compat: dict[str, Any]) -> Optional[dict[str, Any]]:
    text = "".join(block.text for block in message.content if block.type == "text")
    entry: dict[str, Any] = {"role": "assistant", "content": text or (None if compat["supports_null_content"] else "")}
    thinking = [block for block in message.content if block.type == "thinking" and block.thinking]
    if thinking and compat["send_reasoning_back"] and is_same_model(message, model):
        field = thinking[0].thinking_signature
        entry[field if field in REASONING_FIELDS else "reasoning_content"] = "\n\n".join(b.thinking for b in thinking)
    calls = [
        {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": json.dumps(call.arguments)}}
        for call in message.tool_calls
    ]
    if calls:
        entry["tool_calls"] = calls
    elif not text:
        return None  # nothing the server could use
    return entry


def _messages(model: Model, context: Context, compat: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        developer = model.reasoning and compat["supports_developer_role"]
        out.append({"role": "developer" if developer else "system", "content": context.system_prompt})
    images: list[dict[str, Any]] = []

    def flush_images() -> None:
        if images:
            out.append({"role": "user", "content": [{"type": "text", "text": TOOL_IMAGES_INTRO}] + images[:]})
            images.clear()

    for message in transform_messages(context.messages, model, _normalizer(compat)):
        role = getattr(message, "role", None)
        if role != "toolResult":
            flush_images()
        if role == "user":
            out.append({"role": "user", "content": _user_content(message.content)})
        elif is_system_message(message):  # in place: the model accepts it (docs/llm.md#system-messages)
            text = render_system_message_update(message)
            if text:
                developer = model.reasoning and compat["supports_developer_role"]
                out.append({"role": "developer" if developer else "system", "content": text})
        elif role == "assistant":
            entry = _assistant_entry(message, model, compat)
            if entry is not None:
                out.append(entry)
        elif role == "toolResult":
            text, pictures = tool_result_parts(message)
            entry = {"role": "tool", "tool_call_id": message.tool_call_id, "content": text}
            if compat["tool_result_name"]:
                entry["name"] = message.tool_name
            out.append(entry)
            images.extend({"type": "image_url", "image_url": {"url": data_uri(b)}} for b in pictures)
    flush_images()
    return out


def _tool_choice(choice: Any) -> Any:
    name = tool_choice_name(choice)
    return {"type": "function", "function": {"name": name}} if name else choice


def _reasoning_fields(
    model: Model, context: Context, options: StreamOptions, compat: dict[str, Any]
) -> tuple[dict[str, Any], Capabilities, bool]:
    """``(fields, capabilities, thinking on)``: ``reasoning_effort`` (and DeepSeek's ``thinking``
    switch) for the level asked."""
    caps, thinking, effort = reasoning_effort(model, options.reasoning)
    if thinking and context.tools and not caps.chat_tools_with_reasoning:
        if caps.thinking_off is None:
            raise InvalidValueError(
                f"{model.provider}:{model.id} always reasons and refuses function tools with reasoning on "
                "Chat Completions: use api='openai-responses' (the catalogue's default for OpenAI) for tools"
            )
        warn_once(
            ("chat-tools-reasoning", model.provider, model.id),
            f"{model.provider}:{model.id} refuses function tools with reasoning on Chat Completions: "
            "reasoning is off for requests with tools (use the openai-responses API to keep it)",
        )
        thinking, effort = False, ("none" if caps.thinking_off == "none" else None)
    fields: dict[str, Any] = {}
    if caps.thinking == "toggle":
        if thinking or caps.thinking_off is not None:
            fields["thinking"] = {"type": "enabled" if thinking else "disabled"}
        if thinking and effort:
            fields["reasoning_effort"] = effort
    elif caps.thinking == "effort" and effort and compat["supports_reasoning_effort"]:
        fields["reasoning_effort"] = effort
    return fields, caps, thinking


def build_payload(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The JSON body for ``POST /chat/completions`` (before ``on_payload``).

    Tools offered without a ``tool_choice`` go with ``"auto"`` said explicitly (llama-cpp-python's
    server offers no tool without it); a server whose ``streams_tool_choice_auto`` is False gets
    that request with ``stream: false`` (docs/servers.md#tool-calls).
    """
    compat = resolve_compat(model)
    choice = options.tool_choice if options.tool_choice is not None or not context.tools else "auto"
    payload: dict[str, Any] = {"model": model.id, "messages": _messages(model, context, compat), "stream": True}
    if compat["supports_usage_in_streaming"]:
        payload["stream_options"] = {"include_usage": True}
    if options.max_tokens:
        payload[compat["max_tokens_field"]] = options.max_tokens
    reasoning, caps, thinking = _reasoning_fields(model, context, options, compat)
    temperature = allowed_temperature(model, caps, options.temperature, thinking)
    if temperature is not None:
        payload["temperature"] = temperature
    if context.tools:
        payload["tools"] = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in context.tools
        ]
    if choice is not None:
        choice = allowed_tool_choice(model, caps, choice)
        payload["tool_choice"] = _tool_choice(choice)
    payload.update(reasoning)
    if options.session_id and compat["supports_prompt_cache_key"] and options.cache_retention != "none":
        payload["prompt_cache_key"] = options.session_id
    payload.update(cache_fields(model, caps, options, "chat"))
    if options.output_format is not None:
        add_chat_completions_output(payload, options.output_format, compat["structured_output_form"])
    return payload if choice != "auto" or compat["streams_tool_choice_auto"] else _unstreamed(payload)


def _unstreamed(payload: dict[str, Any]) -> dict[str, Any]:
    """``payload`` as a request whose answer comes whole (``stream_options`` needs a stream)."""
    return {key: value for key, value in payload.items() if key != "stream_options"} | {"stream": False}


# --------------------------------------------------------------------------- response


class _Chunks:
    """Turns chat-completion chunks into builder events; state of one response."""

    def __init__(self, builder: MessageBuilder) -> None:
        self.builder = builder
        self.text: Optional[int] = None
        self.thinking: Optional[int] = None
        self.calls: dict[int, int] = {}  # wire index -> content index
        self.finish_reason: Optional[str] = None
        self.usage: Optional[dict[str, Any]] = None
        self.reported_model: Any = None  # the model id the last chunk reported
        self.refused = False
        self.chunks = 0  # fed so far

    def feed(self, chunk: dict[str, Any]) -> list[AssistantMessageEvent]:
        """The events for one chunk (a list: this runs once per streamed delta)."""
        self.chunks += 1
        out: list[AssistantMessageEvent] = []
        error = chunk.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise ProviderStreamError(f"Provider error: {message or json.dumps(error)}")
        if chunk.get("id") and not self.builder.message.response_id:
            self.builder.message.response_id = str(chunk["id"])
        reported = chunk.get("model")
        if reported != self.reported_model:  # every chunk repeats it: recorded when it changes
            self.reported_model = reported
            self.builder.report_model(reported)
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if choice.get("usage"):
                self.usage = choice["usage"]
            delta = choice.get("delta") or {}
            if not _REASONING_KEYS.isdisjoint(delta):  # one pass over the delta's few keys
                for field in REASONING_FIELDS:
                    value = delta.get(field)
                    if isinstance(value, str) and value:
                        self._thinking(value, field, out)
                        break
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._text(content, out)
            refusal = delta.get("refusal")
            if isinstance(refusal, str) and refusal:
                self.refused = True
                self._text(refusal, out)
            calls = delta.get("tool_calls")
            if calls:
                for position, call in enumerate(calls):
                    self._tool_call(call, position, out)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return out

    def _text(self, delta: str, out: list[AssistantMessageEvent]) -> None:
        if self.thinking is not None:
            out.append(self.builder.thinking_end(self.thinking))
            self.thinking = None
        if self.text is None:
            event = self.builder.text_start()
            self.text = event.block_index
            out.append(event)
        out.append(self.builder.text_delta(self.text, delta))

    def _thinking(self, delta: str, field: str, out: list[AssistantMessageEvent]) -> None:
        if self.text is not None:
            out.append(self.builder.text_end(self.text))
            self.text = None
        if self.thinking is None:
            event = self.builder.thinking_start(thinking_signature=field)
            self.thinking = event.block_index
            out.append(event)
        out.append(self.builder.thinking_delta(self.thinking, delta))

    def _tool_call(self, call: dict[str, Any], position: int, out: list[AssistantMessageEvent]) -> None:
        wire_index = call.get("index", position)
        function = call.get("function") or {}
        call_id, name = call.get("id") or "", function.get("name") or ""
        index = self.calls.get(wire_index)
        if index is not None and call_id and self.builder.tool_call(index).id not in ("", call_id):
            index = None  # a new call reusing the index (servers that send whole calls at index 0)
        if index is None:
            event = self.builder.toolcall_start(call_id, name)
            index = self.calls[wire_index] = event.block_index
            out.append(event)
        elif call_id or name:
            block = self.builder.tool_call(index)
            block.id = block.id or call_id
            block.name = block.name or name
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        if arguments:
            out.append(self.builder.toolcall_delta(index, arguments))

    def finish(self, model: Model) -> Iterator[AssistantMessageEvent]:
        for index in self.calls.values():  # tool calls stay open until here
            block = self.builder.tool_call(index)
            if not block.id:
                block.id = "call_" + uuid.uuid4().hex[:24]
        yield from self.builder.end_all()
        self.builder.message.usage = _usage(self.usage, model)
        reason = self.finish_reason or "stop"
        if reason == "content_filter":
            raise ProviderStreamError(CONTENT_FILTER_MESSAGE)
        mapped = _STOP_REASONS.get(reason)
        if mapped is None:
            raise ProviderStreamError(f"The provider stopped the response with an unknown finish_reason: {reason}")
        if mapped == "stop" and self.builder.message.tool_calls:
            mapped = "toolUse"  # some local servers say "stop" after tool calls
        if mapped == "stop" and self.refused:
            self.builder.message.refusal = {"category": None, "explanation": None}
            mapped = "refusal"
        yield self.builder.done(mapped)


def _usage(raw: Optional[dict[str, Any]], model: Model) -> Any:
    """Usage from OpenAI's fields (``prompt_tokens_details.cached_tokens`` /
    ``cache_write_tokens``, ``completion_tokens_details.reasoning_tokens``) or DeepSeek's
    (``prompt_cache_hit_tokens``, ``completion_tokens_details.reasoning_tokens``)."""
    raw = raw or {}
    prompt = raw.get("prompt_tokens_details") or {}
    completion = raw.get("completion_tokens_details") or {}
    cached = prompt.get("cached_tokens")
    if cached is None:
        cached = raw.get("prompt_cache_hit_tokens")
    return openai_usage(
        model,
        raw.get("prompt_tokens"),
        raw.get("completion_tokens"),
        cached=cached,
        cache_written=prompt.get("cache_write_tokens"),
        reasoning=completion.get("reasoning_tokens"),
    )


def _open(model: Model, context: Context, options: StreamOptions, url: str) -> tuple[HttpStream, dict[str, Any]]:
    """Send the request, learning what the model refuses (docs/providers.md#rejected-fields);
    ``(response, payload sent before on_payload)``. An unknown local server that refuses the
    json_schema form is asked once more in the json_object form."""
    sent: list[dict[str, Any]] = []

    def build() -> dict[str, Any]:
        sent[:] = [build_payload(model, context, options)]
        return sent[0]

    def json_object_instead(error: HttpStatusError) -> bool:
        if options.output_format is None or not refuses_json_schema_output(model, resolve_compat(model), error):
            return False
        logger.info("%s refused response_format json_schema; using json_object + schema from now on", model.base_url)
        learn_compat(model, "structured_output_form", "json_object")  # docs/servers.md#structured-output
        return True

    http = open_learning(model, options, url, build, bearer_headers, EFFORT_DEFAULT, json_object_instead)
    return http, sent[0]


def _read_stream(http: HttpStream, state: _Chunks) -> Generator[AssistantMessageEvent, None, bool]:
    """Feed the streamed chunks to ``state``; returns whether the stream was complete (``[DONE]``
    or a ``finish_reason`` seen)."""
    for _name, data in http.sse():
        if data[:1] != b"{" and data.strip() == b"[DONE]":
            http.release()
            return True
        chunk = parse_event_json(data)
        if isinstance(chunk, dict):
            yield from state.feed(chunk)
    return state.finish_reason is not None


def _read_whole(http: HttpStream, state: _Chunks) -> Generator[AssistantMessageEvent, None, bool]:
    """Feed an unstreamed ``chat.completion`` to ``state`` as one chunk whose deltas are its
    messages: the events are those of a stream that sent everything at once. Returns True."""
    completion = parse_event_object(http.body())
    choices = [
        {"delta": choice.get("message") or {}, "finish_reason": choice.get("finish_reason")}
        for choice in completion.get("choices") or []
        if isinstance(choice, dict)
    ]
    yield from state.feed({**completion, "choices": choices})
    return True


def _body(
    model: Model, context: Context, options: StreamOptions, builder: MessageBuilder
) -> Iterator[AssistantMessageEvent]:
    url = model.base_url.rstrip("/") + "/chat/completions"
    http, payload = _open(model, context, options, url)
    state = _Chunks(builder)
    with http:
        yield builder.start()
        complete = yield from (_read_stream if payload["stream"] else _read_whole)(http, state)
        if not complete:
            http.discard()
    if not complete:
        ended = "The stream ended before the response was complete (no finish_reason or [DONE])"
        if state.chunks or not may_fail_streams_silently(model):
            if not state.chunks and is_streamed_auto_tool_choice(payload):
                ended += ' (a server that cannot stream tool_choice "auto" needs compat streams_tool_choice_auto=false)'
            raise ProviderStreamError(ended)
        # llama-cpp-python's server: asked again unstreamed (docs/servers.md#empty-streams)
        try:
            with open_request(model, options, url, _unstreamed(payload), bearer_headers) as http:
                yield from _read_whole(http, state)
        except (HttpStatusError, ProviderStreamError) as error:
            raise ProviderStreamError(f"{ended}; sent again unstreamed: {error}") from None
        if refuses_streamed_tool_choice(model, resolve_compat(model), payload):
            logger.info("%s sent nothing for a streamed tool choice; sending it unstreamed from now on", model.base_url)
            learn_compat(model, "streams_tool_choice_auto", False)
    yield from state.finish(model)


def stream_openai_completions(model: Model, context: Context, options: StreamOptions) -> AssistantMessageEventStream:
    """Stream a chat completion; failures end the stream with an ``error`` event (never raised)."""
    return stream_events(model, options, lambda builder: _body(model, context, options, builder))


def stream_simple_openai_completions(
    model: Model, context: Context, options: StreamOptions
) -> AssistantMessageEventStream:
    """:func:`stream_openai_completions` with ``max_tokens`` defaulting to ``min(model.max_tokens, 32000)``."""
    return stream_openai_completions(model, context, with_default_max_tokens(model, options))


register_api_provider(API, stream_openai_completions, stream_simple_openai_completions, system_messages=True)
