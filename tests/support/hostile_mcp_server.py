"""A stdio MCP server (handshake era, 2025-11-25) whose tools misbehave on purpose.

``python hostile_mcp_server.py [--stderr=TEXT] [TOOL_NAME ...]`` lists ``echo`` plus any extra
tool names given (to test names the client must refuse); ``--stderr=TEXT`` first writes TEXT
(Python escapes such as ``\\x1b`` decoded) as a line on stderr. Calling a tool does what its
name says:

echo            answers with its ``text`` argument
stop_reading    answers, then never reads stdin again (the client's writes fill the pipe)
nested          answers with a line nested ``depth`` levels deep
ping_flood      sends ``count`` ping requests, then answers (reading their answers meanwhile)
sample_flood    sends ``count`` sampling/createMessage requests, then answers at once
stderr_line     writes one stderr line of ``size`` bytes, then answers
progress        sends one notifications/progress for the call, then answers
slow_pattern    answers with structuredContent that its outputSchema's pattern ``^(a+)+$`` takes
                exponential time to refuse (listed with that outputSchema)
"""

import codecs
import json
import sys
import time

EXTRA_TOOLS = [arg for arg in sys.argv[1:] if not arg.startswith("--stderr=")]
out = sys.stdout.buffer
for arg in sys.argv[1:]:
    if arg.startswith("--stderr="):
        sys.stderr.write(codecs.decode(arg[len("--stderr=") :], "unicode_escape") + "\n")
        sys.stderr.flush()


def write(message: dict) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def answer(request_id: object, result: dict) -> None:
    write({"jsonrpc": "2.0", "id": request_id, "result": result})


def text(value: str) -> dict:
    return {"content": [{"type": "text", "text": value}]}


def call(request_id: object, name: str, arguments: dict, meta: dict) -> None:
    if name == "stop_reading":
        answer(request_id, text("I stop reading now"))
        while True:
            time.sleep(60)
    if name == "nested":
        depth = int(arguments["depth"])
        out.write(b'{"jsonrpc": "2.0", "id": %d, "result": ' % request_id + b"[" * depth + b"]" * depth + b"}\n")
        out.flush()
        return
    if name in ("ping_flood", "sample_flood"):
        method = "ping" if name == "ping_flood" else "sampling/createMessage"
        for n in range(int(arguments["count"])):
            write({"jsonrpc": "2.0", "id": f"s{n}", "method": method, "params": {}})
        answer(request_id, text("sent"))
        return
    if name == "progress":
        params = {"progressToken": meta.get("progressToken"), "progress": 1}
        write({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
    if name == "slow_pattern":
        answer(request_id, {"content": [], "structuredContent": {"word": "a" * 40 + "!"}})
        return
    if name == "stderr_line":
        sys.stderr.buffer.write(b"x" * int(arguments["size"]) + b"\n")
        sys.stderr.flush()
    answer(request_id, text(str(arguments.get("text", "done"))))


for line in sys.stdin.buffer:
    message = json.loads(line)
    method = message.get("method")
    if "id" not in message or method is None:
        continue  # notifications, and the client's answers to our requests
    if method == "initialize":
        info = {"name": "hostile", "version": "0"}
        answer(message["id"], {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": info})
    elif method == "tools/list":
        tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ["echo", *EXTRA_TOOLS]]
        for tool in tools:
            if tool["name"] == "slow_pattern":
                word = {"type": "string", "pattern": "^(a+)+$"}
                tool["outputSchema"] = {"type": "object", "properties": {"word": word}}
        answer(message["id"], {"tools": tools})
    elif method == "tools/call":
        params = message["params"]
        call(message["id"], params["name"], params.get("arguments") or {}, params.get("_meta") or {})
    else:
        write({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "Method not found"}})
