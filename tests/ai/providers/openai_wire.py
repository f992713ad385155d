"""Streams in the exact wire formats of OpenAI's two APIs, written from the public API reference.

Chat completions: ``data: {chat.completion.chunk}`` frames and a final ``data: [DONE]``.
Responses: named events (``event: response.output_text.delta``) whose data repeats the name in
``type`` and carries a ``sequence_number``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any, Optional

from tests.support.scripted_server import sse

CREATED = 1764000000


# --------------------------------------------------------------------------- chat completions


def chunk(
    delta: Optional[dict[str, Any]] = None,
    finish_reason: Optional[str] = None,
    usage: Optional[dict[str, Any]] = None,
    choices: bool = True,
    id: str = "chatcmpl-A1",
    model: str = "gpt-test-2025-01-01",
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model,
        "system_fingerprint": "fp_test",
        "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}]
        if choices
        else [],
    }
    if usage is not None or not choices:
        body["usage"] = usage
    return body


def usage(prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0},
    }


def chat_stream(*chunks: Any, done: bool = True) -> list[bytes]:
    return sse(*chunks, *(["[DONE]"] if done else []))


def chat_text(*parts: str, finish: str = "stop", usage_: Optional[dict[str, Any]] = None) -> list[bytes]:
    first = [chunk({"role": "assistant", "content": "", "refusal": None})]
    deltas = [chunk({"content": p}) for p in parts]
    return chat_stream(*first, *deltas, chunk({}, finish), chunk(choices=False, usage=usage_ or usage(12, len(parts))))


def tool_delta(index: int, id: Optional[str] = None, name: Optional[str] = None, arguments: str = "") -> dict[str, Any]:
    call: dict[str, Any] = {"index": index}
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    function: dict[str, Any] = {"arguments": arguments}
    if name is not None:
        function["name"] = name
    call["function"] = function
    return chunk({"tool_calls": [call]})


# --------------------------------------------------------------------------- responses


class ResponsesStream:
    """Builds a responses-API event stream with increasing sequence numbers."""

    def __init__(self, response_id: str = "resp_01", model: str = "gpt-test") -> None:
        self.response_id = response_id
        self.model = model
        self.events: list[dict[str, Any]] = []
        self._seq = itertools.count()

    def add(self, type: str, **fields: Any) -> ResponsesStream:
        self.events.append({"type": type, "sequence_number": next(self._seq), **fields})
        return self

    def response(self, status: str, output: Iterable[dict[str, Any]] = (), **extra: Any) -> dict[str, Any]:
        body = {
            "id": self.response_id,
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": self.model,
            "output": list(output),
            "usage": None,
        }
        body.update(extra)
        return body

    def created(self) -> ResponsesStream:
        self.add("response.created", response=self.response("in_progress"))
        return self.add("response.in_progress", response=self.response("in_progress"))

    def message(self, output_index: int, item_id: str, *parts: str) -> ResponsesStream:
        item = {"id": item_id, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
        self.add("response.output_item.added", output_index=output_index, item=item)
        part = {"type": "output_text", "annotations": [], "text": ""}
        self.add("response.content_part.added", item_id=item_id, output_index=output_index, content_index=0, part=part)
        for p in parts:
            self.add(
                "response.output_text.delta",
                item_id=item_id,
                output_index=output_index,
                content_index=0,
                delta=p,
                logprobs=[],
            )
        text = "".join(parts)
        self.add(
            "response.output_text.done",
            item_id=item_id,
            output_index=output_index,
            content_index=0,
            text=text,
            logprobs=[],
        )
        done_part = {"type": "output_text", "annotations": [], "text": text}
        self.add(
            "response.content_part.done", item_id=item_id, output_index=output_index, content_index=0, part=done_part
        )
        done_item = dict(item, status="completed", content=[done_part])
        return self.add("response.output_item.done", output_index=output_index, item=done_item)

    def reasoning(self, output_index: int, item_id: str, summaries: list[list[str]], encrypted: str) -> ResponsesStream:
        item = {"id": item_id, "type": "reasoning", "encrypted_content": encrypted, "summary": []}
        self.add("response.output_item.added", output_index=output_index, item=item)
        for s_index, parts in enumerate(summaries):
            self.add(
                "response.reasoning_summary_part.added",
                item_id=item_id,
                output_index=output_index,
                summary_index=s_index,
                part={"type": "summary_text", "text": ""},
            )
            for p in parts:
                self.add(
                    "response.reasoning_summary_text.delta",
                    item_id=item_id,
                    output_index=output_index,
                    summary_index=s_index,
                    delta=p,
                )
            self.add(
                "response.reasoning_summary_text.done",
                item_id=item_id,
                output_index=output_index,
                summary_index=s_index,
                text="".join(parts),
            )
        summary = [{"type": "summary_text", "text": "".join(parts)} for parts in summaries]
        return self.add("response.output_item.done", output_index=output_index, item=dict(item, summary=summary))

    def call_added(self, output_index: int, item_id: str, call_id: str, name: str) -> ResponsesStream:
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call_id,
            "name": name,
        }
        return self.add("response.output_item.added", output_index=output_index, item=item)

    def call_delta(self, output_index: int, item_id: str, delta: str) -> ResponsesStream:
        return self.add(
            "response.function_call_arguments.delta", item_id=item_id, output_index=output_index, delta=delta
        )

    def call_done(self, output_index: int, item_id: str, call_id: str, name: str, arguments: str) -> ResponsesStream:
        self.add(
            "response.function_call_arguments.done", item_id=item_id, output_index=output_index, arguments=arguments
        )
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "completed",
            "arguments": arguments,
            "call_id": call_id,
            "name": name,
        }
        return self.add("response.output_item.done", output_index=output_index, item=item)

    def completed(
        self,
        input_tokens: int = 20,
        output_tokens: int = 5,
        cached: int = 0,
        status: str = "completed",
        incomplete_reason: Optional[str] = None,
    ) -> ResponsesStream:
        usage = {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        }
        details = {"reason": incomplete_reason} if incomplete_reason else None
        name = "response.completed" if status == "completed" else "response.incomplete"
        return self.add(name, response=self.response(status, usage=usage, incomplete_details=details))

    def frames(self) -> list[bytes]:
        return sse(*self.events, event_names=[e["type"] for e in self.events])


def responses_text(*parts: str) -> list[bytes]:
    return ResponsesStream().created().message(0, "msg_01", *parts).completed().frames()
