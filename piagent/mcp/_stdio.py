"""The stdio transport: a server subprocess speaking newline-delimited JSON-RPC.

No hand-off on a call's path: the calling thread writes its request to stdin itself (the pipe
is non-blocking; what the pipe cannot take at once is queued for a writer thread, so a server
that stops reading blocks no caller: its requests end with their timeout or abort, and once
``MAX_PENDING_INPUT_BYTES`` wait unread the connection ends with an error), and then reads
stdout itself while it waits for its answer, as the *leader*: it routes every message it
reads, its own answer and others' alike, and stops at its answer, timeout or abort. The
latest caller leads (the one it took over from waits for its answer); while none does, a
reader thread reads stdout (server requests and notifications between calls). Either reads only what is
there (non-blocking), one message routed at a time, so they never read past each other.
A third thread forwards stderr to logging (logger ``piagent.mcp.server``, lines cut at
``MAX_STDERR_LINE_BYTES``). Closing follows the spec's order: close stdin, wait
``SHUTDOWN_GRACE`` seconds, SIGTERM, wait again, SIGKILL; the process is always reaped and
the threads joined.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import subprocess
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from ._connection import MAX_MESSAGE_BYTES, passed, time_left, wait_until
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
READ_SIZE = 65_536
"""Bytes of stdout read at once."""
READER_IDLE = 0.05
"""Seconds after a call's end before the reader thread reads stdout again (if no other call came):
while calls follow each other, it stays out of their way (waking it costs a call more than the rest)."""
_READABLE = select.POLLIN | select.POLLHUP | select.POLLERR | select.POLLNVAL


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
        self._input = threading.Condition()
        self._pending: deque[tuple[bytes, int]] = deque()  # (what is left to write, its message's size), in order
        self._pending_bytes = 0
        self._writing = False  # the stdin thread writes a message it took from _pending
        self._input_error: Optional[MCPConnectionError] = None  # set once stdin is gone
        self._turn = threading.Condition()  # who reads stdout: the fields below
        self._leader: Optional[threading.Thread] = None  # the caller reading stdout, if any
        self._leader_wake: Optional[tuple[int, int]] = None  # its wake pipe: a take-over, abort or close
        self._spare_wakes: list[tuple[int, int]] = []  # wake pipes of callers that stopped leading
        self._in_lead = 0  # callers in _lead (a caller taken over from may not have noticed yet)
        self._polling = False  # the reader thread waits for stdout (a new leader wakes it)
        self._resume_at = 0.0  # monotonic: when the reader thread may read again (READER_IDLE)
        self._waiting = 0  # callers in wait() that may lead
        self._ended = False  # stdout ended (or reading it failed: _end_error)
        self._end_error: Optional[MCPError] = None
        self._fds_closed = False
        self._read_lock = threading.RLock()  # held while reading stdout and routing what was read
        self._read_waiters = 0  # threads waiting for _read_lock on _turn (see _take_read)
        self._buffer = bytearray()  # stdout read but not yet routed (part of a line)
        self._scanned = 0  # bytes of _buffer known to hold no newline

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
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin = self.process.stdin.fileno()
        self._stdout = self.process.stdout.fileno()
        os.set_blocking(self._stdin, False)  # a full pipe never blocks a caller: the rest is queued
        os.set_blocking(self._stdout, False)  # reads take what is there: leader and reader never block on it
        self._wake_reader = _wake_pipe()  # a new leader (or close) wakes the reader thread's poll
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
        data = (json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
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
                rest = self._write_now(data) if not self._pending and not self._writing else data
                if not rest:
                    return
                self._pending.append((rest, len(data)))  # a message counts whole until written whole
                self._pending_bytes += len(data)
                self._input.notify()
                return
        self._sink.broken(unread)  # the next call starts the server again
        raise unread

    def _write_now(self, data: bytes) -> bytes:
        """Write what the pipe takes at once (called holding ``_input``); returns the rest."""
        try:
            written = os.write(self._stdin, data)
        except BlockingIOError:
            return data
        except (OSError, ValueError) as exc:  # the server is gone: the stdout reader says how
            self._input_error = MCPConnectionError(f"MCP server {self.describe()!r} is gone: {exc}{self._tail()}")
            return b""
        return data[written:]

    def _write_stdin(self) -> None:
        """Write what :meth:`send` queued until closing; then close stdin (the server sees EOF)."""
        assert self.process is not None and self.process.stdin is not None
        stdin = self.process.stdin
        writable = select.poll()
        writable.register(self._stdin, select.POLLOUT)
        try:
            while True:
                with self._input:
                    while not self._pending and not self._closing:
                        self._input.wait()
                    if not self._pending:
                        break
                    data, size = self._pending.popleft()
                    self._writing = True
                view = memoryview(data)
                while view:  # the raw fd: stdin's buffer (and its lock) is never used
                    try:
                        view = view[os.write(self._stdin, view) :]
                    except BlockingIOError:
                        writable.poll()  # the server reads slowly, or not at all (close ends that)
                with self._input:
                    self._pending_bytes -= size
                    self._writing = False
        except (OSError, ValueError) as exc:
            with self._input:
                self._input_error = MCPConnectionError(f"MCP server {self.describe()!r} is gone: {exc}{self._tail()}")
        finally:
            with self._input:
                if self._input_error is None:
                    self._input_error = MCPConnectionError(f"MCP server {self.describe()!r}: its stdin is closed")
                self._pending.clear()
            with contextlib.suppress(OSError):
                stdin.close()

    def wait(self, done: threading.Event, deadline: Optional[float], lead: bool = True) -> bool:
        """Whether ``done`` is set by ``deadline``; read stdout meanwhile as the leader, unless
        ``lead`` is False (a request held open: it would lead for good)."""
        with self._turn:
            lead = lead and not self._ended and not self._fds_closed
            if lead:
                self._waiting += 1
        if not lead:
            return wait_until(done, deadline)
        try:
            return self._wait_leading(done, deadline)
        finally:
            with self._turn:
                self._waiting -= 1

    def _wait_leading(self, done: threading.Event, deadline: Optional[float]) -> bool:
        me = threading.current_thread()
        with self._turn:
            wake = self._spare_wakes.pop() if self._spare_wakes else _wake_pipe()
            previous, previous_wake = self._leader, self._leader_wake
            self._leader, self._leader_wake = me, wake
            self._in_lead += 1
            if previous is None and self._polling:
                _wake(self._wake_reader[1])
            elif previous is not None and previous is not me and previous_wake is not None:
                _wake(previous_wake[1])  # it steps down and waits for its answer (see _lead)
                if self._read_waiters:
                    self._turn.notify_all()  # (or in _take_read)
        try:
            led = self._lead(done, deadline, wake[0])
        finally:
            with self._turn:
                if self._leader_wake is wake:  # else a later caller took over
                    if previous is me:  # a call made by a callback this thread ran: it leads on
                        self._leader_wake = previous_wake
                    else:
                        self._leader = self._leader_wake = None
                        if self._waiting > 1:  # callers it took over from wait: read for them at once
                            self._resume_at = 0.0
                            self._turn.notify_all()
                        else:
                            self._resume_at = time.monotonic() + READER_IDLE
                self._in_lead -= 1
                self._spare_wakes.append(wake)  # a wake left in it only makes its next poll return once
                self._close_fds_if_unused()
        return wait_until(done, deadline) if led is None else led

    def _lead(self, done: threading.Event, deadline: Optional[float], wake: int) -> Optional[bool]:
        """Read and route stdout until ``done`` (True) or ``deadline`` (False); None once stdout
        ended or a later caller took over (this one then waits for its answer as any other).

        The latest caller leads, so a request held open (a subscription, a long call) never
        keeps the calls made beside it waiting for a hand-off."""
        me = threading.current_thread()
        poller = select.poll()
        poller.register(self._stdout, _READABLE)
        poller.register(wake, select.POLLIN)
        while not done.is_set():
            if passed(deadline):
                return False
            left = time_left(deadline)
            ready = poller.poll(None if left is None else left * 1000.0)
            if self._leader is not me or self._ended:
                return None
            for fd, _ in ready:
                if fd == self._stdout:
                    self._read_available(done, deadline)
                else:
                    _drain(fd)
        return True

    def cancel(self, request_id: Any) -> None:
        """Wake the leader (its request may be the one aborted); the connection sends ``notifications/cancelled``."""
        with self._turn:
            if self._leader_wake is not None and self._leader is not threading.current_thread():
                _wake(self._leader_wake[1])
            if self._read_waiters:  # a leader waiting to read (see _take_read) may be the one aborted
                self._turn.notify_all()

    def _read_available(self, done: Optional[threading.Event] = None, deadline: Optional[float] = None) -> None:
        """Read what stdout holds now and route every complete line; end reading on EOF or a bound.

        A leader passes its ``done`` and ``deadline``: it never waits past them (or past losing the
        lead) for another thread that is routing a message (a progress callback may block)."""
        if not self._read_lock.acquire(blocking=False) and not self._take_read(done, deadline):
            return
        try:
            if self._ended:
                return
            try:
                data = os.read(self._stdout, READ_SIZE)
            except BlockingIOError:
                return  # the other reader took it
            except (OSError, ValueError):
                data = b""
            if not data:
                self._end(None)
                return
            buffer = self._buffer
            buffer += data
            try:
                while True:
                    newline = buffer.find(b"\n", self._scanned)
                    if newline < 0:
                        break
                    if newline > MAX_LINE_BYTES:
                        break
                    line = bytes(buffer[:newline]).strip()
                    del buffer[: newline + 1]
                    self._scanned = 0
                    if line:
                        self._sink.receive(line)
            except Exception as exc:  # never a silent end: the connection is marked broken
                logger.exception("the MCP stdout reader failed")
                self._end(MCPConnectionError(f"reading from MCP server {self.describe()!r} failed: {exc!r}"))
                return
            self._scanned = len(buffer)
            if len(buffer) > MAX_LINE_BYTES:
                self._end(MCPConnectionError(f"MCP server sent a line over {MAX_LINE_BYTES} bytes"))
        finally:
            self._read_lock.release()
            if self._read_waiters:
                with self._turn:
                    self._turn.notify_all()

    def _take_read(self, done: Optional[threading.Event], deadline: Optional[float]) -> bool:
        """Wait until ``_read_lock`` is ours (True) or, for a leader, until its ``done``, its
        ``deadline`` or a take-over (False); the reader thread (no ``done``) waits until stdout ends."""
        me = threading.current_thread()
        with self._turn:
            self._read_waiters += 1
            try:
                while not self._read_lock.acquire(blocking=False):
                    if self._ended:
                        return False
                    if done is not None and (done.is_set() or passed(deadline) or self._leader is not me):
                        return False
                    self._turn.wait(time_left(deadline))
                return True
            finally:
                self._read_waiters -= 1

    def _end(self, error: Optional[MCPError]) -> None:
        """Stdout ended (``error``: why, when not EOF): the reader thread ends the connection."""
        self._buffer.clear()
        with self._turn:
            self._ended = True
            self._end_error = error
            self._turn.notify_all()
            if self._polling and not self._fds_closed:
                _wake(self._wake_reader[1])

    def _read_stdout(self) -> None:
        """Read stdout while no caller leads; once it ended, end the connection."""
        assert self.process is not None
        poller = select.poll()
        poller.register(self._stdout, _READABLE)
        poller.register(self._wake_reader[0], select.POLLIN)
        try:
            while True:
                with self._turn:
                    while not self._ended and (self._leader is not None or time.monotonic() < self._resume_at):
                        self._turn.wait(READER_IDLE)
                    if self._ended:
                        break
                    self._polling = True
                try:
                    ready = poller.poll()
                finally:
                    with self._turn:
                        self._polling = False
                        lead = self._leader
                for fd, _ in ready:
                    if fd != self._stdout:
                        _drain(fd)
                    elif lead is None:
                        self._read_available()
        except Exception as exc:  # never a silent end: the connection is marked broken below
            logger.exception("the MCP stdout reader failed")
            self._end(MCPConnectionError(f"reading from MCP server {self.describe()!r} failed: {exc!r}"))
        error = self._end_error
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
            self._closing = True  # the stdin thread writes what is queued, then closes stdin
            self._input.notify()
        with self._turn:
            if self._leader_wake is not None:
                _wake(self._leader_wake[1])
            self._turn.notify_all()  # a leader in _take_read: its call was ended by the connection
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
        if process.stderr is not None:
            with contextlib.suppress(OSError):
                process.stderr.close()
        with self._turn:
            self._close_fds_if_unused()

    def _close_fds_if_unused(self) -> None:
        """Close stdout and the wake pipes once closing and no caller is in :meth:`_lead` (called
        holding ``_turn``; a caller that was in it closes its pipe when it leaves)."""
        if not self._closing or self._in_lead:
            return
        fds = [fd for pipe in self._spare_wakes for fd in pipe]
        self._spare_wakes.clear()
        if not self._fds_closed:
            self._fds_closed = True
            fds.extend(self._wake_reader)
            assert self.process is not None and self.process.stdout is not None
            with contextlib.suppress(OSError):
                self.process.stdout.close()
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


def _wake_pipe() -> tuple[int, int]:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    return read_end, write_end


def _wake(fd: int) -> None:
    with contextlib.suppress(OSError):  # full (a wake is pending anyway) or closed
        os.write(fd, b"\0")


def _drain(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.read(fd, 512)


INHERITED_ENV = ("HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "SHELL", "SYSTEMROOT", "TERM", "TMPDIR", "USER")
"""The only variables a server inherits (API keys and other secrets stay here); ``env`` adds more."""


def _inherited_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k in INHERITED_ENV}
