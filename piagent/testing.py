"""Test doubles: a scripted "faux" provider that streams like a real one, with no network.

    faux = register_faux_provider()
    faux.set_responses([faux_message([faux_text("Hi"), faux_tool_call("echo", {"value": "x"})]),
                        faux_message("done")])
    agent = Agent(model=faux.get_model())

Responses are assistant messages or factories ``(context, options, state, model) -> message``,
taken one per call. Output is streamed in chunks of a few "tokens" (4 characters each),
optionally paced in real time, and stops with ``aborted`` as soon as the signal is set.
Usage is estimated at one token per 4 characters; with a ``session_id`` (and
``cache_retention`` other than "none") prompt caching is simulated per session.
"""

from __future__ import annotations

import copy
import json
import math
import random
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Union

from .ai.models import get_models, register_model, unregister_model
from .ai.provider_kit import AbortedRequest, MessageBuilder, ProviderStreamError, stream_events
from .ai.registry import get_api_providers, register_api_provider, unregister_api_provider
from .ai.stream import AssistantMessageEventStream
from .ai.types import (
    AssistantContent,
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    Cost,
    Model,
    StopReason,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    Usage,
)
from .exceptions import InvalidValueError, ModelNotFoundError

__all__ = [
    "FauxProvider",
    "FauxRequest",
    "FauxState",
    "faux_message",
    "faux_text",
    "faux_thinking",
    "faux_tool_call",
    "register_faux_provider",
]

FauxFactory = Callable[[Context, StreamOptions, "FauxState", Model], AssistantMessage]
FauxResponse = Union[AssistantMessage, FauxFactory]

CHARS_PER_TOKEN = 4


def faux_text(text: str, text_signature: Optional[str] = None) -> TextContent:
    return TextContent(text, text_signature)


def faux_thinking(thinking: str, thinking_signature: Optional[str] = None, redacted: bool = False) -> ThinkingContent:
    return ThinkingContent(thinking, thinking_signature, redacted)


def faux_tool_call(name: str, arguments: Optional[dict[str, Any]] = None, id: Optional[str] = None) -> ToolCall:
    return ToolCall(id or f"call_{uuid.uuid4().hex[:12]}", name, dict(arguments or {}))


def faux_message(
    content: Union[str, Sequence[AssistantContent]] = "",
    stop_reason: Optional[StopReason] = None,
    error_message: Optional[str] = None,
    usage: Optional[Usage] = None,
) -> AssistantMessage:
    """A scripted response; ``stop_reason`` defaults to toolUse when it calls a tool, else stop."""
    blocks: list[AssistantContent] = [TextContent(content)] if isinstance(content, str) else list(content)
    if stop_reason is None:
        stop_reason = "toolUse" if any(isinstance(b, ToolCall) for b in blocks) else "stop"
    return AssistantMessage(
        content=blocks,
        stop_reason=stop_reason,
        error_message=error_message,
        usage=usage or Usage(),
    )


@dataclass
class FauxRequest:
    """One call the provider received (for assertions in tests)."""

    model: Model
    context: Context
    options: StreamOptions


@dataclass
class FauxState:
    call_count: int = 0
    requests: list[FauxRequest] = field(default_factory=list)


def _estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _serialise_context(context: Context) -> str:
    parts = [context.system_prompt or ""]
    for message in context.messages:
        to_dict = getattr(message, "to_dict", None)
        parts.append(json.dumps(to_dict() if to_dict else str(message), sort_keys=True, default=str))
    for tool in context.tools or []:
        parts.append(json.dumps({"name": tool.name, "description": tool.description, "parameters": tool.parameters}))
    return "\n".join(parts)


def _serialise_output(message: AssistantMessage) -> str:
    return json.dumps([block.to_dict() for block in message.content], sort_keys=True)


