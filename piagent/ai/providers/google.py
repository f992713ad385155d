"""The Gemini API (``api="google-generative-ai"``), streamed over SSE.

Request: ``POST {base_url}/models/{model.id}:streamGenerateContent?alt=sse`` with
``x-goog-api-key``. :func:`build_request` turns a :class:`Context` into the JSON body (a pure
function); :class:`GoogleStreamMapper` turns each streamed ``GenerateContentResponse`` chunk
into builder events (also pure). Every failure ends the stream as an ``error`` event.

Tool schemas go out as ``parametersJsonSchema`` (full JSON Schema, accepted by the Gemini
API), not as ``parameters`` (an OpenAPI subset that rejects ``additionalProperties``,
``$ref``, ``const``...): nothing is lost in translation; only ``$schema`` is removed.

Function calls arrive whole: each becomes ``toolcall_start``, one ``toolcall_delta`` with
the full JSON arguments and ``toolcall_end``. Calls without an id get one, unique in the
message. ``thoughtSignature`` on a part is kept on the block it belongs to and sent back
for the same model only (the history transform drops it for others); on models whose
capabilities require signatures (Gemini 3+), a call made by another model carries the value
Google documents for skipping the check.

Thinking follows ``model.capabilities`` (docs/models.md#thinking-levels): ``thinkingLevel``
(Gemini 3+; "off" is the lowest level, thinking cannot be turned off) or ``thinkingBudget``
(2.x; "off" is a zero budget where the model allows it).

Finish reasons: ``CONTINUATION`` (the per-request token limit was reached, generation not done)
is continued with the returned ``continuationToken`` into the same message; a stream that breaks
off (or ends without a finish reason) after a chunk carried a checkpoint ``continuationToken`` is
resumed from the newest one the same way (as the official SDK does); at most
:data:`MAX_CONTINUATIONS` further requests in all; ``MISSING_THOUGHT_SIGNATURE``, ``TOO_MANY_TOOL_CALLS``,
``MALFORMED_RESPONSE`` and the other failures end the stream with a message saying what happened.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from typing import Any, Optional
from urllib.parse import quote

from ..builder import MessageBuilder
from ..capabilities import (
    THINKING_LEVELS,
    Capabilities,
    allowed_temperature,
    allowed_tool_choice,
    capabilities_of,
    plan_thinking,
)
from ..output import add_google_output
from ..registry import register_api_provider
from ..stream import AssistantMessageEventStream
from ..transform import transform_messages
from ..types import AssistantMessage, AssistantMessageEvent, Context, Model, StopReason, StreamOptions, Usage
from ._common import (
    ProviderStreamError,
    default_max_tokens,
    open_request,
    parse_event_object,
    reasoning_budget,
    stream_events,
    tool_choice_name,
    usage_with_cached_prompt,
)
from ._rejections import open_learning

__all__ = ["API", "GoogleStreamMapper", "build_request", "request_url", "stream_google"]

API = "google-generative-ai"
#: How many more requests one response may take: continuations after ``finishReason:
#: CONTINUATION`` and resumptions of a broken stream from its checkpoint, together.
MAX_CONTINUATIONS = 8

logger = logging.getLogger(__name__)

#: A model declared by hand without capabilities: budget thinking, nothing sent for "off".
GEMINI_DEFAULT = Capabilities(thinking="budget", efforts=THINKING_LEVELS)

# Gemini 3 rejects a function call in the current turn without a thought signature; for
# calls made by another model Google documents this value to skip the check.
SKIP_SIGNATURE = "skip_thought_signature_validator"

FAILED_FINISH_REASONS = {
    "SAFETY": "The response was blocked by safety filters",
    "RECITATION": "The response was blocked for reciting copyrighted material",
    "LANGUAGE": "The response was blocked: unsupported language",
    "BLOCKLIST": "The response was blocked: it contained blocklisted terms",
    "PROHIBITED_CONTENT": "The response was blocked for prohibited content",
    "SPII": "The response was blocked: it contained sensitive personal information",
    "MALFORMED_FUNCTION_CALL": "The model produced a malformed function call",
    "UNEXPECTED_TOOL_CALL": "The model called a tool although none was available",
    "IMAGE_SAFETY": "The generated image was blocked by safety filters",
    "IMAGE_PROHIBITED_CONTENT": "The generated image was blocked for prohibited content",
    "IMAGE_RECITATION": "The generated image was blocked for recitation",
    "IMAGE_OTHER": "The image generation stopped for an unspecified reason",
    "NO_IMAGE": "The model was expected to generate an image but did not",
    "OTHER": "The response was stopped for an unspecified reason",
    "MISSING_THOUGHT_SIGNATURE": "The request lacked a thought signature the model requires on its own earlier "
    "function calls (replay the conversation unchanged, or start a new one)",
    "TOO_MANY_TOOL_CALLS": "The model made too many tool calls in one request; the server-side tool loop stopped",
    "MALFORMED_RESPONSE": "The model produced a malformed response",
    "ESCALATION": "The request was filtered by an escalation rule",
    "PUP_LIMITED_DISABLED": "The account is limited or disabled for Prohibited Use Policy violations",
    "MODEL_ARMOR": "The response was blocked by Model Armor",
}


# --------------------------------------------------------------------------- request


def _user_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts: list[dict[str, Any]] = []
    for block in content:
        if block.type == "text":
            if block.text:
                parts.append({"text": block.text})
        elif block.type == "image":
            parts.append({"inlineData": {"mimeType": block.mime_type, "data": block.data}})
    return parts


def _model_parts(message: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in message.content:
        if block.type == "text":
            if block.text or block.text_signature:
                part: dict[str, Any] = {"text": block.text}
                if block.text_signature:
                    part["thoughtSignature"] = block.text_signature
                parts.append(part)
        elif block.type == "thinking":
            if block.redacted:
                continue
            if block.thinking or block.thinking_signature:
                part = {"text": block.thinking, "thought": True}
                if block.thinking_signature:
                    part["thoughtSignature"] = block.thinking_signature
                parts.append(part)
        elif block.type == "toolCall":
            part = {"functionCall": {"name": block.name, "args": block.arguments}}
            needs_signature = capabilities_of(model, GEMINI_DEFAULT).thought_signatures
            signature = block.thought_signature or (SKIP_SIGNATURE if needs_signature else None)
            if signature:
                part["thoughtSignature"] = signature
            parts.append(part)
    return parts


def _function_response_parts(message: Any) -> list[dict[str, Any]]:
    text = "\n".join(b.text for b in message.content if b.type == "text")
    images = [b for b in message.content if b.type == "image"]
    if not text and images:
        text = "(see attached image)" if len(images) == 1 else "(see attached images)"
    key = "error" if message.is_error else "output"
    parts: list[dict[str, Any]] = [{"functionResponse": {"name": message.tool_name, "response": {key: text}}}]
    for image in images:
        parts.append({"inlineData": {"mimeType": image.mime_type, "data": image.data}})
    return parts


def convert_messages(messages: list[Any], model: Model) -> list[dict[str, Any]]:
    """Already-transformed messages as Gemini ``contents`` (tool results merged per turn)."""
    out: list[dict[str, Any]] = []
    merging_results = False
    for message in messages:
        if message.role == "toolResult":
            parts = _function_response_parts(message)
            if merging_results:
                out[-1]["parts"].extend(parts)
            else:
                out.append({"role": "user", "parts": parts})
                merging_results = True
            continue
        merging_results = False
        if message.role == "user":
            parts = _user_parts(message.content)
            if parts:
                out.append({"role": "user", "parts": parts})
        elif message.role == "assistant":
            parts = _model_parts(message, model)
            if parts:
                out.append({"role": "model", "parts": parts})
    return out


def _schema(parameters: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in parameters.items() if k != "$schema"}


def _tool_config(choice: Any) -> Optional[dict[str, Any]]:
    """``options.tool_choice`` as a ``toolConfig``; raises ``ValueError`` for an unknown one."""
    name = tool_choice_name(choice)
    if name is not None:
        return {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": [name]}}
    if choice is None:
        return None
    mode = {"auto": "AUTO", "none": "NONE", "required": "ANY"}[choice]
    return {"functionCallingConfig": {"mode": mode}}


def _thinking_config(
    model: Model, caps: Capabilities, options: StreamOptions, thinking: bool, effort: Optional[str]
) -> Optional[dict[str, Any]]:
    if not thinking or not effort:
        return {"thinkingBudget": 0} if caps.thinking == "budget" and caps.thinking_off == "zero_budget" else None
    if caps.thinking == "level":
        return {"thinkingLevel": effort.upper(), "includeThoughts": True}
    return {"thinkingBudget": reasoning_budget(effort, options, model), "includeThoughts": True}


def build_request(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The JSON body of a ``streamGenerateContent`` request (before ``on_payload``)."""
    payload: dict[str, Any] = {"contents": convert_messages(transform_messages(context.messages, model), model)}
    if context.system_prompt:
        payload["systemInstruction"] = {"parts": [{"text": context.system_prompt}]}
    config: dict[str, Any] = {"maxOutputTokens": options.max_tokens or default_max_tokens(model)}
    caps = capabilities_of(model, GEMINI_DEFAULT)
    thinking, effort = plan_thinking(caps, options.reasoning)
    thinking_config = _thinking_config(model, caps, options, thinking, effort)
    temperature = allowed_temperature(model, caps, options.temperature, thinking)
    if temperature is not None:
        config["temperature"] = temperature
    if thinking_config is not None:
        config["thinkingConfig"] = thinking_config
    payload["generationConfig"] = config
    if context.tools:
        payload["tools"] = [
            {
                "functionDeclarations": [
                    {"name": t.name, "description": t.description, "parametersJsonSchema": _schema(t.parameters)}
                    for t in context.tools
                ]
            }
        ]
        tool_config = _tool_config(allowed_tool_choice(model, caps, options.tool_choice))
        if tool_config is not None:
            payload["toolConfig"] = tool_config
    if options.output_format is not None:
        add_google_output(payload, options.output_format)
    return payload


