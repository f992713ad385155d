"""``--mcp "COMMAND ARGS"`` and ``--mcp-url URL``: MCP servers' tools for the command line.

Each option may be repeated; every server is connected before the first prompt (a failure is
a usage error naming the server) and closed when the interpreter exits. Stdio servers inherit
only a few environment variables (docs/mcp.md#stdio); pass others with ``env NAME=VALUE``
in front of the command.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any, Callable, Optional

from .._redaction import shown_url
from .config import SetupError

__all__ = ["add_mcp_arguments", "chain_turn_hooks", "connect_mcp_servers"]


def add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar='"COMMAND ARGS"',
        help="add the tools of an MCP server started as this command (stdio); repeatable",
    )
    parser.add_argument(
        "--mcp-url",
        action="append",
        default=[],
        metavar="URL",
        help="add the tools of the MCP server at this Streamable HTTP endpoint; repeatable",
    )


def connect_mcp_servers(args: argparse.Namespace) -> list[Any]:
    """A connected :class:`~piagent.mcp.MCPClient` per ``--mcp`` and ``--mcp-url``, in order."""
    if not args.mcp and not args.mcp_url:
        return []
    from ..mcp import MCPClient, MCPError  # only when asked for: keeps the CLI's start fast

    clients: list[Any] = []
    servers = [("--mcp", spec) for spec in args.mcp] + [("--mcp-url", url) for url in args.mcp_url]
    try:
        for option, value in servers:
            argv = shlex.split(value) if option == "--mcp" else [value]
            shown = value if option == "--mcp" else shown_url(value)  # a key in the URL stays out of errors
            if not argv:
                raise SetupError(f"{option} needs a command")
            try:
                client = MCPClient.stdio(argv[0], argv[1:]) if option == "--mcp" else MCPClient.http(value)
                clients.append(client)
                names = [tool.name for tool in client.tools()]
            except MCPError as exc:
                raise SetupError(f"{option} {shown}: {exc}") from exc
            clash = set(names) & {tool.name for other in clients[:-1] for tool in other.tools()}
            if clash:
                raise SetupError(f"{option} {shown}: another MCP server already offers {', '.join(sorted(clash))}")
    except BaseException:
        for client in clients:
            client.close()
        raise
    return clients


def chain_turn_hooks(*hooks: Optional[Callable[..., Any]]) -> Optional[Callable[..., Any]]:
    """One ``prepare_next_turn`` hook running ``hooks`` in order, each seeing the last's context."""
    present = [h for h in hooks if h is not None]
    if len(present) < 2:
        return present[0] if present else None

    def chained(context: Any, signal: Any) -> Any:
        merged = None
        for hook in present:
            update = hook(context, signal)
            if update is None:
                continue
            if update.context is not None:
                context = type(context)(context.message, context.tool_results, update.context, context.new_messages)
            merged = update if merged is None else _merge(merged, update)
        return merged

    return chained


def _merge(first: Any, second: Any) -> Any:
    import dataclasses

    changes = {
        f.name: getattr(second, f.name) for f in dataclasses.fields(second) if getattr(second, f.name) is not None
    }
    return dataclasses.replace(first, **changes)
