"""The interactive session: the thread-based queue design, made visible.

The main thread only reads lines. A line typed while the agent is idle starts a run with
``prompt(wait=False)`` (the run streams on its own thread); a line typed while it works is
queued with ``steer()`` and reaches the model after the current turn; ``/follow TEXT``
queues a follow-up, delivered when the agent would otherwise stop. On a terminal the input
line (with readline editing and history) stays below the streamed answer.

Ctrl-C aborts the run (and drops what was queued); a second Ctrl-C in a row quits with
status 130, as Ctrl-C does in a one-shot run. ``/quit`` and Ctrl-D quit with status 0; Ctrl-D
during a run says so and waits for the run to end (Ctrl-C then aborts it). An unknown
``/command`` is refused, never sent to the model.

Messages queued just as a run ends are not lost: when a run finishes with messages still
queued (and was not aborted), the session continues the conversation with them.

A usage limit the agent reaches (``--max-cost``) is a question to the person at the terminal
(:meth:`InteractiveSession.ask_limit`, the agent's ``on_limit``): the next line typed is a
higher limit to go on with, or empty to stop the run there (docs/limits.md).
"""

from __future__ import annotations

import queue
import sys
import threading
from concurrent.futures import Future
from typing import IO, Any, Callable, Optional

from ..abort import AbortSignal
from ..agent import Agent
from ..exceptions import AgentBusyError, CompactionError, InvalidStateError, SessionError
from ..limits import LimitReached, UsageLimits
from .render import Console, usage_line

__all__ = ["COMMANDS", "HELP", "InteractiveSession"]

#: The session's commands and what they do (``/help`` prints them).
COMMANDS = {
    "/help": "list these commands",
    "/follow TEXT": "queue TEXT as a follow-up, delivered when the agent would otherwise stop",
    "/compact [FOCUS]": "summarise the older part of the conversation now (FOCUS: what the summary keeps)",
    "/quit": "leave the session (also /exit or Ctrl-D)",
}
HELP = (
    "Type a message and press Enter. While the agent works, each line you type steers it.\n"
    + "\n".join(f"  {name:<16} {what}" for name, what in COMMANDS.items())
    + "\nCtrl-C aborts the run; a second Ctrl-C quits."
)
MARKER = "› "
QUIT_GRACE = 5.0
EXIT_OK, EXIT_INTERRUPTED = 0, 130