def _key_headers(api_key: str) -> dict[str, str]:
    return {"x-goog-api-key": api_key}


def request_url(model: Model) -> str:
    return f"{model.base_url.rstrip('/')}/models/{quote(model.id, safe='-._~/')}:streamGenerateContent?alt=sse"


# --------------------------------------------------------------------------- response


class GoogleStreamMapper:
    """Feeds one streamed ``GenerateContentResponse`` chunk at a time into a builder.

    Text parts extend the open text block (``thought: true`` ones the open thinking block);
    a part of another kind closes it first. :meth:`finish` returns the closing events and
    raises :class:`ProviderStreamError` when the stream never gave a finish reason or gave one
    that means failure.
    """

    def __init__(self, builder: MessageBuilder) -> None:
        self.builder = builder
        self._open: Optional[int] = None  # content index of the open text/thinking block
        self._open_kind: Optional[str] = None
        self._signature: Optional[str] = None  # of the open block
        self._ids: set = set()
        self.finish_reason: Optional[str] = None
        self.continuation_token: Optional[str] = None
        self._block_reason: Optional[str] = None
        self._earlier: Optional[Usage] = None  # usage of the earlier requests of a continued response

    def _close_open(self) -> list[AssistantMessageEvent]:
        if self._open is None:
            return []
        index, kind, signature = self._open, self._open_kind, self._signature
        self._open, self._open_kind, self._signature = None, None, None
        if kind == "thinking":
            return [self.builder.thinking_end(index, signature)]
        return [self.builder.text_end(index, signature)]

    def _read_usage(self, meta: dict[str, Any]) -> None:
        thoughts = meta.get("thoughtsTokenCount") or 0
        output = (meta.get("candidatesTokenCount") or 0) + thoughts
        usage = usage_with_cached_prompt(
            self.builder.model, meta.get("promptTokenCount"), meta.get("cachedContentTokenCount"), output
        )
        usage.reasoning = int(thoughts)
        if self._earlier is not None:  # a continued response: each request priced on its own, then summed
            usage.add(self._earlier)
        self.builder.message.usage = usage

    def feed(self, chunk: dict[str, Any]) -> list[AssistantMessageEvent]:
        if chunk.get("responseId") and not self.builder.message.response_id:
            self.builder.message.response_id = chunk["responseId"]
        self.builder.report_model(chunk.get("modelVersion"))
        if isinstance(chunk.get("usageMetadata"), dict):
            self._read_usage(chunk["usageMetadata"])
        feedback = chunk.get("promptFeedback") or {}
        if feedback.get("blockReason"):
            self._block_reason = feedback["blockReason"]
        candidates = chunk.get("candidates") or []
        if not candidates:
            return []
        candidate = candidates[0] or {}
        events: list[AssistantMessageEvent] = []
        for part in (candidate.get("content") or {}).get("parts") or []:
            if "text" in part:
                events.extend(self._text_part(part))
            elif isinstance(part.get("functionCall"), dict):
                events.extend(self._function_call(part))
        if candidate.get("finishReason"):
            self.finish_reason = candidate["finishReason"]
        if candidate.get("continuationToken"):
            self.continuation_token = candidate["continuationToken"]
        return events

    def continue_with(self) -> Optional[str]:
        """The ``continuationToken`` the next request resumes from, None when there is none:
        the token of a ``CONTINUATION`` stop, or, when the stream broke off or ended without a
        finish reason, the newest checkpoint token this request delivered. Resets for the next
        request (so a request that brings no new token is not resumed again)."""
        if self.finish_reason not in (None, "CONTINUATION") or self._block_reason or not self.continuation_token:
            return None
        token, self.continuation_token, self.finish_reason = self.continuation_token, None, None
        self._earlier = self.builder.message.usage
        return token

    def _text_part(self, part: dict[str, Any]) -> list[AssistantMessageEvent]:
        builder = self.builder
        kind = "thinking" if part.get("thought") is True else "text"
        text = part.get("text") or ""
        signature = part.get("thoughtSignature")
        events: list[AssistantMessageEvent] = []
        if self._open_kind != kind:
            if not text and not signature:
                return []
            events.extend(self._close_open())
            start = builder.thinking_start() if kind == "thinking" else builder.text_start()
            self._open, self._open_kind = start.content_index, kind
            events.append(start)
        index = self._open
        assert index is not None
        if text:
            events.append(
                builder.thinking_delta(index, text) if kind == "thinking" else builder.text_delta(index, text)
            )
        if signature:
            self._signature = signature
        return events

    def _new_id(self, name: str) -> str:
        while True:
            candidate = f"{name}_{uuid.uuid4().hex[:12]}"
            if candidate not in self._ids:
                return candidate

    def _function_call(self, part: dict[str, Any]) -> list[AssistantMessageEvent]:
        call = part["functionCall"]
        name = call.get("name")
        if not name:
            return []  # argument-streaming fragments (not requested by this provider)
        events = self._close_open()
        call_id = call.get("id")
        if not call_id or call_id in self._ids:
            call_id = self._new_id(name)
        self._ids.add(call_id)
        args = call.get("args")
        args = args if isinstance(args, dict) else {}
        builder = self.builder
        start = builder.toolcall_start(call_id, name, part.get("thoughtSignature"))
        index = start.content_index
        assert index is not None
        events.append(start)
        events.append(builder.toolcall_delta(index, json.dumps(args, ensure_ascii=False)))
        events.append(builder.toolcall_end(index, args))
        return events

    def finish(self) -> list[AssistantMessageEvent]:
        """Close the open block and return it plus the terminal ``done`` event."""
        reason = self.finish_reason
        if reason is None:
            if self._block_reason:
                raise ProviderStreamError(f"The prompt was blocked (blockReason: {self._block_reason})")
            raise ProviderStreamError("The stream ended before a finish reason")
        events = self._close_open()
        if reason in FAILED_FINISH_REASONS:
            raise ProviderStreamError(f"{FAILED_FINISH_REASONS[reason]} (finishReason: {reason})")
        if reason == "CONTINUATION":  # without a token (continue_with() handles the rest)
            raise ProviderStreamError(
                "The response stopped incomplete at the per-request token limit and gave no continuationToken "
                "(finishReason: CONTINUATION)"
            )
        mapped: StopReason
        if reason == "MAX_TOKENS":
            mapped = "length"
        elif reason in ("STOP", "FINISH_REASON_UNSPECIFIED"):
            mapped = "toolUse" if self.builder.message.tool_calls else "stop"
        else:
            raise ProviderStreamError(f"Unhandled finish reason: {reason}")
        events.append(self.builder.done(mapped))
        return events


