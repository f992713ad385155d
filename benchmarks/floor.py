"""The floor: the least a Python client must do to use the same streams.

A bare loop over ``requests`` (``stream=True``): read the chunks, split SSE lines, ``json.loads``
every ``data:`` payload, collect text and tool-call argument pieces. No events, no listeners,
no partial messages. Every piagent figure is compared with this loop run in the same process
on the same bytes.

Where piagent's listener reads the partial tool-call arguments after every delta (the args
scenario), the floor can be asked to do that work too (``partial_arguments=True``): each
call's argument text is fed to an incremental JSON parser and the value so far is read after
every delta. The parser is piagent's own (:class:`piagent.ai.json_stream.IncrementalJsonParser`,
linear in the text): no bare loop can show partial arguments without one, and re-parsing the
text from the start at every delta would be quadratic, so the comparison then measures what
piagent adds around that parse; the bare floor stays beside it in the table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import requests
import requests.adapters

from piagent.ai.json_stream import IncrementalJsonParser

_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream", "Authorization": "Bearer bench-key"}


@dataclass
class FloorReply:
    text: str = ""
    text_deltas: int = 0
    tool_deltas: int = 0
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"id", "name", "arguments": str}
    finish_reason: Optional[str] = None


def new_session(pool_maxsize: int = 32) -> requests.Session:
    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=pool_maxsize, max_retries=0)
    session.mount("http://", adapter)
    return session


def call(
    session: requests.Session,
    base_url: str,
    messages: list[dict[str, Any]],
    tools: Any = None,
    partial_arguments: bool = False,
) -> FloorReply:
    """POST one streaming chat completion and read it to the end; with ``partial_arguments``,
    read each tool call's arguments parsed so far after every argument delta."""
    payload: dict[str, Any] = {"model": "bench-model", "messages": messages, "stream": True}
    if tools:
        payload["tools"] = tools
    body = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    reply = FloorReply()
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    with session.post(base_url + "/chat/completions", data=body, headers=_HEADERS, stream=True) as response:
        response.raise_for_status()
        buffer = b""
        for chunk in response.iter_content(chunk_size=None):
            lines = (buffer + chunk).split(b"\n")
            buffer = lines.pop()
            for line in lines:
                if not line.startswith(b"data: ") or line == b"data: [DONE]":
                    continue
                choices = json.loads(line[6:])["choices"]
                if not choices:
                    continue
                choice = choices[0]
                delta = choice["delta"]
                content = delta.get("content")
                if content:
                    text.append(content)
                    reply.text_deltas += 1
                for piece in delta.get("tool_calls") or ():
                    slot = calls.get(piece["index"])
                    if slot is None:
                        slot = calls[piece["index"]] = {"id": "", "name": "", "arguments": [], "size": 0}
                        if partial_arguments:
                            slot["parser"] = IncrementalJsonParser()
                    if piece.get("id"):
                        slot["id"] = piece["id"]
                    function = piece.get("function") or {}
                    if function.get("name"):
                        slot["name"] = function["name"]
                    if function.get("arguments"):
                        slot["arguments"].append(function["arguments"])
                        reply.tool_deltas += 1
                        if partial_arguments:  # what piagent's listener does: read the partial value
                            slot["parser"].feed(function["arguments"])
                            partial = slot["parser"].value()
                            slot["size"] = len(partial.get("content", "")) if isinstance(partial, dict) else 0
                if choice.get("finish_reason"):
                    reply.finish_reason = choice["finish_reason"]
    reply.text = "".join(text)
    for index in sorted(calls):
        slot = calls[index]
        reply.tool_calls.append({"id": slot["id"], "name": slot["name"], "arguments": "".join(slot["arguments"])})
    return reply


def run_tools(
    session: requests.Session, base_url: str, prompt: str, tools: Any, tool: Optional[Callable[[str], None]] = None
) -> list[FloorReply]:
    """The agent loop, bare: post, parse, "run" each (no-op) tool, post again until no tool call;
    ``tool``, if given, is called with each call's id where the tool would run."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    replies: list[FloorReply] = []
    while True:
        reply = call(session, base_url, messages, tools)
        replies.append(reply)
        assistant: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.tool_calls:
            assistant["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in reply.tool_calls
            ]
        messages.append(assistant)
        if not reply.tool_calls:
            return replies
        for c in reply.tool_calls:
            json.loads(c["arguments"])  # the arguments a tool would receive
            if tool is not None:
                tool(c["id"])
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": "ok"})
