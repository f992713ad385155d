"""The interactive session: the thread-based queue design, made visible.

The main thread only reads lines. A line typed while the agent is idle starts a run with
``prompt(wait=False)`` (the run streams on its own thread); a line typed while it works is
queued with ``steer()`` and reaches the model after the current turn; ``/follow TEXT``
queues a follow-up, delivered when the agent would otherwise stop. Ctrl-C aborts the run
(and drops what was queued); a second Ctrl-C in a row, ``/quit`` or end of input quits.

Messages queued just as a run ends are not lost: when a run finishes with messages still
queued (and was not aborted), the session continues the conversation with them.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import Future
from typing import IO, Any, Callable, Optional

from ..agent import Agent
from ..exceptions import AgentBusyError, InvalidStateError
from .render import Console

__all__ = ["HELP", "InteractiveSession"]

HELP = (
    "Type a message and press Enter. While the agent works, each line you type steers it;\n"
    "/follow TEXT queues a follow-up; Ctrl-C aborts the run, a second Ctrl-C quits; /quit or Ctrl-D quits."
)
MARKER = "› "
QUIT_GRACE = 5.0


class InteractiveSession:
    """Reads lines on the calling (main) thread; the agent runs on its own threads."""

    def __init__(
        self,
        agent: Agent,
        console: Console,
        stdin: Optional[IO[str]] = None,
        label: str = "",
        read_line: Optional[Callable[[], Optional[str]]] = None,
    ) -> None:
        self.agent = agent
        self.console = console
        self.label = label
        self._read_line = read_line or _line_reader(stdin)
        self._interrupted = False  # the last thing the user did was Ctrl-C
        self._aborted = threading.Event()  # set by Ctrl-C, cleared by the next prompt

    @property
    def busy(self) -> bool:
        return bool(self.agent.state.is_streaming)

    def run(self) -> int:
        model = f" with {self.label}" if self.label else ""
        self.console.note(self.console.style(f"piagent{model}. {HELP}", "2"))
        self._marker()
        while True:
            try:
                line = self._read_line()
            except KeyboardInterrupt:
                if self._on_interrupt():
                    break
                continue
            except EOFError:
                line = None
            if line is None:
                self.agent.wait_for_idle(None)
                break
            self._interrupted = False
            if not self._handle(line.strip()):
                break
        self._shutdown()
        return 0

    # -- input ---------------------------------------------------------------------------------

    def _handle(self, line: str) -> bool:
        """Act on one line; False to quit."""
        if not line:
            if not self.busy:
                self._marker()
            return True
        if line in ("/quit", "/exit"):
            return False
        if line == "/help":
            self.console.note(HELP)
            return True
        if line.startswith("/follow"):
            text = line[len("/follow") :].strip()
            if not text:
                self.console.note("usage: /follow TEXT")
            elif self.busy:
                self.agent.follow_up(text)
                self.console.note(self.console.style("(follow-up queued)", "2"))
            else:
                self._start(text)
            return True
        if self.busy:
            self.agent.steer(line)
            self.console.note(self.console.style("(steering queued)", "2"))
        else:
            self._start(line)
        return True

    def _on_interrupt(self) -> bool:
        """Ctrl-C: abort the run, or quit if the previous action was Ctrl-C too. True to quit."""
        if self._interrupted:
            return True
        self._interrupted = True
        self.console.end_out_line()
        if self.busy:
            self._aborted.set()
            self.agent.clear_all_queues()
            self.agent.abort("Interrupted")
            self.console.note("(aborted; Ctrl-C again to quit)")
        else:
            self.console.note("(Ctrl-C again, /quit or Ctrl-D to quit)")
            self._marker()
        return False

    # -- runs ----------------------------------------------------------------------------------

    def _start(self, text: str) -> None:
        self._aborted.clear()
        try:
            future = self.agent.prompt(text, wait=False)
        except AgentBusyError:  # a run started in between (a continuation): steer it instead
            self.agent.steer(text)
            return
        self._track(future)

    def _track(self, future: Future[Any]) -> None:
        future.add_done_callback(self._finished)

    def _finished(self, future: Future[Any]) -> None:
        """Runs on the run thread once the run has settled."""
        error = future.exception()
        if error is not None:
            self.console.note(f"error: {error}")
        if not self._aborted.is_set() and self.agent.has_queued_messages():
            try:
                self._track(self.agent.continue_(wait=False))
                return
            except (AgentBusyError, InvalidStateError, ValueError):
                pass  # another run took over; it will drain the queues
        self._marker()

    def _marker(self) -> None:
        with self.console.lock:
            self.console.end_out_line()
            self.console.err.write(MARKER)
            self.console.err.flush()

    def _shutdown(self) -> None:
        if self.busy:
            self.agent.abort("Session closed")
            self.agent.wait_for_idle(QUIT_GRACE)
        self.console.note("")


def _line_reader(stdin: Optional[IO[str]]) -> Callable[[], Optional[str]]:
    """``input()`` (with line editing) on the real terminal, else ``readline()``; None at EOF."""
    import sys

    if stdin is None or stdin is sys.stdin:
        with contextlib.suppress(ImportError):  # no readline on Windows
            import readline  # noqa: F401  (line editing for input())

        def read_terminal() -> Optional[str]:
            try:
                return input()
            except EOFError:
                return None

        return read_terminal

    def read_stream() -> Optional[str]:
        line = stdin.readline()
        return line if line else None

    return read_stream