# --------------------------------------------------------------------------- provider


def _parse(data: bytes) -> dict[str, Any]:
    value = parse_event_object(data)
    error = value.get("error")
    if isinstance(error, dict):
        raise ProviderStreamError(str(error.get("message") or error.get("status") or error))
    return value


def stream_google(model: Model, context: Context, options: StreamOptions) -> AssistantMessageEventStream:
    """Stream a Gemini response; failures end the stream as an ``error`` event."""

    def body(builder: MessageBuilder) -> Iterator[AssistantMessageEvent]:
        sent: list[dict[str, Any]] = []

        def build() -> dict[str, Any]:
            sent[:] = [build_request(model, context, options)]
            return sent[0]

        mapper = GoogleStreamMapper(builder)
        url = request_url(model)
        http = open_learning(model, options, url, build, _key_headers, GEMINI_DEFAULT)
        payload = sent[0]
        for hop in range(MAX_CONTINUATIONS + 1):
            broken: Optional[ProviderStreamError] = None
            try:
                if hop > 0:  # a continuation or resumption: the response had begun, so nothing is learned here
                    http = open_request(model, options, url, payload, _key_headers)
                with http:
                    if hop == 0:
                        yield builder.start()
                    for _name, data in http.sse():
                        for event in mapper.feed(_parse(data)):
                            yield event
            except ProviderStreamError as exc:  # the stream broke off: resumable from a checkpoint
                broken = exc
            token = None if options.signal is not None and options.signal.aborted else mapper.continue_with()
            if token is None:
                if broken is not None:
                    raise broken
                break
            if broken is not None:
                logger.info(
                    "%s:%s: the stream broke off (%s); resuming from its checkpoint", model.provider, model.id, broken
                )
            payload = dict(payload, continuationToken=token)
        else:
            raise ProviderStreamError(f"The response was still incomplete after {MAX_CONTINUATIONS} continuations")
        for event in mapper.finish():
            yield event

    return stream_events(model, options, body)


register_api_provider(API, stream_google, stream_google)
