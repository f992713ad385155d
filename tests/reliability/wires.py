"""The four provider APIs' wire formats, reduced to what the fault matrix needs.

A :class:`Wire` builds, for one API: the model pointing at a test server, a complete text
answer, the first half of an answer ("Hel", stream still open), its second half ("lo" and the
terminal event), a complete tool-call answer, and an HTTP error body in that API's shape.
Formats follow each API's public reference (OpenAI chat completions and responses, Anthropic
Messages, Gemini ``streamGenerateContent?alt=sse``).

``history(body)`` reads a request body back as a list of labels, the same for every API:
``"user:<text>"``, ``"assistant:<text>"``, ``"call:<name>"`` and ``"result:<text>"``
(images as ``"image"``), so tests can compare what each provider sent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from piagent.ai import Cost, Model
from tests.ai.providers.openai_wire import ResponsesStream, chat_stream, chat_text, chunk, tool_delta
from tests.support.scripted_server import sse


@dataclass(frozen=True)
class Wire:
    api: str
    provider: str
    model_id: str
    path: str  # appended to the server URL to make the model's base_url
    key_header: str  # where the key travels
    text: Callable[[str], list[bytes]]
    head: Callable[[], list[bytes]]  # streamed "Hel", stream still open
    tail: Callable[[], list[bytes]]  # "lo" and the terminal event
    tool_call: Callable[[str, str, dict[str, Any]], list[bytes]]
    call_head: Callable[[], list[bytes]]  # an "echo" tool call streamed, the answer still open
    error_body: Callable[[int, str], bytes]
    env_var: str
    history: Callable[[dict[str, Any]], list[str]]  # the request body's conversation, as labels

    def model(self, server_url: str, **fields: Any) -> Model:
        values: dict[str, Any] = dict(
            id=self.model_id,
            api=self.api,
            provider=self.provider,
            base_url=server_url + self.path,
            input=["text", "image"],
            cost=Cost(1, 1),
            context_window=100_000,
            max_tokens=4096,
        )
        values.update(fields)
        return Model(**values)

    def __str__(self) -> str:
        return self.api


# --------------------------------------------------------------------------- OpenAI chat completions


def _chat_tool(call_id: str, name: str, args: dict[str, Any]) -> list[bytes]:
    return chat_stream(
        chunk({"role": "assistant", "content": None}),
        tool_delta(0, call_id, name, ""),
        tool_delta(0, arguments=json.dumps(args)),
        chunk({}, "tool_calls"),
    )


def _openai_error(status: int, message: str) -> bytes:
    return json.dumps(
        {"error": {"message": message, "type": "server_error", "param": None, "code": str(status)}}
    ).encode()


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def _chat_history(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for m in body["messages"]:
        if m["role"] == "user":
            content = m["content"]
            images = [p for p in content if p.get("type") == "image_url"] if isinstance(content, list) else []
            out.append("user:" + _text_of(content))
            out.extend("image" for _ in images)
        elif m["role"] == "assistant":
            if m.get("content"):
                out.append("assistant:" + _text_of(m["content"]))
            out.extend("call:" + c["function"]["name"] for c in m.get("tool_calls") or [])
        elif m["role"] == "tool":
            out.append("result:" + _text_of(m["content"]))
    return out


COMPLETIONS = Wire(
    api="openai-completions",
    provider="openai",
    model_id="gpt-test",
    path="/v1",
    key_header="authorization",
    text=lambda text: chat_text(text),
    head=lambda: chat_stream(chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}), done=False),
    tail=lambda: chat_stream(chunk({"content": "lo"}), chunk({}, "stop")),
    tool_call=_chat_tool,
    call_head=lambda: chat_stream(
        chunk({"role": "assistant", "content": None}), tool_delta(0, "call_x", "echo", '{"text": "x"}'), done=False
    ),
    error_body=_openai_error,
    env_var="OPENAI_API_KEY",
    history=_chat_history,
)

# --------------------------------------------------------------------------- OpenAI responses


def _responses_head() -> list[bytes]:
    s = ResponsesStream().created()
    s.add(
        "response.output_item.added",
        output_index=0,
        item={"id": "msg_1", "type": "message", "status": "in_progress", "content": [], "role": "assistant"},
    )
    return s.add("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0, delta="Hel").frames()


def _responses_tail() -> list[bytes]:
    s = ResponsesStream()
    s.add("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0, delta="lo")
    s.add(
        "response.output_item.done",
        output_index=0,
        item={
            "id": "msg_1",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hello", "annotations": []}],
        },
    )
    return s.completed().frames()


def _responses_tool(call_id: str, name: str, args: dict[str, Any]) -> list[bytes]:
    s = ResponsesStream().created().call_added(0, "fc_1", call_id, name)
    return s.call_done(0, "fc_1", call_id, name, json.dumps(args)).completed().frames()


def _responses_history(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for item in body["input"]:
        kind = item.get("type")
        if kind == "function_call":
            out.append("call:" + item["name"])
        elif kind == "function_call_output":
            out.append("result:" + _text_of(item["output"]))
        elif item.get("role") in ("user", "assistant"):
            content = item["content"]
            parts = content if isinstance(content, list) else [{"text": content}]
            out.append(item["role"] + ":" + "".join(p.get("text", "") for p in parts))
            out.extend("image" for p in parts if p.get("type") == "input_image")
    return out


RESPONSES = Wire(
    api="openai-responses",
    provider="openai",
    model_id="gpt-test",
    path="/v1",
    key_header="authorization",
    text=lambda text: ResponsesStream().created().message(0, "msg_01", text).completed().frames(),
    head=_responses_head,
    tail=_responses_tail,
    tool_call=_responses_tool,
    call_head=lambda: (
        ResponsesStream()
        .created()
        .call_added(0, "fc_x", "call_x", "echo")
        .call_delta(0, "fc_x", '{"text": "x"}')
        .frames()
    ),
    error_body=_openai_error,
    env_var="OPENAI_API_KEY",
    history=_responses_history,
)

# --------------------------------------------------------------------------- Anthropic Messages


def _anthropic(*events: dict[str, Any]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


_MESSAGE_START = {
    "type": "message_start",
    "message": {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    },
}


def _a_delta(index: int, **delta: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def _a_end(stop_reason: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]


def _anthropic_head() -> list[bytes]:
    return _anthropic(
        _MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        _a_delta(0, type="text_delta", text="Hel"),
    )


def _anthropic_tail() -> list[bytes]:
    return _anthropic(
        _a_delta(0, type="text_delta", text="lo"), {"type": "content_block_stop", "index": 0}, *_a_end("end_turn")
    )


def _anthropic_text(text: str) -> list[bytes]:
    return _anthropic(
        _MESSAGE_START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        _a_delta(0, type="text_delta", text=text),
        {"type": "content_block_stop", "index": 0},
        *_a_end("end_turn"),
    )


def _anthropic_tool(call_id: str, name: str, args: dict[str, Any]) -> list[bytes]:
    return _anthropic(
        _MESSAGE_START,
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": call_id, "name": name, "input": {}},
        },
        _a_delta(0, type="input_json_delta", partial_json=json.dumps(args)),
        {"type": "content_block_stop", "index": 0},
        *_a_end("tool_use"),
    )


def _anthropic_error(status: int, message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": "api_error", "message": message}}).encode()


def _anthropic_history(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for m in body["messages"]:
        content = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
        texts = "".join(b.get("text", "") for b in content if b["type"] == "text")
        if texts or m["role"] == "user" and any(b["type"] in ("text", "image") for b in content):
            out.append(f"{m['role']}:{texts}")
        for b in content:
            if b["type"] == "image":
                out.append("image")
            elif b["type"] == "tool_use":
                out.append("call:" + b["name"])
            elif b["type"] == "tool_result":
                out.append("result:" + _text_of(b.get("content")))
    return out


ANTHROPIC = Wire(
    api="anthropic-messages",
    provider="anthropic",
    model_id="claude-test",
    path="",
    key_header="x-api-key",
    text=_anthropic_text,
    head=_anthropic_head,
    tail=_anthropic_tail,
    tool_call=_anthropic_tool,
    call_head=lambda: _anthropic_tool("call_x", "echo", {"text": "x"})[:3],
    error_body=_anthropic_error,
    env_var="ANTHROPIC_API_KEY",
    history=_anthropic_history,
)

# --------------------------------------------------------------------------- Gemini


def _gemini(*chunks: dict[str, Any]) -> list[bytes]:
    return [f"data: {json.dumps(c)}\r\n\r\n".encode() for c in chunks]


def _g_chunk(*parts: dict[str, Any], finish: str = "") -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "responseId": "resp-1",
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 5, "totalTokenCount": 14},
    }


def _google_error(status: int, message: str) -> bytes:
    return json.dumps({"error": {"code": status, "message": message, "status": "UNAVAILABLE"}}).encode()


def _google_history(body: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for c in body["contents"]:
        role = "user" if c["role"] == "user" else "assistant"
        texts = "".join(p.get("text", "") for p in c["parts"] if "text" in p and not p.get("thought"))
        if texts or any("inlineData" in p for p in c["parts"]):
            out.append(f"{role}:{texts}")
        for p in c["parts"]:
            if "inlineData" in p:
                out.append("image")
            elif "functionCall" in p:
                out.append("call:" + p["functionCall"]["name"])
            elif "functionResponse" in p:
                response = p["functionResponse"]["response"]
                out.append("result:" + str(response.get("output", response.get("error"))))
    return out


GOOGLE = Wire(
    api="google-generative-ai",
    provider="google",
    model_id="gemini-test",
    path="/v1beta",
    key_header="x-goog-api-key",
    text=lambda text: _gemini(_g_chunk({"text": text}, finish="STOP")),
    head=lambda: _gemini(_g_chunk({"text": "Hel"})),
    tail=lambda: _gemini(_g_chunk({"text": "lo"}, finish="STOP")),
    tool_call=lambda call_id, name, args: _gemini(
        _g_chunk({"functionCall": {"id": call_id, "name": name, "args": args}}, finish="STOP")
    ),
    call_head=lambda: _gemini(_g_chunk({"functionCall": {"id": "call_x", "name": "echo", "args": {"text": "x"}}})),
    error_body=_google_error,
    env_var="GEMINI_API_KEY",
    history=_google_history,
)

WIRES = [COMPLETIONS, RESPONSES, ANTHROPIC, GOOGLE]

__all__ = ["ANTHROPIC", "COMPLETIONS", "GOOGLE", "RESPONSES", "WIRES", "Wire", "sse"]
