"""A real MCP Streamable HTTP endpoint on 127.0.0.1 whose answers the test decides, by method.

    with MethodServer({"initialize": json_answer(INIT), "tools/call": SILENT}) as server:
        MCPClient.http(server.url, protocol="2025-11-25")

A route is a function ``message -> (status, headers, body)``, or :data:`SILENT` (read the
request, never answer until the server stops). A body may be a list of pieces: bytes are sent
(the Content-Length counts them all), a callable is called between them (to hold the rest back).
Requests with no route get 202 (notifications) or, for a GET, 405.
"""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer
from typing import Any, Callable, Union

from .scripted_server import QuietHandler

Answer = tuple[int, dict, Union[bytes, list]]
SILENT = object()
Route = Callable[[dict], Union[Answer, object]]

INITIALIZE = {
    "protocolVersion": "2025-11-25",
    "capabilities": {"tools": {}},
    "serverInfo": {"name": "t", "version": "0"},
}


def json_answer(result: dict) -> Route:
    """A route answering with ``result`` for the request's id, as a JSON body."""
    return lambda message: (200, {"Content-Type": "application/json"}, _response(message, result))


def _response(message: dict, result: dict) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()


class MethodServer:
    def __init__(self, routes: dict[str, Any]) -> None:
        self.routes = routes
        self.methods: list[str] = []
        self.headers: list[dict[str, str]] = []  # of every request, in order
        self.peers: list[tuple[str, int]] = []  # the client address (a TCP connection) of every request
        self._stop = threading.Event()
        server = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                message = json.loads(body) if body else {}
                method = message.get("method", "(response)") if self.command == "POST" else self.command
                server.methods.append(method)
                server.headers.append(dict(self.headers))
                server.peers.append(self.client_address)
                route = server.routes.get(method)
                if route is None:
                    self._send((405, {}, b"") if self.command == "GET" else (202, {}, b""))
                    return
                answer = route if route is SILENT else route(message)
                if answer is SILENT:
                    server._stop.wait(60)
                    self.close_connection = True
                    return
                assert isinstance(answer, tuple)
                self._send(answer)

            do_GET = do_DELETE = do_POST

            def _send(self, answer: Answer) -> None:
                status, headers, body = answer
                pieces = [body] if isinstance(body, bytes) else body
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(sum(len(p) for p in pieces if isinstance(p, bytes))))
                self.end_headers()
                for piece in pieces:
                    if isinstance(piece, bytes):
                        self.wfile.write(piece)
                        self.wfile.flush()
                    else:
                        piece()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/mcp"
        threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True).start()

    def close(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> MethodServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