class InteractiveSession:
    """Reads lines on the calling (main) thread; the agent runs on its own threads."""

    def __init__(
        self,
        agent: Agent,
        console: Console,
        stdin: Optional[IO[str]] = None,
        label: str = "",
        read_line: Optional[Callable[[], Optional[str]]] = None,
        summary: bool = False,
    ) -> None:
        self.agent = agent
        self.console = console
        self.label = label
        self.summary = summary
        self._read_line = read_line or _line_reader(stdin, console)
        self._interrupted = False  # the last thing the user did was Ctrl-C
        self._aborted = threading.Event()  # set by Ctrl-C, cleared by the next prompt
        self._answers: Optional[queue.Queue[Optional[str]]] = None  # set while ask_limit waits for a line

    @property
    def busy(self) -> bool:
        return bool(self.agent.state.is_streaming)

    def run(self) -> int:
        """Read and act on lines until the user quits; returns the exit status."""
        model = f" with {self.label}" if self.label else ""
        self.console.note(f"piagent{model}. /help lists the commands; Ctrl-D quits.", "2")
        code = EXIT_OK
        try:
            while True:
                try:
                    line = self._read_line()
                except KeyboardInterrupt:
                    if self._on_interrupt():
                        code = EXIT_INTERRUPTED
                        break
                    continue
                except EOFError:
                    line = None
                if line is None:
                    code = self._end_of_input()
                    break
                self._interrupted = False
                if not self._handle(line.strip()):
                    break
        finally:
            self.console.keep_input_line(None)
            self._shutdown()
        return code

    # -- input ---------------------------------------------------------------------------------

    def _handle(self, line: str) -> bool:
        """Act on one line; False to quit."""
        answers = self._answers
        if answers is not None:  # the run asked a question (ask_limit): this line is the answer
            answers.put(line)
            return True
        if not line:
            return True
        if line.startswith("/"):
            return self._command(line)
        if self.busy:
            self.agent.steer(line)
            self.console.note(f"(steering queued: {line})", "2")
        else:
            self.console.note(f"{MARKER}{line}", "1")
            self._start(line)
        return True

    def _command(self, line: str) -> bool:
        name, _, text = line.partition(" ")
        text = text.strip()
        if name in ("/quit", "/exit"):
            return False
        if name == "/help":
            self.console.note(HELP)
        elif name == "/follow":
            if not text:
                self.console.note("usage: /follow TEXT")
            elif self.busy:
                self.agent.follow_up(text)
                self.console.note(f"(follow-up queued: {text})", "2")
            else:
                self._start(text)
        elif name == "/compact":
            if self.busy:
                self.console.note("(the agent is working: /compact once it is idle)")
            else:
                self._compact(text or None)
        else:
            self.console.note(f"unknown command {name} (not sent to the model); /help lists the commands")
        return True

    def ask_limit(self, reached: LimitReached, signal: AbortSignal) -> Optional[UsageLimits]:
        """``on_limit`` for the person at the terminal: the next line typed is the new limit
        (more than what was used goes on), an empty or other line stops the run; so does an abort."""
        answers: queue.Queue[Optional[str]] = queue.Queue()
        remove = signal.add_listener(lambda: answers.put(None))
        self._answers = answers
        self.console.note(f"{reached.message}. Type a higher limit to go on, or press Enter to stop:")
        try:
            line = answers.get()
        finally:
            self._answers = None
            remove()
        try:
            value = float((line or "").strip().lstrip("$"))
        except ValueError:
            return None
        if not value > reached.used:
            return None
        return reached.limits.replace(**{reached.name: value if reached.name == "cost" else int(value)})

    def _on_interrupt(self) -> bool:
        """Ctrl-C: abort the run, or quit if the previous action was Ctrl-C too. True to quit."""
        if self._interrupted:
            return True
        self._interrupted = True
        with self.console.lock:
            if self.busy:
                self.console.muted = True  # a token already on its way is not printed after this
                self.console.end_out_line()
                self._aborted.set()
                self.agent.clear_all_queues()
                self.agent.abort("Interrupted")
                self.console.note("(aborted; Ctrl-C again to quit)")
            else:
                self.console.note("(Ctrl-C again, /quit or Ctrl-D to quit)")
        return False

    def _end_of_input(self) -> int:
        """Ctrl-D: quit, after the run in progress (Ctrl-C while waiting aborts it)."""
        if not self.busy:
            return EXIT_OK
        self.console.note("(end of input: waiting for the run to finish; Ctrl-C aborts it)")
        try:
            self.agent.wait_for_idle(None)
        except KeyboardInterrupt:
            self._interrupted = False
            self._on_interrupt()
            return EXIT_INTERRUPTED
        return EXIT_OK

    # -- runs ----------------------------------------------------------------------------------

    def _start(self, text: str) -> None:
        self._aborted.clear()
        self.console.muted = False
        try:
            future = self.agent.prompt(text, wait=False)
        except AgentBusyError:  # a run started in between (a continuation): steer it instead
            self.agent.steer(text)
            return
        except SessionError as exc:  # another agent is writing the session, say
            self.console.note(f"piagent: {exc}")
            return
        self._track(future)

    def _compact(self, focus: Optional[str]) -> None:
        """``agent.compact()`` on a thread of its own: typing goes on, Ctrl-C aborts it."""
        self._aborted.clear()
        self.console.note("(compacting the conversation)", "2")

        def compact() -> None:
            try:
                done = self.agent.compact(focus)
            except (AgentBusyError, CompactionError, SessionError) as exc:
                self.console.note(f"(not compacted: {exc})")
            else:
                self.console.note(f"(compacted: about {done.tokens_before} -> {done.tokens_after} tokens)", "2")

        threading.Thread(target=compact, name="piagent-compact", daemon=True).start()

    def _track(self, future: Future[Any]) -> None:
        future.add_done_callback(self._finished)

    def _finished(self, future: Future[Any]) -> None:
        """Runs on the run thread once the run has settled."""
        error = future.exception()
        if error is not None:
            self.console.note(f"error: {error}")
        elif self.summary:
            self.console.note(usage_line(future.result()), "2")
        if not self._aborted.is_set() and self.agent.has_queued_messages():
            try:
                self._track(self.agent.continue_(wait=False))
                return
            except (AgentBusyError, InvalidStateError, ValueError):
                pass  # another run took over; it will drain the queues
            except SessionError as exc:  # another agent is writing the session, say: the queue waits
                self.console.note(f"piagent: {exc}")

    def _shutdown(self) -> None:
        if self.busy:
            self.agent.abort("Session closed")
            self.agent.wait_for_idle(QUIT_GRACE)
        self.console.note("")


def _line_reader(stdin: Optional[IO[str]], console: Console) -> Callable[[], Optional[str]]:
    """``input()`` with readline editing and history on the real terminal, the input line kept
    below the output; else ``readline()`` on ``stdin``. None at end of input."""
    if stdin is None or stdin is sys.stdin:
        redraw = _readline_redraw()
        console.keep_input_line(redraw)

        def read_terminal() -> Optional[str]:
            console.input_shown(True)
            try:
                line = input(MARKER)
            except EOFError:
                console.note("")
                return None
            finally:
                console.input_shown(False)
            console.input_submitted()
            return line

        return read_terminal

    def read_stream() -> Optional[str]:
        line = stdin.readline()
        return line if line else None

    return read_stream


def _readline_redraw() -> Callable[[], None]:
    """Draws the input line (prompt, text typed so far) at the cursor: readline's own redraw
    when the GNU library is loaded, else the prompt and the line buffer written out."""
    try:
        import readline
    except ImportError:  # pragma: no cover - Windows
        return lambda: None
    try:
        import ctypes

        library = ctypes.CDLL(readline.__file__)
        on_new_line, forced_redraw = library.rl_on_new_line, library.rl_forced_update_display
    except (OSError, AttributeError, TypeError):  # libedit or a static build

        def write_line() -> None:
            sys.stdout.write(MARKER + readline.get_line_buffer())
            sys.stdout.flush()

        return write_line

    def redraw() -> None:
        sys.stdout.flush()
        on_new_line()
        forced_redraw()

    return redraw
