"""A real HTTP server on 127.0.0.1 that replays scripted responses, for provider tests.

    with ScriptedServer() as server:
        server.reply(sse_body(...))                 # one scripted answer per request, in order
        ... point a provider at server.url ...
        server.requests[0].json                     # what the client sent

A :class:`Reply` is a status, headers and a list of steps: bytes (sent as one HTTP chunk),
``Wait(event)`` (pause until the test sets it), ``RESET`` (drop the connection abruptly) or
``STALL`` (stop sending without closing, until the server shuts down); ``chunked=False``
sends the steps without chunked framing and closes the connection after them. ``before_headers`` is
a ``Wait`` (hold the headers back), ``RESET`` (drop the connection before any byte of the
answer) or ``STALL`` (never answer). ``reply.received`` is set once the request it answers
has arrived (to abort "while waiting for headers").
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional, Union


@dataclass
class Wait:
    event: threading.Event
    timeout: float = 10.0


RESET = object()
STALL = object()
Step = Union[bytes, Wait, object]


@dataclass
class Reply:
    steps: list[Step] = field(default_factory=list)
    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "text/event-stream"})
    before_headers: Optional[Step] = None  # Wait, RESET or STALL
    received: threading.Event = field(default_factory=threading.Event)  # set when its request arrived
    chunked: bool = True  # False: the steps go out as they are, and the connection closes after them


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    peer: tuple[str, int] = ("", 0)  # the client's address: the same for requests on one connection

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def sse(*events: Any, event_names: Optional[Iterable[Optional[str]]] = None) -> list[bytes]:
    """Encode each JSON-able event (or a ready string such as "[DONE]") as one SSE frame."""
    names = list(event_names) if event_names is not None else [None] * len(events)
    frames = []
    for name, event in zip(names, events):
        data = event if isinstance(event, str) else json.dumps(event)
        prefix = f"event: {name}\n" if name else ""
        frames.append(f"{prefix}data: {data}\n\n".encode())
    return frames


class _NamedThreadsServer(ThreadingHTTPServer):
    """Request threads named ``scripted-server-request`` (Python 3.9 calls them ``Thread-N``,
    3.10+ adds the target's name), so thread checks can tell them from the client's."""

    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread, args=(request, client_address), name="scripted-server-request"
        )
        thread.daemon = True
        thread.start()


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1, no request log, and a client that hung up (an abort under test) is no error."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def handle(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            super().handle()


class ScriptedServer:
    def __init__(self) -> None:
        self._replies: list[Reply] = []
        self._lock = threading.Lock()
        self.requests: list[RecordedRequest] = []
        self._stop = threading.Event()
        server = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with server._lock:
                    server.requests.append(
                        RecordedRequest(
                            "POST",
                            self.path,
                            {k.lower(): v for k, v in self.headers.items()},
                            body,
                            self.client_address,
                        )
                    )
                    reply = server._replies.pop(0) if server._replies else Reply([b"no scripted reply"], 500)
                reply.received.set()
                server._answer(self, reply)

            do_GET = do_POST

        self._httpd = _NamedThreadsServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name="scripted-server", daemon=True
        )
        self._thread.start()

    def reply(self, steps: Union[list[Step], bytes] = b"", status: int = 200, **kwargs: Any) -> Reply:
        reply = Reply(steps if isinstance(steps, list) else [steps], status, **kwargs)
        with self._lock:
            self._replies.append(reply)
        return reply

    def _answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if isinstance(reply.before_headers, Wait):
            reply.before_headers.event.wait(reply.before_headers.timeout)
        elif reply.before_headers is RESET:
            self._reset(handler)
            return
        elif reply.before_headers is STALL:
            self._stop.wait(30)
            handler.close_connection = True
            return
        handler.send_response(reply.status)
        for name, value in reply.headers.items():
            handler.send_header(name, value)
        if reply.chunked:
            handler.send_header("Transfer-Encoding", "chunked")
        else:
            handler.send_header("Connection", "close")
            handler.close_connection = True
        handler.end_headers()
        handler.wfile.flush()
        for step in reply.steps:
            if isinstance(step, bytes):
                if step:
                    handler.wfile.write(b"%x\r\n%s\r\n" % (len(step), step) if reply.chunked else step)
                    handler.wfile.flush()
            elif isinstance(step, Wait):
                step.event.wait(step.timeout)
            elif step is RESET:
                self._reset(handler)
                return
            elif step is STALL:
                self._stop.wait(30)
                handler.close_connection = True
                return
        if reply.chunked:
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()

    @staticmethod
    def _reset(handler: BaseHTTPRequestHandler) -> None:
        """Drop the connection with a TCP RST (SO_LINGER 0), as a crashing proxy would."""
        sock = handler.connection
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        handler.close_connection = True

    def close(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
