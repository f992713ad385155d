"""An MCP server built on the official Python SDK (``mcp`` 2.x), for piagent's MCP tests.

    python sdk_server.py stdio
    python sdk_server.py http PORT [resumable]

It speaks both eras (the SDK's server is dual-era). ``TOOLS_TTL_MS`` in the environment sets
the ``ttlMs`` of ``tools/list`` results. ``resumable`` keeps every SSE event in memory (so a
handshake-era client can resume a broken stream with ``Last-Event-ID``) with a 300 ms ``retry``.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import anyio
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, Elicit, Image, ListRoots, MCPServer, Resolve, Sample
from mcp.server.streamable_http import EventMessage, EventStore
from mcp_types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent
from pydantic import BaseModel, Field

ttl = int(os.environ.get("TOOLS_TTL_MS", "0"))
server = MCPServer(
    "piagent-test-sdk-server", version="1.0", log_level="WARNING", cache_hints={"tools/list": CacheHint(ttl_ms=ttl)}
)
state = {"cancelled": 0, "started": 0}
TINY_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


class Sum(BaseModel):
    total: int


@server.tool()
def add(a: int, b: int) -> Sum:
    """Add two integers."""
    return Sum(total=a + b)


@server.tool()
async def count(steps: int, ctx: Context) -> str:
    """Count to ``steps``, reporting progress at each step."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"counted to {steps}"


@server.tool()
async def wait_forever(ctx: Context) -> str:
    """Never returns on its own; counts the calls that were cancelled."""
    state["started"] += 1
    try:
        await anyio.sleep_forever()
    finally:
        state["cancelled"] += 1
    return "unreachable"


@server.tool()
def calls_seen() -> str:
    """How many wait_forever calls started and how many were cancelled."""
    return f"started={state['started']} cancelled={state['cancelled']}"


@server.tool()
def tiny_image() -> Image:
    """A 1x1 PNG."""
    return Image(data=TINY_PNG, format="png")


@server.tool()
def fail(reason: str) -> str:
    """Always fails with ``reason``."""
    raise ValueError(reason)


class Person(BaseModel):
    name: str
    age: int = 30


def ask_person() -> Elicit[Person]:
    return Elicit("Who are you?", Person)


@server.tool()
def greet(person: Annotated[Person, Resolve(ask_person)]) -> str:
    """Greet the user, asking their name (an elicitation)."""
    return f"hello {person.name}, aged {person.age}"


def ask_model() -> Sample:
    return Sample([SamplingMessage(role="user", content=TextContent(type="text", text="a colour?"))], max_tokens=10)


@server.tool()
def colour(answer: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """Ask the client's model for a colour (a sampling request)."""
    return f"the model said {answer.content.text}"  # type: ignore[union-attr]


def ask_roots() -> ListRoots:
    return ListRoots()


@server.tool()
def roots(listed: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
    """The client's roots."""
    return " ".join(str(r.uri) for r in listed.roots)


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool called ``name`` and announce the change."""

    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description=f"the added tool {name}")
    if ctx.protocol_version == "2026-07-28":
        await ctx.notify_tools_changed()  # to subscriptions/listen streams
    else:
        await ctx.session.send_tool_list_changed()  # the handshake era's notification
    return f"added {name}"


@server.tool()
def add_tool_quietly(name: str) -> str:
    """Add a tool called ``name`` without announcing it."""
    server.add_tool(lambda: name, name=name, description="added quietly")
    return f"added {name}"


@server.tool()
async def note(text: str, ctx: Context) -> str:
    """Send ``text`` to the client as a log message."""
    await ctx.info(text)
    return "noted"


@server.tool()
def authorization(ctx: Context) -> str:
    """The Authorization header of this request (HTTP only)."""
    return (ctx.headers or {}).get("authorization", "none")


@server.tool()
async def interrupted(ctx: Context) -> str:
    """Closes its own response stream half-way (the client must resume it), then answers."""
    await ctx.report_progress(1, 2, "before the break")
    await ctx.close_sse_stream()
    await anyio.sleep(0.5)
    await ctx.report_progress(2, 2, "after the break")
    return "answered after the break"


Region = Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]
Priority = Annotated[int, Field(json_schema_extra={"x-mcp-header": "Priority"})]
Verbose = Annotated[bool, Field(json_schema_extra={"x-mcp-header": "Verbose"})]


@server.tool()
def route(region: Region, priority: Priority, verbose: Verbose = False, note: str = "") -> str:
    """Arguments mirrored in Mcp-Param-* headers (x-mcp-header), which the SDK checks against the body."""
    return f"routed to {region!r} at {priority}, verbose={verbose}"


@server.tool()
def add_routed_tool_quietly(name: str) -> str:
    """Add a tool called ``name`` with a Region header parameter, without announcing it."""

    def routed(region: Region) -> str:
        return f"{name} in {region}"

    server.add_tool(routed, name=name, description="added quietly, with a Region header")
    return f"added {name}"


class MemoryEventStore(EventStore):
    """Every event of every stream, in memory (the SDK ships the interface only)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, object]] = []

    async def store_event(self, stream_id, message):  # type: ignore[no-untyped-def]
        event_id = str(len(self.events) + 1)
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id, send_callback):  # type: ignore[no-untyped-def]
        stream = next((s for i, s, _ in self.events if i == last_event_id), None)
        if stream is None:
            return None
        after = False
        for event_id, stream_id, message in self.events:
            if after and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        resumable = sys.argv[3:] == ["resumable"]
        server.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            event_store=MemoryEventStore() if resumable else None,
            retry_interval=300 if resumable else None,
        )
