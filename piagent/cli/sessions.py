"""The command's sessions: ``--session PATH``, ``-c/--continue``, ``--list-sessions``, ``--no-session``.

Every run is recorded in a session file (docs/sessions.md#the-command): a new one in the
current directory's session directory unless ``--session`` names one or ``--continue`` picks
the most recent one there. A continued session keeps its model and system prompt unless
``--model`` or ``--system`` is given; a model it names that cannot be used is a usage error.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from typing import IO, Any, Callable, Optional

from ..ai.types import Model
from ..exceptions import SessionError
from ..sessions import JsonlSession, list_sessions, most_recent_session, new_session_path, session_dir
from ..sessions._format import new_session_id
from .config import SetupError, resolve_model
from .render import is_terminal, terminal_safe

__all__ = ["add_session_arguments", "open_session", "print_sessions", "session_model"]


def add_session_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--session", metavar="PATH", help="record the run in this session file (continuing it)")
    group.add_argument(
        "-c", "--continue", dest="continue_session", action="store_true", help="continue this directory's last session"
    )
    group.add_argument("--no-session", action="store_true", help="do not record the run")
    parser.add_argument("--list-sessions", action="store_true", help="list this directory's sessions and exit")


def open_session(
    args: argparse.Namespace, cwd: str, note: Callable[[str], None], environ: Optional[Mapping[str, str]] = None
) -> Optional[JsonlSession]:
    """The session the options ask for (None with ``--no-session``). Raises :class:`SetupError`.

    ``note`` tells the user (on stderr) that ``--continue`` found no session to continue.
    """
    if args.no_session:
        return None
    directory = session_dir(cwd, environ)
    path = args.session
    if path is None and args.continue_session:
        path = most_recent_session(directory)
        if path is None:
            note(f"piagent: no session to continue in {directory}: starting a new one")
    try:
        if path is None:
            session_id = new_session_id()
            return JsonlSession(new_session_path(directory, session_id), session_id=session_id, cwd=cwd)
        return JsonlSession(path, cwd=cwd)
    except (SessionError, OSError) as exc:
        raise SetupError(f"cannot open the session: {exc}") from None


_ANOTHER_MODEL = "Or pass --model PROVIDER:ID to continue the session with another model."


def session_model(
    args: argparse.Namespace,
    session: Optional[JsonlSession],
    environ: Optional[Mapping[str, str]] = None,
    compat: Optional[dict[str, Any]] = None,
) -> Optional[Model]:
    """Without ``--model``, the model a continued session last used (None: it names none; served at
    ``--base-url`` when given, with ``compat``, the checked ``--compat`` flags). Raises
    :class:`SetupError` when it cannot be used: the command never switches models on its own,
    and the session records no server address to find one again."""
    recorded = session.context().model if session is not None and not args.model else None
    if recorded is None:
        return None
    ref = f"{recorded[0]}:{recorded[1]}"
    try:
        return resolve_model(ref, args.base_url, environ, compat)
    except SetupError as exc:
        if _in_catalogue(ref):
            raise SetupError(f"the session's model {ref} cannot be used: {exc}\n{_ANOTHER_MODEL}") from None
        raise SetupError(
            f"the session's model {ref} is not in the catalogue, and the session does not record the server that "
            f"served it: pass --base-url URL to continue with it there.\n{_ANOTHER_MODEL}"
        ) from None


def _in_catalogue(ref: str) -> bool:
    from ..ai.models import get_model
    from ..exceptions import ModelNotFoundError

    try:
        get_model(ref)
    except ModelNotFoundError:
        return False
    return True


def print_sessions(cwd: str, out: IO[str], environ: Optional[Mapping[str, str]] = None) -> None:
    """One line per session of ``cwd``, the most recent first: time, messages, first prompt, path
    (their text made :func:`terminal_safe` on a terminal)."""
    directory = session_dir(cwd, environ)
    shown = terminal_safe if is_terminal(out) else str
    infos = list_sessions(directory)
    if not infos:
        out.write(f"no sessions in {directory}\n")
    for info in infos:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(info.modified_ms / 1000))
        first = " ".join(info.first_message.split())
        first = first if len(first) <= 60 else first[:59] + "…"
        name = f"[{info.name}] " if info.name else ""
        out.write(shown(f"{when}  {info.message_count:4d} messages  {name}{first or '(no prompt)'}\n    {info.path}\n"))
