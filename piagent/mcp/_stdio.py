"""The stdio transport: a server subprocess speaking newline-delimited JSON-RPC.

One reader thread parses stdout line by line; another forwards stderr to logging (logger
``piagent.mcp.server``). Closing follows the spec's order: close stdin, wait
``SHUTDOWN_GRACE`` seconds, SIGTERM, wait again, SIGKILL; the process is always reaped and
both threads joined.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ._errors import MCPConnectionError, MCPError

__all__ = ["StdioTransport"]

logger = logging.getLogger("piagent.mcp")
server_logger = logging.getLogger("piagent.mcp.server")

SHUTDOWN_GRACE = 2.0
"""Seconds the server gets to exit after stdin closes (and again after SIGTERM)."""
MAX_LINE_BYTES = 64 * 1024 * 1024
"""A longer stdout line is refused (the connection ends with an error)."""


class StdioTransport:
    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
    ) -> None:
        self.command = command
        self.args = list(args)
        self.env = env
        self.cwd = cwd
        self.process: Optional[subprocess.Popen] = None
        self._write_lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._stderr_tail: deque[str] = deque(maxlen=5)
        self._closing = False

    def describe(self) -> str:
        return " ".join([self.command, *self.args])

    def open(self, sink: Any) -> None:
        """Start the server; its messages go to ``sink`` (a :class:`~piagent.mcp._connection.Connection`)."""
        environment = _inherited_env()
        environment.update(self.env or {})
        try:
            self.process = subprocess.Popen(
                [self.command, *self.args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self.cwd,
                env=environment,
                start_new_session=True,  # the terminal's Ctrl-C is ours to handle, not the server's
            )
        except OSError as exc:
            raise MCPConnectionError(f"cannot start MCP server {self.describe()!r}: {exc}") from exc
        self._sink = sink
        for target, name in ((self._read_stdout, "mcp-stdout"), (self._read_stderr, "mcp-stderr")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def send(self, message: dict, headers: Optional[dict] = None, request_id: Any = None) -> None:
        process = self.process
        data = (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
        try:
            with self._write_lock:
                assert process is not None and process.stdin is not None
                process.stdin.write(data)
                process.stdin.flush()
        except (OSError, ValueError) as exc:
            raise MCPConnectionError(f"MCP server {self.describe()!r} is gone: {exc}{self._tail()}") from exc

    def cancel(self, request_id: Any) -> None:
        """Nothing to close on stdio: the connection sends ``notifications/cancelled``."""

    def _read_stdout(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        stdout = self.process.stdout
        error: Optional[MCPError] = None
        try:
            while True:
                line = stdout.readline(MAX_LINE_BYTES + 1)
                if not line:
                    break
                if len(line) > MAX_LINE_BYTES:
                    error = MCPConnectionError(f"MCP server sent a line over {MAX_LINE_BYTES} bytes")
                    break
                text = line.strip()
                if not text:
                    continue
                try:
                    message = json.loads(text)
                except ValueError:
                    self._sink.garbage(text.decode("utf-8", "replace"))
                    continue
                self._sink.deliver(message)
        except (OSError, ValueError):
            pass
        if error is None:
            code = self.process.poll()
            if code is None and not self._closing:
                try:
                    code = self.process.wait(timeout=SHUTDOWN_GRACE)
                except subprocess.TimeoutExpired:
                    code = None
            status = "closed its stdout" if code is None else f"exited with status {code}"
            error = MCPConnectionError(f"MCP server {self.describe()!r} {status}{self._tail()}")
        self._sink.broken(error)

    def _read_stderr(self) -> None:
        assert self.process is not None and self.process.stderr is not None
        try:
            for raw in iter(self.process.stderr.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    self._stderr_tail.append(line)
                    server_logger.info("%s", line)
        except (OSError, ValueError):
            pass

    def _tail(self) -> str:
        return ("; its stderr ended with: " + " | ".join(self._stderr_tail)) if self._stderr_tail else ""

    def close(self) -> None:
        """Close stdin, wait, SIGTERM, wait, SIGKILL; reap the process and join the threads."""
        process = self.process
        if process is None:
            return
        self._closing = True
        try:
            if process.stdin is not None:
                process.stdin.close()
        except OSError:
            pass
        for stop in (None, process.terminate, process.kill):
            if stop is not None:
                with contextlib.suppress(OSError):
                    stop()
            try:
                process.wait(timeout=SHUTDOWN_GRACE)
                break
            except subprocess.TimeoutExpired:
                continue
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=SHUTDOWN_GRACE)
        for stream in (process.stdout, process.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


INHERITED_ENV = ("HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "SHELL", "SYSTEMROOT", "TERM", "TMPDIR", "USER")
"""The only variables a server inherits (API keys and other secrets stay here); ``env`` adds more."""


def _inherited_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in INHERITED_ENV}