class FauxProvider:
    """A registered faux provider. Thread-safe; ``unregister()`` removes it from the registry."""

    def __init__(
        self,
        api: str,
        provider: str,
        models: list[Model],
        tokens_per_second: Optional[float],
        chunk_tokens: tuple[int, int],
    ) -> None:
        self.api = api
        self.provider = provider
        self.models = models
        self.tokens_per_second = tokens_per_second
        self.chunk_tokens = chunk_tokens
        self.state = FauxState()
        self._responses: list[FauxResponse] = []
        self._lock = threading.Lock()
        self._sessions: dict[str, str] = {}
        self._random = random.Random(0)
        self._replaced: list[Optional[Model]] = []  # what each model replaced in the catalogue

    # -- script --------------------------------------------------------------------------

    def get_model(self, id: Optional[str] = None) -> Model:
        if id is None:
            return self.models[0]
        for model in self.models:
            if model.id == id:
                return model
        raise ModelNotFoundError(f"faux provider has no model {id!r}")

    def set_responses(self, responses: Sequence[FauxResponse]) -> None:
        with self._lock:
            self._responses = list(responses)

    def append_responses(self, responses: Sequence[FauxResponse]) -> None:
        with self._lock:
            self._responses.extend(responses)

    def get_pending_response_count(self) -> int:
        with self._lock:
            return len(self._responses)

    def unregister(self) -> None:
        """Remove the provider from the registry and its models from the catalogue (each model one
        of them replaced comes back, unless another provider's model replaced it since, or it is
        another faux provider's, unregistered since)."""
        unregister_api_provider(self.api)
        for model, replaced in zip(self.models, self._replaced):
            current = _catalogued(model.provider, model.id)
            if current is None or current.api != self.api:
                continue
            if replaced is None or replaced.api not in get_api_providers():  # none, or another faux unregistered since
                unregister_model(model.provider, model.id)
            else:
                register_model(replaced)

    def _join_catalogue(self) -> None:
        """Register the models in the catalogue, so that ``"provider:id"`` finds them (a session naming
        one resumes with it), keeping each model they replace for :meth:`unregister`."""
        for model in self.models:
            self._replaced.append(_catalogued(model.provider, model.id))
            register_model(model)

    # -- the stream function -------------------------------------------------------------

    def stream(self, model: Model, context: Context, options: StreamOptions) -> AssistantMessageEventStream:
        with self._lock:
            self.state.call_count += 1
            self.state.requests.append(FauxRequest(model, context, options))
            step = self._responses.pop(0) if self._responses else None
        if options.on_response is not None:
            options.on_response({"status": 200, "headers": {}}, model)
        return stream_events(model, options, lambda builder: self._events(builder, step, context, options))

    def _events(
        self, builder: MessageBuilder, step: Optional[FauxResponse], context: Context, options: StreamOptions
    ) -> Iterator[AssistantMessageEvent]:
        """The body of a faux stream; :func:`~piagent.ai.provider_kit.stream_events` turns what it
        raises (an abort included) into the terminal error event."""
        model, signal = builder.model, options.signal
        if step is None:
            raise ProviderStreamError("No more faux responses queued")
        scripted = step(context, options, self.state, model) if callable(step) else step
        scripted = copy.deepcopy(scripted)
        builder.message.usage = self._usage(model, context, options, scripted)
        builder.message.response_id = scripted.response_id
        if signal is not None and signal.aborted:
            raise AbortedRequest()
        yield builder.start()
        for block in scripted.content:
            if signal is not None and signal.aborted:
                raise AbortedRequest()
            for event in self._block_events(builder, block):
                yield event
                if event.delta is not None and signal is not None and self._pause_aborted(signal):
                    raise AbortedRequest()
        if scripted.stop_reason in ("error", "aborted"):
            aborted = scripted.stop_reason == "aborted"
            yield builder.error(scripted.error_message or "Request failed", aborted=aborted)
        else:
            builder.message.refusal = scripted.refusal
            yield builder.done(scripted.stop_reason)

    def _block_events(self, builder: MessageBuilder, block: Any) -> Iterator[AssistantMessageEvent]:
        if block.type == "text":
            start = builder.text_start(block.text_signature)
            index = start.block_index
            yield start
            for chunk in self._chunks(block.text):
                yield builder.text_delta(index, chunk)
            yield builder.text_end(index)
        elif block.type == "thinking":
            start = builder.thinking_start(block.thinking_signature, block.redacted)
            index = start.block_index
            yield start
            for chunk in self._chunks(block.thinking):
                yield builder.thinking_delta(index, chunk)
            yield builder.thinking_end(index)
        elif block.type == "toolCall":
            start = builder.toolcall_start(block.id, block.name, block.thought_signature)
            index = start.block_index
            yield start
            for chunk in self._chunks(json.dumps(block.arguments)):
                yield builder.toolcall_delta(index, chunk)
            yield builder.toolcall_end(index, block.arguments)
        else:
            raise InvalidValueError(f"faux provider cannot stream a {block.type!r} block")

    def _chunks(self, text: str) -> Iterator[str]:
        low, high = self.chunk_tokens
        position = 0
        while position < len(text):
            size = self._random.randint(low, high) * CHARS_PER_TOKEN
            yield text[position : position + size]
            position += size

    def _pause_aborted(self, signal: Any) -> bool:
        """Wait between chunks when paced; True if the signal is (or becomes) aborted."""
        if self.tokens_per_second:
            mean_tokens = sum(self.chunk_tokens) / 2
            return bool(signal.wait(mean_tokens / self.tokens_per_second))
        return bool(signal.aborted)

    def _usage(self, model: Model, context: Context, options: StreamOptions, output: AssistantMessage) -> Usage:
        prompt = _serialise_context(context)
        usage = Usage(output=_estimate_tokens(_serialise_output(output)))
        session = options.session_id
        if session and options.cache_retention != "none":
            with self._lock:
                previous = self._sessions.get(session, "")
                self._sessions[session] = prompt
            common = 0
            limit = min(len(previous), len(prompt))
            while common < limit and previous[common] == prompt[common]:
                common += 1
            usage.cache_read = _estimate_tokens(prompt[:common]) if common else 0
            usage.cache_write = _estimate_tokens(prompt[common:])
        else:
            usage.input = _estimate_tokens(prompt)
        usage.compute_cost(model)
        return usage


