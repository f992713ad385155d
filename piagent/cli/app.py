"""The ``piagent`` command: options, building the agent, one-shot runs.

    piagent "question"                stream one answer to stdout; tool calls on stderr
    cat notes.txt | piagent "sum up"  stdin is the context, the argument the instruction
    piagent --json "question"         every agent event as one JSON line
    piagent --schema s.json "q"       print only the answer's validated JSON (structured.py)
    piagent                           an interactive session (on a terminal)
    echo question | piagent           one-shot, the prompt read from stdin

Exit status: 0 when the run ends normally; 1 when it ends in error (the message is on
stderr); 2 for bad options or a missing piece (model, key); 3 when it stops at a limit
(``--max-turns`` while the model still calls tools, or the answer cut at its token limit,
stop reason ``length``), said on stderr; 130 when interrupted with Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any, Callable, Optional, Union

from .. import __version__
from ..agent import Agent
from ..ai.types import Model
from ..exceptions import SessionError
from ..limits import LIMIT_REACHED, UsageLimits
from ..state import THINKING_LEVELS
from ..types import AgentTool, TurnUpdate
from . import structured
from .config import (
    KEY_VARIABLE,
    TOOL_NAMES,
    SetupError,
    build_tools,
    catalogue_line,
    describe_model,
    list_models,
    parse_compat,
    resolve_api_key,
    resolve_model,
)
from .mcp_servers import add_mcp_arguments, chain_turn_hooks, connect_mcp_servers
from .render import Console, ConsoleRenderer, JsonRenderer, TerminalSafeFormatter, is_terminal, usage_line
from .sessions import add_session_arguments, open_session, print_sessions, session_model

__all__ = ["DEFAULT_MAX_TURNS", "build_agent", "build_parser", "end_status", "main", "run_once"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_LIMIT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: Turns per prompt when ``--max-turns`` is not given: a small model calling a tool that
#: does not exist stops here instead of filling its context.
DEFAULT_MAX_TURNS = 20

log = logging.getLogger("piagent.cli")
_LOG_FORMAT = logging.Formatter("piagent: %(message)s")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="piagent",
        description="Run an agent from the command line. With no prompt on a terminal, start an "
        "interactive session (/help lists its commands). Piped input is the context of the prompt "
        "given as argument.",
    )
    parser.add_argument("prompt", nargs="*", help="the prompt (several words are joined)")
    parser.add_argument("--version", action="version", version=f"piagent {__version__}")
    model = parser.add_argument_group("model")
    model.add_argument(
        "-m",
        "--model",
        help="provider:model-id, or local:/path/to/model.gguf (default: $PIAGENT_MODEL, "
        "a provider whose key is set, else the embedded local:smollm2-135m)",
    )
    model.add_argument(
        "--list-models", action="store_true", help="list the known models and which have a key, then exit"
    )
    model.add_argument(
        "--refresh-models",
        action="store_true",
        help="rebuild the model catalogue from the official SDKs and genai-prices installed here into "
        "$PIAGENT_HOME/catalogue.json (default ~/.piagent), used when newer than the built-in one, then exit",
    )
    model.add_argument(
        "--base-url",
        help="serve the model from this OpenAI-compatible server (e.g. http://localhost:11434/v1 for "
        "Ollama; name the server in --model to apply what piagent knows of it: ollama:llama3.2)",
    )
    model.add_argument("--api-key", help=f"the provider's key (default: ${KEY_VARIABLE}, else the provider's variable)")
    model.add_argument(
        "--compat",
        action="append",
        metavar="KEY=VALUE",
        help="override what piagent assumes about the --base-url server, e.g. supports_null_content=true "
        "(repeatable; see docs/servers.md)",
    )
    model.add_argument("--max-tokens", type=int, help="cap each answer at this many tokens (default: the model's)")
    model.add_argument(
        "--thinking", choices=THINKING_LEVELS, help="reasoning effort (default: the session's, else off)"
    )
    model.add_argument(
        "--remember-rejections",
        action="store_true",
        help="keep what models were seen to refuse (an optional field named in their error) in "
        "$PIAGENT_HOME/learned-rules.json (default ~/.piagent), and apply what it holds",
    )
    model.add_argument(
        "--fallback-model",
        action="append",
        metavar="PROVIDER:ID",
        help="ask this model when a request fails for a reason another model can serve: 429, 5xx, overload, "
        "timeout (repeatable, tried in order; its key from its provider's variable; docs/limits.md)",
    )
    run = parser.add_argument_group("run")
    run.add_argument("-s", "--system", default="", help="the system prompt")
    run.add_argument(
        "--tools",
        help=f"comma-separated tools from the built-in kit, confined to the current directory: "
        f"{', '.join(TOOL_NAMES)}, or all",
    )
    run.add_argument(
        "--tool-choice", help="auto, none, required, or a tool name: force a tool call in the first turn of each prompt"
    )
    run.add_argument(
        "--max-turns",
        type=int,
        default=DEFAULT_MAX_TURNS,
        help=f"stop after this many turns per prompt (default {DEFAULT_MAX_TURNS}; exit status 3 when reached)",
    )
    run.add_argument("--sequential", action="store_true", help="run tool calls one at a time")
    run.add_argument(
        "--max-cost",
        type=float,
        metavar="USD",
        help="stop a prompt before it spends more than this, from the model's prices (exit status 3 when reached)",
    )
    add_mcp_arguments(parser)
    add_session_arguments(parser)
    output = parser.add_argument_group("output")
    output.add_argument("--json", action="store_true", help="print every agent event as one JSON line")
    structured.add_arguments(parser)
    output.add_argument(
        "--json-full",
        action="store_true",
        help="with --json, message_update events also carry the whole partial message (pi's form; "
        "its size grows with the square of the answer's length)",
    )
    output.add_argument(
        "-v", "--verbose", action="store_true", help="log what piagent does on stderr, and the token summary"
    )
    return parser


def _tool_choice(value: Optional[str]) -> Any:
    if value is None or value in ("auto", "none", "required"):
        return value
    return {"name": value}


def check_options(args: argparse.Namespace, cwd: Optional[str] = None) -> list[AgentTool]:
    """Options that need no model: the tools (returned), the tool choice, the turn limit."""
    if args.max_turns is not None and args.max_turns < 1:
        raise SetupError("--max-turns must be 1 or more")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise SetupError("--max-tokens must be 1 or more")
    if args.json_full and not args.json:
        raise SetupError("--json-full goes with --json")
    if args.max_cost is not None and not args.max_cost > 0:
        raise SetupError("--max-cost must be more than 0 (US dollars)")
    tools = build_tools(args.tools, cwd or os.getcwd())
    mcp = bool(args.mcp or args.mcp_url)  # their tools are known once connected (build_agent)
    choice = _tool_choice(args.tool_choice)
    if choice == "required" and not tools and not mcp:
        raise SetupError("--tool-choice required needs tools: add --tools (e.g. --tools calculator)")
    if not mcp:
        _check_choice_name(choice, tools)
    return tools


def _check_choice_name(choice: Any, tools: list[AgentTool]) -> None:
    if isinstance(choice, dict) and choice["name"] not in [t.name for t in tools]:
        raise SetupError(f"--tool-choice {choice['name']}: no such tool among --tools")


def build_agent(
    args: argparse.Namespace,
    model: Model,
    cwd: Optional[str] = None,
    api_key: str = "",
    tools: Optional[list[AgentTool]] = None,
    session: Any = None,
    fallbacks: Sequence[Model] = (),
) -> Agent:
    """The agent the options describe (its tools confined to ``cwd``, plus those of the MCP
    servers it connects to), recording into ``session``, asking ``fallbacks`` when ``model`` fails."""
    if tools is None:
        tools = check_options(args, cwd)
    servers = connect_mcp_servers(args)
    served = [tool for server in servers for tool in server.tools()]
    choice = _tool_choice(args.tool_choice)
    try:
        clash = sorted({t.name for t in served} & {t.name for t in tools})
        if clash:
            raise SetupError(f"an MCP server offers a tool with the name of a built-in tool: {', '.join(clash)}")
        tools = tools + served
        _check_choice_name(choice, tools)
    except SetupError:
        for server in servers:
            server.close()
        raise

    def free_choice_after_tools(context: Any, signal: Any) -> Optional[TurnUpdate]:
        return TurnUpdate(tool_choice="auto") if context.tool_results else None

    forced = choice == "required" or isinstance(choice, dict)
    # the key is the model's: a fallback of another provider takes its own from the environment
    key_for: Optional[Callable[[str], Optional[str]]] = (
        (lambda provider: api_key if provider == model.provider else None) if api_key else None
    )
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
        get_api_key=key_for,
        session=session,
        output_type=structured.output_schema(args),
        usage_limits=UsageLimits(cost=args.max_cost) if args.max_cost is not None else None,
        fallback_models=list(fallbacks),
    )


def end_status(result: Any, max_turns: Optional[int]) -> tuple[int, str]:
    """The exit status of a finished run and, for an abnormal end, what to say on stderr."""
    reason = result.stop_reason
    if reason == "error" and (result.error_message or "").startswith(LIMIT_REACHED):
        return EXIT_LIMIT, f"stopped: {result.error_message} (--max-cost)"
    if reason == "error":
        return EXIT_ERROR, f"error: {result.error_message or 'the run failed'}"
    if reason == "aborted":
        return EXIT_ERROR, f"aborted: {result.error_message or 'the run was aborted'}"
    if reason == "length":
        return EXIT_LIMIT, "stopped: the answer reached the model's output token limit (stop reason: length)"
    if reason == "toolUse":  # the turn limit ended the run while the model still called tools
        return EXIT_LIMIT, (
            f"stopped: turn limit reached (--max-turns {max_turns}) while the model was still calling tools"
        )
    return EXIT_OK, ""


def run_once(
    agent: Agent,
    prompt: str,
    console: Console,
    renderer: Union[ConsoleRenderer, JsonRenderer],
    max_turns: Optional[int] = None,
    summary: bool = False,
) -> int:
    """Run one prompt, rendering as it goes; Ctrl-C aborts it. Returns the exit status."""
    try:
        try:
            future = agent.prompt(prompt, wait=False)
        except SessionError as exc:  # another agent is writing the session, say
            console.note(f"piagent: {exc}")
            return EXIT_ERROR
        result = future.result()
    except KeyboardInterrupt:  # while the run starts or goes on
        console.end_out_line()
        console.note("interrupted: aborting the run (Ctrl-C again to quit at once)")
        agent.abort("Interrupted")
        with contextlib.suppress(KeyboardInterrupt):
            agent.wait_for_idle()
        return EXIT_INTERRUPTED
    except Exception as exc:  # the run itself blew up (a bug, not a model error)
        console.note(f"error: {exc}")
        return EXIT_ERROR
    console.end_out_line(final=result.stop_reason != "aborted")
    code, message = end_status(result, max_turns)
    # the console renderer has already shown errors as they happened; the rest is said here
    if message and (isinstance(renderer, JsonRenderer) or code == EXIT_LIMIT):
        console.note(f"piagent: {message}")
    elif code == EXIT_OK and result.output_expected and result.structured is None:
        console.note(f"error: {result.error_message or 'the run ended without its output'}")
        code = EXIT_ERROR
    elif code == EXIT_OK and isinstance(renderer, ConsoleRenderer):
        structured.print_output(result, console.out)
    if summary:
        console.note(usage_line(result), "2")
    return code


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
    _configure_logging(args.verbose, err)
    console = Console(out, err)
    if args.remember_rejections:
        from ..ai import remember_rejections

        remember_rejections()
    if args.refresh_models:
        return _refresh_models(console)
    if args.list_models:
        console.write_out("".join(line + "\n" for line in list_models(environ)))
        return EXIT_OK
    if args.list_sessions:
        print_sessions(os.getcwd(), out, environ)
        return EXIT_OK
    try:
        tools = check_options(args)
        compat = parse_compat(args.compat)  # checked even where a session's model is used
        session = open_session(args, os.getcwd(), console.note, environ)
        chosen = (
            model
            or session_model(args, session, environ, compat)
            or resolve_model(args.model, args.base_url, environ, compat)
        )
        key = resolve_api_key(chosen, args.api_key, environ)
        fallbacks = [
            resolve_model(ref, None, environ, given_as="--fallback-model ") for ref in args.fallback_model or ()
        ]
        for fallback in fallbacks:  # checked now, not when the model fails
            resolve_api_key(fallback, args.api_key, environ, fallback_of=chosen)
        if args.max_tokens:
            chosen.max_tokens = args.max_tokens
        agent = build_agent(args, chosen, api_key=key, tools=tools, session=session, fallbacks=fallbacks)
    except SetupError as exc:
        console.note(f"piagent: {exc}")
        return EXIT_USAGE
    log.info("%s", describe_model(chosen))
    if args.max_cost is not None:
        for unpriced in [m for m in [chosen, *fallbacks] if not (m.cost.input or m.cost.output)]:
            ref = f"{unpriced.provider}:{unpriced.id}"
            console.note(f"piagent: {ref} has no prices in the catalogue: --max-cost cannot apply to it")
    if session is not None and args.verbose:
        console.note(f"piagent: session: {session.path}")
    progress = Console(err, err) if structured.wants_output(args) else console  # stdout: only the JSON
    renderer = JsonRenderer(console, full=args.json_full) if args.json else ConsoleRenderer(progress)
    agent.subscribe(renderer)
    agent.subscribe(_log_fallback)
    prompt = " ".join(args.prompt).strip()
    summary = args.verbose or (console.is_tty and not args.json)
    try:
        if not prompt and is_terminal(stdin):
            if structured.wants_output(args):
                console.note(
                    "piagent: --schema and --output-json answer one prompt: pass it as an argument or on stdin"
                )
                return EXIT_USAGE
            return _interactive(agent, chosen, console, stdin, summary)
        piped = "" if is_terminal(stdin) else _read_all(stdin).strip()
        if piped and prompt:
            log.info("stdin (%d characters) is the context of the prompt", len(piped))
            prompt = f"{piped}\n\n{prompt}"
        prompt = prompt or piped
        if not prompt:
            parser.print_usage(err)
            console.note("piagent: no prompt given (pass it as an argument or on stdin)")
            return EXIT_USAGE
        return run_once(agent, prompt, console, renderer, args.max_turns, summary)
    finally:
        renderer.close()


def _log_fallback(event: Any) -> None:
    """With ``-v``: which model answers when one fails (``model_fallback``)."""
    if event.type == "model_fallback":
        failed, following = (f"{m.provider}:{m.id}" for m in (event.model, event.next_model))
        log.info("%s failed (%s): asking %s", failed, event.reason, following)


def _configure_logging(verbose: bool, err: IO[str]) -> None:
    """Log on ``err`` as ``piagent: message``: piagent's warnings always (a refusal learned from
    a provider, an unusable user-level file, a damaged session), its info with ``-v``; other
    libraries' errors only (their info with ``-v``). A host program that configured logging
    already (the root logger has handlers) keeps its configuration."""
    if logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(err)  # log lines quote untrusted text too (an MCP server's stderr...)
    handler.setFormatter(TerminalSafeFormatter("piagent: %(message)s") if is_terminal(err) else _LOG_FORMAT)
    logging.basicConfig(level=logging.INFO if verbose else logging.ERROR, handlers=[handler])
    logging.getLogger("piagent").setLevel(logging.INFO if verbose else logging.WARNING)


def _refresh_models(console: Console) -> int:
    """``--refresh-models``: rebuild the user-level catalogue; a missing source is a usage error."""
    from ..ai._home import user_dir
    from ..ai.models import catalogue_in_use, get_models, get_providers, refresh_catalogue

    try:
        path = refresh_catalogue()
    except (ImportError, ValueError) as exc:
        console.note(f"piagent: {exc}")
        return EXIT_USAGE
    except OSError as exc:
        console.note(f"piagent: could not write the catalogue into {user_dir()}: {exc}")
        return EXIT_ERROR
    count = sum(len(get_models(provider)) for provider in get_providers())
    used = catalogue_in_use()
    if used["source"] == "user":
        console.write_out(f"wrote {path}\n{catalogue_line()} ({count} models)\n")
    else:  # built the same day as the built-in one (or earlier): not used, and saying why
        written = json.loads(path.read_text(encoding="utf-8"))["generated"]
        console.write_out(
            f"wrote {path} (generated {written}): it is not newer than the built-in catalogue "
            f"(generated {used['generated']}), so the built-in one stays in use ({count} models)\n"
        )
    return EXIT_OK


def _interactive(agent: Agent, chosen: Model, console: Console, stdin: IO[str], summary: bool) -> int:
    from .interactive import InteractiveSession

    if chosen.api == "llama-cpp":  # its loading silences the terminal: do it before the prompt
        from ..ai.providers.llama_cpp import preload

        try:
            preload(chosen)
        except Exception as exc:
            console.note(f"piagent: cannot load {chosen.id}: {exc}")
            return EXIT_ERROR
    session = InteractiveSession(agent, console, stdin, label=f"{chosen.provider}:{chosen.id}", summary=summary)
    if agent.usage_limits:  # --max-cost: reaching it asks at the terminal
        agent.on_limit = session.ask_limit
    return session.run()
