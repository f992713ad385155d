"""A stdio "MCP server" that misbehaves on purpose: ``bad_server.py MODE``.

crash        writes a reason to stderr and exits with status 3 before reading anything
garbage      answers every request with a line that is not JSON
silent       reads requests and never answers
bad-version  refuses server/discover, answers initialize with revision 2099-01-01
malformed    answers every request with a JSON-RPC response that has neither result nor error
exit-on-call a proper handshake-era server with one tool, "echo", that exits when it is called
"""

import json
import sys

mode = sys.argv[1]
if mode == "crash":
    sys.stderr.write("fatal: no configuration found\n")
    sys.exit(3)
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    if mode == "garbage":
        reply = "Welcome to my server!"
    elif mode == "silent":
        continue
    elif mode == "bad-version":
        if message["method"] == "initialize":
            result = {
                "protocolVersion": "2099-01-01",
                "capabilities": {},
                "serverInfo": {"name": "bad", "version": "0"},
            }
            reply = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
        else:
            reply = json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no"}})
    elif mode == "exit-on-call":
        method = message["method"]
        if method == "tools/call":
            sys.exit(9)
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "x", "version": "0"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "echo", "inputSchema": {"type": "object", "properties": {}}}]}
        else:
            error = {"code": -32601, "message": "Method not found"}
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}) + "\n")
            sys.stdout.flush()
            continue
        reply = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})
    else:  # malformed
        reply = json.dumps({"jsonrpc": "2.0", "id": message["id"]})
    sys.stdout.write(reply + "\n")
    sys.stdout.flush()