def register_faux_provider(
    api: Optional[str] = None,
    provider: str = "faux",
    models: Optional[Sequence[Union[str, dict[str, Any], Model]]] = None,
    tokens_per_second: Optional[float] = None,
    chunk_tokens: tuple[int, int] = (3, 5),
) -> FauxProvider:
    """Register a faux provider under ``api`` (random unique by default) and return its handle.

    ``models``: ids, dicts of :class:`Model` fields, or models (default: one model ``faux-1``).
    They join the catalogue until :meth:`FauxProvider.unregister`: ``"faux:faux-1"`` finds the
    latest registered, and a session naming it resumes with it.
    ``chunk_tokens``: the (min, max) tokens per streamed chunk; ``tokens_per_second`` paces
    the stream in real time.
    """
    api = api or f"faux-{uuid.uuid4().hex[:8]}"
    built: list[Model] = []
    for spec in models or ["faux-1"]:
        if isinstance(spec, Model):
            built.append(Model(**{**spec.__dict__, "api": api, "provider": provider}))
            continue
        fields: dict[str, Any] = {"id": spec} if isinstance(spec, str) else dict(spec)
        fields.setdefault("input", ["text", "image"])
        fields.setdefault("context_window", 128000)
        fields.setdefault("max_tokens", 16384)
        fields.setdefault("cost", Cost())
        built.append(Model(api=api, provider=provider, **fields))
    faux = FauxProvider(api, provider, built, tokens_per_second, chunk_tokens)
    register_api_provider(api, faux.stream)
    faux._join_catalogue()
    return faux


def _catalogued(provider: str, model_id: str) -> Optional[Model]:
    """The catalogue's model ``provider:model_id`` (no family stand-in), or None."""
    return next((model for model in get_models(provider) if model.id == model_id), None)
