"""The ``piagent`` command: options, building the agent, one-shot runs.

    piagent "question"            stream one answer to stdout; tool calls on stderr
    piagent --json "question"     every agent event as one JSON line
    piagent --schema s.json "q"   print only the answer's validated JSON (structured.py)
    piagent                       an interactive session (on a terminal)
    echo question | piagent       one-shot, the prompt read from stdin

Exit status: 0 when the run ends normally, 1 when it ends in error (the message is on
stderr), 2 for bad options, 130 when interrupted with Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any, Optional, Union

from ..agent import Agent
from ..ai.types import Model
from ..state import THINKING_LEVELS
from ..types import TurnUpdate
from . import structured
from .config import TOOL_NAMES, SetupError, build_tools, resolve_model
from .mcp_servers import add_mcp_arguments, chain_turn_hooks, connect_mcp_servers
from .render import Console, ConsoleRenderer, JsonRenderer
from .sessions import add_session_arguments, open_session, print_sessions, session_model

__all__ = ["build_agent", "build_parser", "main", "run_once"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="piagent",
        description="Run an agent from the command line. With no prompt on a terminal, start an "
        "interactive session: lines typed while it works steer it, /follow TEXT queues a "
        "follow-up, Ctrl-C aborts the run and a second Ctrl-C quits.",
    )
    parser.add_argument("prompt", nargs="*", help="the prompt (several words are joined)")
    parser.add_argument(
        "-m",
        "--model",
        help="provider:model-id, or local:/path/to/model.gguf (default: $PIAGENT_MODEL, "
        "a provider whose key is set, else the embedded local:smollm2-135m)",
    )
    parser.add_argument(
        "--base-url", help="serve the model from this OpenAI-compatible server (e.g. http://127.0.0.1:8080/v1)"
    )
    parser.add_argument("-s", "--system", default="", help="the system prompt")
    parser.add_argument(
        "--tools",
        help=f"comma-separated tools from the built-in kit, confined to the current directory: "
        f"{', '.join(TOOL_NAMES)}, or all",
    )
    parser.add_argument(
        "--tool-choice", help="auto, none, required, or a tool name: force a tool call in the first turn of each prompt"
    )
    add_mcp_arguments(parser)
    parser.add_argument(
        "--thinking", choices=THINKING_LEVELS, help="reasoning effort (default: the session's, else off)"
    )
    parser.add_argument("--max-turns", type=int, help="stop after this many turns per prompt")
    parser.add_argument("--sequential", action="store_true", help="run tool calls one at a time")
    parser.add_argument("--json", action="store_true", help="print every agent event as one JSON line")
    structured.add_arguments(parser)
    parser.add_argument("-v", "--verbose", action="store_true", help="log what piagent does on stderr")
    add_session_arguments(parser)
    return parser


def _tool_choice(value: Optional[str]) -> Any:
    if value is None or value in ("auto", "none", "required"):
        return value
    return {"name": value}


def build_agent(args: argparse.Namespace, model: Model, cwd: Optional[str] = None, session: Any = None) -> Agent:
    """The agent the options describe (its tools confined to ``cwd``), recording into ``session``."""
    if args.max_turns is not None and args.max_turns < 1:
        raise SetupError("--max-turns must be 1 or more")
    tools = build_tools(args.tools, cwd or os.getcwd())
    servers = connect_mcp_servers(args)
    tools += [tool for server in servers for tool in server.tools()]
    choice = _tool_choice(args.tool_choice)
    if isinstance(choice, dict) and choice["name"] not in [t.name for t in tools]:
        raise SetupError(f"--tool-choice {choice['name']}: no such tool among --tools")

    def free_choice_after_tools(context: Any, signal: Any) -> Optional[TurnUpdate]:
        return TurnUpdate(tool_choice="auto") if context.tool_results else None

    forced = choice == "required" or isinstance(choice, dict)
    return Agent(
        system_prompt=args.system,
        model=model,
        thinking_level=args.thinking or "off",  # "off": the session's level, if it recorded one
        tools=tools,
        tool_execution="sequential" if args.sequential else "parallel",
        max_turns=args.max_turns,
        tool_choice=choice,
        prepare_next_turn=chain_turn_hooks(
            free_choice_after_tools if forced else None, *(server.prepare_next_turn for server in servers)
        ),
        get_api_key=_base_url_key if args.base_url else None,
        session=session,
        output_type=structured.output_schema(args),
    )


def _base_url_key(provider: str) -> Optional[str]:
    """The key for a ``--base-url`` server: ``PIAGENT_API_KEY`` (else the provider's own variable)."""
    return os.environ.get("PIAGENT_API_KEY") or None


def run_once(agent: Agent, prompt: str, console: Console, renderer: Union[ConsoleRenderer, JsonRenderer]) -> int:
    """Run one prompt, rendering as it goes; Ctrl-C aborts it. Returns the exit status."""
    future = agent.prompt(prompt, wait=False)
    try:
        result = future.result()
    except KeyboardInterrupt:
        console.end_out_line()
        console.note("interrupted: aborting the run (Ctrl-C again to quit at once)")
        agent.abort("Interrupted")
        with contextlib.suppress(KeyboardInterrupt):
            future.result()
        return EXIT_INTERRUPTED
    except Exception as exc:  # the run itself blew up (a bug, not a model error)
        console.note(f"error: {exc}")
        return EXIT_ERROR
    if result.stop_reason in ("error", "aborted") or (result.output_expected and result.structured is None):
        if isinstance(renderer, JsonRenderer) or result.stop_reason not in ("error", "aborted"):
            console.note(f"error: {result.error_message or 'the run ended without its output'}")
        return EXIT_ERROR
    if isinstance(renderer, ConsoleRenderer):
        structured.print_output(result, console.out)
    return EXIT_OK


def _read_all(stream: IO[str]) -> str:
    try:
        return stream.read()
    except (OSError, ValueError):
        return ""


def main(
    argv: Optional[Sequence[str]] = None,
    *,
    stdin: Optional[IO[str]] = None,
    stdout: Optional[IO[str]] = None,
    stderr: Optional[IO[str]] = None,
    model: Union[Model, None] = None,
    environ: Optional[Mapping[str, str]] = None,
) -> int:
    """The console script. ``model`` (a :class:`Model`) bypasses model selection, for tests."""
    stdin = stdin or sys.stdin
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.ERROR, stream=err, format="piagent: %(message)s"
    )
    console = Console(out, err)
    if args.list_sessions:
        print_sessions(os.getcwd(), out, environ)
        return EXIT_OK
    try:
        session = open_session(args, os.getcwd(), environ)
        chosen = model or session_model(args, session, environ) or resolve_model(args.model, args.base_url, environ)
        agent = build_agent(args, chosen, session=session)
    except SetupError as exc:
        console.note(f"piagent: {exc}")
        return EXIT_USAGE
    if session is not None and args.verbose:
        console.note(f"piagent: session: {session.path}")
    progress = Console(err, err) if structured.wants_output(args) else console  # stdout: only the JSON
    renderer = JsonRenderer(console) if args.json else ConsoleRenderer(progress)
    agent.subscribe(renderer)
    prompt = " ".join(args.prompt).strip()
    interactive = not prompt and bool(getattr(stdin, "isatty", lambda: False)())
    try:
        if interactive and structured.wants_output(args):
            console.note("piagent: --schema and --output-json answer one prompt: pass it as an argument or on stdin")
            return EXIT_USAGE
        if interactive:
            from .interactive import InteractiveSession

            if chosen.api == "llama-cpp":  # its loading silences the terminal: do it before the prompt
                from ..ai.providers.llama_cpp import preload

                try:
                    preload(chosen)
                except Exception as exc:
                    console.note(f"piagent: cannot load {chosen.id}: {exc}")
                    return EXIT_ERROR

            return InteractiveSession(agent, console, stdin, label=f"{chosen.provider}:{chosen.id}").run()
        if not prompt:
            prompt = _read_all(stdin).strip()
        if not prompt:
            parser.print_usage(err)
            console.note("piagent: no prompt given (pass it as an argument or on stdin)")
            return EXIT_USAGE
        return run_once(agent, prompt, console, renderer)
    finally:
        renderer.close()
