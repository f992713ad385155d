"""The client the MCP conformance framework drives: ``conformance_client.py SERVER_URL``.

The framework starts a scenario's server, runs this with its URL as the last argument (and
the scenario's name in ``MCP_CONFORMANCE_SCENARIO``) and checks what it saw on the wire. The
client does what any piagent user's would: connect with ``protocol="auto"``, list the
tools, call each one (with the arguments the scenario's ``MCP_CONFORMANCE_CONTEXT`` gives
for it, else arguments made from its schema), read each resource and get each prompt the
server lists, and accept every elicitation without filling anything in (the client fills
the schema's defaults).
"""

from __future__ import annotations

import json
import logging
import os
import sys

from piagent.mcp import MCPClient

SAMPLES = {"number": 2, "integer": 3, "string": "text", "boolean": True}


def arguments(schema: dict) -> dict:
    properties = schema.get("properties") or {}
    return {name: SAMPLES.get(prop.get("type")) for name, prop in properties.items()}


def main(url: str) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "?")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    given = {call["name"]: call.get("arguments", {}) for call in context.get("toolCalls", [])}
    with MCPClient.http(url, elicitation=lambda params: {"action": "accept", "content": {}}) as client:
        print(f"{scenario}: connected, protocol {client.protocol_version}")
        for tool in client.tools():
            result = client.call_tool(tool.mcp_name, given.get(tool.mcp_name, arguments(tool.parameters)))
            print(f"{tool.mcp_name}: {result.get('content')}")
        if "resources" in client.server_capabilities:
            for resource in client.request("resources/list").get("resources", []):
                client.request("resources/read", {"uri": resource["uri"]})
        if "prompts" in client.server_capabilities:
            for prompt in client.request("prompts/list").get("prompts", []):
                client.request("prompts/get", {"name": prompt["name"]})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[-1]))
