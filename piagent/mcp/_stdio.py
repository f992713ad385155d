"""The stdio transport: a server subprocess speaking newline-delimited JSON-RPC.

One reader thread parses stdout line by line; another forwards stderr to logging (logger
``piagent.mcp.server``, lines cut at ``MAX_STDERR_LINE_BYTES``); a third writes to stdin
what :meth:`StdioTransport.send` queues, so a server that stops reading blocks no caller: its
requests end with their timeout or abort, and once ``MAX_PENDING_INPUT_BYTES`` wait unread
the connection ends with an error. Closing follows the spec's order: close stdin, wait
``SHUTDOWN_GRACE`` seconds, SIGTERM, wait again, SIGKILL; the process is always reaped and
the threads joined.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import subprocess
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ._connection import MAX_MESSAGE_BYTES
from ._errors import MCPConnectionError, MCPError

__all__ = ["StdioTransport"]

logger = logging.getLogger("piagent.mcp")
server_logger = logging.getLogger("piagent.mcp.server")

SHUTDOWN_GRACE = 2.0
"""Seconds the server gets to exit after stdin closes (and again after SIGTERM)."""
MAX_LINE_BYTES = MAX_MESSAGE_BYTES
"""A longer stdout line is refused (the connection ends with an error)."""
MAX_STDERR_LINE_BYTES = 8192
"""A longer stderr line is logged cut to this size (the rest of it is read and dropped)."""
MAX_PENDING_INPUT_BYTES = MAX_MESSAGE_BYTES
"""Bytes queued for a server that does not read its stdin before the connection ends with an error
(a message sent while nothing waits or is being written is queued whatever its size)."""

_compact_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode  # one encoder for every line


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
        self._threads: list[threading.Thread] = []
        self._stderr_tail: deque[str] = deque(maxlen=5)
        self._closing = False
        self._input = threading.Lock()  # guards _pending_bytes and _input_error; messages are queued under it
        self._queue: queue.SimpleQueue[Optional[bytes]] = queue.SimpleQueue()  # for the stdin thread; None: close
        self._pending_bytes = 0  # queued and not yet written
        self._input_error: Optional[MCPConnectionError] = None  # set once stdin is gone

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
        threads = (
            (self._read_stdout, "mcp-stdout"),
            (self._read_stderr, "mcp-stderr"),
            (self._write_stdin, "mcp-stdin"),
        )
        for target, name in threads:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def send(
        self,
        message: dict,
        headers: Optional[dict] = None,
        request_id: Any = None,
        deadline: Optional[float] = None,
    ) -> None:
        """Queue ``message`` for the server's stdin; never waits for the server to read it."""
        data = (_compact_json(message) + "\n").encode("utf-8")
        with self._input:
            if self._input_error is not None:
                raise self._input_error
            if self._pending_bytes and self._pending_bytes + len(data) > MAX_PENDING_INPUT_BYTES:  # one may be larger
                unread = MCPConnectionError(
                    f"MCP server {self.describe()!r} does not read its input "
                    f"({self._pending_bytes:,} bytes wait, at most {MAX_PENDING_INPUT_BYTES:,})"
                )
                self._input_error = unread
            else:
                self._pending_bytes += len(data)
                self._queue.put(data)
                return
        self._sink.broken(unread)  # the next call starts the server again
        raise unread

    def _write_stdin(self) -> None:
        """Write what :meth:`send` queued until closing; then close stdin (the server sees EOF)."""
        assert self.process is not None and self.process.stdin is not None
        stdin = self.process.stdin
        try:
            while True:
                data = self._queue.get()
                if data is None:
                    break
                view = memoryview(data)
                while view:  # the raw fd: stdin's buffer (and its lock) is never used
                    view = view[os.write(stdin.fileno(), view) :]
                with self._input:
                    self._pending_bytes -= len(data)
        except (OSError, ValueError) as exc:
            with self._input:
                self._input_error = MCPConnectionError(f"MCP server {self.describe()!r} is gone: {exc}{self._tail()}")
        finally:
            with self._input:
                if self._input_error is None:
                    self._input_error = MCPConnectionError(f"MCP server {self.describe()!r}: its stdin is closed")
                while not self._queue.empty():  # never written: dropped
                    self._queue.get_nowait()
                self._pending_bytes = 0
            with contextlib.suppress(OSError):
                stdin.close()

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
                if text:
                    self._sink.receive(text)
        except (OSError, ValueError):
            pass
        except Exception as exc:  # never a silent end: the connection is marked broken below
            logger.exception("the MCP stdout reader failed")
            error = MCPConnectionError(f"reading from MCP server {self.describe()!r} failed: {exc!r}")
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
        stderr = self.process.stderr
        try:
            while True:
                raw = stderr.readline(MAX_STDERR_LINE_BYTES)
                if not raw:
                    break
                cut = 0
                ended = raw.endswith(b"\n")
                while not ended:  # the rest of a long line: read in pieces and dropped
                    more = stderr.readline(MAX_STDERR_LINE_BYTES)
                    if not more:
                        break
                    ended = more.endswith(b"\n")
                    cut += len(more) - ended
                line = raw.decode("utf-8", "replace").rstrip() + (f" [{cut:,} more bytes cut]" if cut else "")
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
        with self._input:
            self._closing = True
            self._queue.put(None)  # the stdin thread writes what is queued, then closes stdin
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
