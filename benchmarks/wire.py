"""The scripted answers of the benchmark, in OpenAI chat-completions streaming format.

Both the server (which sends them) and the benchmarks (which check what arrived) build the
same content from here, so a scenario can verify its result exactly. Every SSE event is one
HTTP chunk, as OpenAI-compatible servers send them.

Scenarios are addressed by the request path ``/<scenario>/<n>/...`` (the rest, e.g.
``/v1/chat/completions``, is ignored):

* ``text/<n>``: one answer of ``n`` text deltas;
* ``args/<n>``: one ``write`` tool call whose JSON arguments (20 characters per delta) arrive in
  ``n`` deltas; a request that already carries a tool result gets a short text answer;
* ``turns/<n>``: while the request carries fewer than ``n`` tool results, a turn of 40 text
  deltas and a ``noop`` tool call whose arguments arrive in 20 deltas; then a final answer;
* ``parallel/<n>``: ``n`` ``sleep`` tool calls in one answer; then a final answer;
* ``echo/<n>``: ``n`` text deltas that carry the marker found in the last user message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Optional

CREATED = 1_700_000_000
MODEL = "bench-model"
ARG_DELTA_CHARS = 20
TURN_TEXT_DELTAS = 40
TURN_ARG_DELTAS = 20
FINAL_TEXT_DELTAS = 40

_WORDS = ("the ", "quick ", "brown ", "fox ", "jumps ", "over ", "a ", "lazy ", "dog, ", "then ")


def text_deltas(n: int, seed: int = 0) -> list[str]:
    """``n`` small text deltas (a word each), the same for the same arguments."""
    return [_WORDS[(i + seed) % len(_WORDS)] for i in range(n)]


def split_text(text: str, n: int) -> list[str]:
    """``text`` cut into exactly ``n`` pieces of near-equal length (none empty if len >= n)."""
    return [text[len(text) * i // n : len(text) * (i + 1) // n] for i in range(n)]


def big_arguments(n_deltas: int) -> dict[str, Any]:
    """Tool-call arguments whose JSON text is about ``ARG_DELTA_CHARS * n_deltas`` characters.

    The content looks like source code: newlines, quotes and backslashes that JSON escapes,
    so deltas cut escape sequences in half.
    """
    target = ARG_DELTA_CHARS * n_deltas
    lines: list[str] = []
    size = 0
    i = 0
    while size < target - 60:
        line = f'def f_{i}(x):\n    return "v\\{i}" * x  # \u00e9t\u00e9\n'
        lines.append(line)
        size += len(json.dumps(line)) - 2
        i += 1
    return {"path": "bench/generated.py", "content": "".join(lines)}


def args_json(n_deltas: int) -> str:
    return json.dumps(big_arguments(n_deltas))


def turn_arguments(turn: int) -> dict[str, Any]:
    return {"turn": turn, "note": f"step {turn} of the benchmark, nothing to do here"}


def turn_text(turn: int) -> str:
    return "".join(text_deltas(TURN_TEXT_DELTAS, seed=turn))


def final_text() -> str:
    return "".join(text_deltas(FINAL_TEXT_DELTAS, seed=7))


def echo_deltas(n: int, marker: str) -> list[str]:
    deltas = text_deltas(max(n, 2))
    deltas[1] = f"[{marker}] "
    return deltas


def sleep_arguments(index: int) -> dict[str, Any]:
    return {"index": index}


# --------------------------------------------------------------------------- encoding


def _chunk(delta: dict[str, Any], finish: Optional[str] = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _usage_chunk() -> dict[str, Any]:
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150},
    }


def _frame(obj: Any) -> bytes:
    data = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
    return f"data: {data}\n\n".encode()


def http_chunk(frame: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(frame), frame)


HTTP_END = b"0\r\n\r\n"


def encode(frames: Sequence[bytes]) -> bytes:
    """The chunked HTTP body of ``frames``, end marker included."""
    return b"".join(http_chunk(f) for f in frames) + HTTP_END


def text_frames(deltas: Sequence[str]) -> list[bytes]:
    frames = [_frame(_chunk({"role": "assistant", "content": ""}))]
    frames.extend(_frame(_chunk({"content": d})) for d in deltas)
    frames.append(_frame(_chunk({}, "stop")))
    frames.append(_frame(_usage_chunk()))
    frames.append(_frame("[DONE]"))
    return frames


def tool_frames(text: Sequence[str], calls: Sequence[tuple[str, str, Sequence[str]]]) -> list[bytes]:
    """Text deltas, then each call ``(id, name, argument deltas)``; finish ``tool_calls``."""
    frames = [_frame(_chunk({"role": "assistant", "content": ""}))]
    frames.extend(_frame(_chunk({"content": d})) for d in text)
    for index, (call_id, name, arg_deltas) in enumerate(calls):
        head = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        frames.append(_frame(_chunk({"tool_calls": [head]})))
        for piece in arg_deltas:
            frames.append(_frame(_chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})))
    frames.append(_frame(_chunk({}, "tool_calls")))
    frames.append(_frame(_usage_chunk()))
    frames.append(_frame("[DONE]"))
    return frames


# --------------------------------------------------------------------------- answers


def count_tool_results(request: dict[str, Any]) -> int:
    return sum(1 for m in request.get("messages") or () if m.get("role") == "tool")


def last_user_text(request: dict[str, Any]) -> str:
    for message in reversed(request.get("messages") or ()):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        for part in content or ():
            if isinstance(part, dict) and part.get("type") == "text":
                return str(part.get("text", ""))
    return ""


def answer_key(scenario: str, n: int, request: dict[str, Any]) -> tuple[Any, ...]:
    """What identifies the answer to ``request`` (answers with the same key are identical)."""
    if scenario == "echo":
        return (scenario, n, last_user_text(request))
    if scenario in ("args", "turns", "parallel"):
        return (scenario, n, count_tool_results(request))
    return (scenario, n)


def answer(key: tuple[Any, ...]) -> bytes:
    """The chunked HTTP body answering a request with this :func:`answer_key`."""
    scenario, n = key[0], key[1]
    if scenario == "text":
        return encode(text_frames(text_deltas(n)))
    if scenario == "echo":
        return encode(text_frames(echo_deltas(n, key[2])))
    results = key[2]
    if scenario == "args":
        if results:
            return encode(text_frames(text_deltas(FINAL_TEXT_DELTAS, seed=7)))
        return encode(tool_frames([], [("call_args", "write", split_text(args_json(n), n))]))
    if scenario == "turns":
        if results >= n:
            return encode(text_frames(text_deltas(FINAL_TEXT_DELTAS, seed=7)))
        turn = results
        arg_text = json.dumps(turn_arguments(turn))
        calls = [(f"call_turn_{turn}", "noop", split_text(arg_text, TURN_ARG_DELTAS))]
        return encode(tool_frames(text_deltas(TURN_TEXT_DELTAS, seed=turn), calls))
    if scenario == "parallel":
        if results:
            return encode(text_frames(text_deltas(FINAL_TEXT_DELTAS, seed=7)))
        calls = [(f"call_sleep_{i}", "sleep", [json.dumps(sleep_arguments(i))]) for i in range(n)]
        return encode(tool_frames([], calls))
    raise ValueError(f"unknown scenario {scenario!r}")
