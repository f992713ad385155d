"""A scripted OpenAI-compatible server on 127.0.0.1, in its own process.

The server runs in a separate process (``multiprocessing``, spawn) so that its CPU never
competes for the GIL of the client being measured. It speaks just enough HTTP/1.1: keep-alive
connections, one thread per connection, ``Content-Length`` request bodies, chunked answers.
Each answer body is encoded once (see :mod:`benchmarks.wire`) and then written with a single
``sendall``; the client still sees one HTTP chunk per SSE event.

    with BenchServer() as server:
        base_url = server.base_url("text", 20000)   # -> http://127.0.0.1:PORT/text/20000/v1
"""

from __future__ import annotations

import json
import multiprocessing
import socket
import threading
from typing import Any

from . import wire

_HEAD = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: text/event-stream\r\n"
    b"Cache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


def _bad_request(message: str) -> bytes:
    body = json.dumps({"error": {"message": message}}).encode()
    return b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )


class _Answers:
    """Answer bodies, encoded on first use and kept."""

    def __init__(self) -> None:
        self._cache: dict[tuple[Any, ...], bytes] = {}
        self._lock = threading.Lock()

    def reply(self, path: str, body: bytes) -> bytes:
        parts = path.strip("/").split("/")
        try:
            scenario, n = parts[0], int(parts[1])
            request = json.loads(body) if body else {}
            key = wire.answer_key(scenario, n, request)
        except (IndexError, ValueError) as exc:
            return _bad_request(f"cannot route {path!r}: {exc}")
        cached = self._cache.get(key)
        if cached is None:
            try:
                encoded = _HEAD + wire.answer(key)
            except ValueError as exc:
                return _bad_request(str(exc))
            with self._lock:
                cached = self._cache.setdefault(key, encoded)
        return cached


def _serve_connection(conn: socket.socket, answers: _Answers) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader = conn.makefile("rb")
    try:
        while True:
            request_line = reader.readline(65536)
            if not request_line:
                return
            length = 0
            while True:
                line = reader.readline(65536)
                if line in (b"\r\n", b"\n", b""):
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            body = reader.read(length) if length else b""
            parts = request_line.split()
            path = parts[1].decode("latin-1") if len(parts) > 1 else "/"
            conn.sendall(answers.reply(path, body))
    except OSError:
        pass
    finally:
        reader.close()
        conn.close()


def _serve(port_pipe: Any) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1024)  # the concurrent scenario connects 200 clients at once
    port_pipe.send(listener.getsockname()[1])
    port_pipe.close()
    answers = _Answers()
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_serve_connection, args=(conn, answers), daemon=True).start()


class BenchServer:
    """Start the server process; ``close()`` (or leaving the ``with`` block) stops it."""

    def __init__(self, start_timeout: float = 30.0) -> None:
        ctx = multiprocessing.get_context("spawn")
        receive, send = ctx.Pipe(duplex=False)
        self._process = ctx.Process(target=_serve, args=(send,), name="bench-server", daemon=True)
        self._process.start()
        send.close()
        if not receive.poll(start_timeout):
            self._process.kill()
            raise RuntimeError("the benchmark server did not start")
        self.port: int = receive.recv()
        receive.close()
        self.url = f"http://127.0.0.1:{self.port}"

    def base_url(self, scenario: str, n: int) -> str:
        """The OpenAI ``base_url`` for a scenario (the client appends ``/chat/completions``)."""
        return f"{self.url}/{scenario}/{n}/v1"

    def close(self) -> None:
        if self._process.is_alive():
            self._process.terminate()
        self._process.join(5)

    def __enter__(self) -> BenchServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
