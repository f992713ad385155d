"""How the ``piagent`` command shows a run: listeners that write agent events to a console.

* :class:`ConsoleRenderer`: the answer streams to stdout as it arrives; thinking, tool calls
  (name, arguments, elapsed time, result summary), injected steering/follow-up messages and
  errors go to stderr. On a terminal a spinner line shows the tools still running.
* :class:`JsonRenderer`: one JSON line per event on stdout (the event's ``to_dict()``).

Listeners run on the agent's run thread; the spinner runs on its own thread. Every write
goes through :class:`Console`, which serialises them.

Text from the model, tools and servers is untrusted: on a terminal it goes through
:func:`terminal_safe` (an escape sequence could set the clipboard, the window title or clear
the screen), and so do log lines on a terminal (:class:`TerminalSafeFormatter`).
Piped output carries it as it came; ``--json`` escapes every control character.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import shutil
import threading
import time
from typing import IO, Any, Callable, Optional

__all__ = [
    "Console",
    "ConsoleRenderer",
    "JsonRenderer",
    "TerminalSafeFormatter",
    "is_terminal",
    "json_line",
    "summarize_args",
    "summarize_result",
    "terminal_safe",
    "usage_line",
]

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
TICK = 0.1
SUMMARY_WIDTH = 100
_BIDI = "\u202a-\u202e\u2066-\u2069"
"""Explicit directional embeddings, overrides and isolates: they reorder what follows them on
screen (Trojan Source). The marks right-to-left text needs (U+200E, U+200F, U+061C) and the
zero-width characters scripts and emoji need are kept."""
_CONTROL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
"""Control characters but newline and tab (C0, DEL and C1: ``\\x9b`` is an 8-bit CSI), and :data:`_BIDI`."""
_JSON_UNESCAPED_CONTROL = re.compile(f"[\x7f-\x9f{_BIDI}]")


def terminal_safe(text: str) -> str:
    """``text`` with every control character but newline and tab shown as ``\\xHH``, and every
    bidi override, embedding or isolate as ``\\uHHHH``.

    Nothing in it can then drive a terminal: no escape sequence (OSC 52 writing the clipboard,
    a title change, a screen clear), no carriage return overwriting a line, no text shown in
    another order than it has. ``\\r\\n`` is a newline.
    """
    return _CONTROL.sub(_escaped, text.replace("\r\n", "\n"))


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class TerminalSafeFormatter(logging.Formatter):
    """A log format for a terminal: the whole line (message, traceback) :func:`terminal_safe`."""

    def format(self, record: logging.LogRecord) -> str:
        return terminal_safe(super().format(record))


def json_line(value: Any) -> str:
    """``value`` as one line of JSON with every control character escaped (DEL, C1 and bidi
    overrides too, which ``json.dumps`` leaves as they are): safe to show on a terminal, equal once parsed."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return _JSON_UNESCAPED_CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _shorten(text: str, width: int = SUMMARY_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def summarize_args(args: Any) -> str:
    """Tool arguments on one short line."""
    try:
        text = json.dumps(args, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(args)
    return _shorten(text)


def summarize_result(result: Any) -> str:
    """A tool result's text on one short line, with its line count when it has several."""
    blocks = getattr(result, "content", None) or []
    text = "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", "") == "text")
    images = sum(1 for b in blocks if getattr(b, "type", "") == "image")
    lines = text.count("\n") + (not text.endswith("\n"))  # a final newline ends the last line
    summary = _shorten(text) if text else ("(no output)" if not images else "")
    extras = []
    if lines > 1:
        extras.append(f"{lines} lines")
    if images:
        extras.append(f"{images} image{'s' if images > 1 else ''}")
    return summary + (f" ({', '.join(extras)})" if extras else "")


class Console:
    """stdout and stderr behind one lock, with an optional status line on a terminal's stderr.

    In an interactive session (:meth:`keep_input_line`) the line being typed stays below the
    output: before anything is written, the answer's unfinished line and the input line are
    erased; after it, they are drawn again (the answer's unfinished line, then the input line).
    """

    def __init__(self, out: IO[str], err: IO[str], color: Optional[bool] = None) -> None:
        self.out = out
        self.err = err
        self.lock = threading.RLock()
        self.is_tty = is_terminal(err)
        self.out_is_tty = is_terminal(out)
        self.color = self.is_tty if color is None else color
        self._status = ""
        self.out_at_line_start = True
        self.out_closed = False
        self.muted = False  # answer text is dropped (after an abort, until the next run)
        self._redraw_input: Optional[Callable[[], None]] = None
        self._input_shown = False
        self._tail = ""  # the answer's unfinished line, while an input line is kept below
        self._tail_rows = 0  # the rows it takes on screen, above the cursor

    # -- the input line -------------------------------------------------------------------------

    def keep_input_line(self, redraw: Optional[Callable[[], None]]) -> None:
        """Keep an input line below the output (``redraw`` draws it at the cursor); None stops."""
        with self.lock:
            self._redraw_input = redraw if self.is_tty else None

    def input_shown(self, shown: bool) -> None:
        """The session tells whether the input line is on screen (shown while reading a line)."""
        with self.lock:
            self._input_shown = shown

    def input_submitted(self) -> None:
        """The typed line was entered: remove it (the session reports it in its own words)."""
        with self.lock:
            if self._redraw_input is None:
                return
            self.err.write("\033[A")  # back up to the row the line was typed on
            self._hide_input()
            self._show_input()

    def _rows(self, text: str) -> int:
        width = max(1, shutil.get_terminal_size().columns)
        return max(1, -(-len(text) // width))

    def _hide_input(self) -> None:
        """Erase the unfinished answer line and the input line (the cursor is on the input line)."""
        if self._redraw_input is None:
            return
        up = self._tail_rows
        self.err.write("\r" + (f"\033[{up}A" if up else "") + "\033[J")
        self._tail_rows = 0

    def _show_input(self) -> None:
        if self._redraw_input is None:
            return
        if self._tail:
            self.err.write(self._tail + "\n")
            self._tail_rows = self._rows(self._tail)
        self.err.flush()
        if self._input_shown:
            self._redraw_input()

    # -- writing --------------------------------------------------------------------------------

    def style(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def shown(self, text: str) -> str:
        """Untrusted text as it may be written to stderr (:func:`terminal_safe` on a terminal)."""
        return terminal_safe(text) if self.is_tty else text

    def _clear_status(self) -> None:
        if self._status:
            self.err.write("\r\033[K")
            self._status = ""

    def write_out(self, text: str) -> None:
        """Write to stdout; once its reader has gone (``| head``), writes are dropped quietly."""
        with self.lock:
            if self.out_closed:
                return
            self._clear_status()
            if self._redraw_input is not None:
                self._hide_input()
                done, newline, self._tail = (self._tail + text).rpartition("\n")
                text = done + newline  # whole lines; the unfinished one is drawn above the input
            try:
                self.out.write(text)
                self.out.flush()
            except BrokenPipeError:
                self._drop_out()
                return
            if self._redraw_input is not None:
                self.out_at_line_start = not self._tail
                self._show_input()
            elif text:
                self.out_at_line_start = text.endswith("\n")

    def write_answer(self, text: str) -> None:
        """Answer text: dropped while :attr:`muted` (a delta that was on its way when aborted)."""
        with self.lock:
            if not self.muted:
                self.write_out(terminal_safe(text) if self.out_is_tty else text)

    def _drop_out(self) -> None:
        self.out_closed = True
        try:  # so that the interpreter's own flush at exit does not complain either
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.out.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            pass

    def end_out_line(self, final: bool = False) -> None:
        """Finish the answer's current line, so that stderr notes start on their own line.

        On a terminal only: stdout piped gets a newline only after a whole message (``final``),
        never inside one (a note, an abort), so it carries the answer exactly as the model sent it.
        """
        with self.lock:
            if not self.out_at_line_start and (final or self.out_is_tty):
                self.write_out("\n")

    def note(self, text: str, code: str = "") -> None:
        """One line on stderr (:meth:`shown`), in the style ``code`` if given."""
        text = self.shown(text)
        with self.lock:
            self._clear_status()
            self._hide_input()
            self.err.write((self.style(text, code) if code else text) + "\n")
            self.err.flush()
            self._show_input()

    def status(self, text: str) -> None:
        """Replace the status line (terminals, without an input line)."""
        if not self.is_tty or self._redraw_input is not None:
            return
        with self.lock:
            self._clear_status()
            if text:
                text = terminal_safe(text)
                self.err.write(text)
                self._status = text
            self.err.flush()


class _Spinner:
    """Redraws the running tools every tick until :meth:`stop` (only on a terminal)."""

    def __init__(self, console: Console, running: dict[str, tuple[str, float]]) -> None:
        self._console = console
        self._running = running
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def ensure_started(self) -> None:
        if self._console.is_tty and self._thread is None:
            self._thread = threading.Thread(target=self._spin, name="piagent-spinner", daemon=True)
            self._thread.start()

    def _spin(self) -> None:
        frame = 0
        while not self._stop.wait(TICK):
            with self._console.lock:
                tools = list(self._running.values())
                if tools:
                    now = time.monotonic()
                    names = ", ".join(f"{name} {now - started:.1f}s" for name, started in tools)
                    self._console.status(f"{SPINNER[frame % len(SPINNER)]} running {names}")
                    frame += 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        self._console.status("")


class ConsoleRenderer:
    """Listener for the human-readable output; call :meth:`close` when done with it."""

    def __init__(self, console: Console, show_injected: bool = True) -> None:
        self.console = console
        self.show_injected = show_injected
        self._running: dict[str, tuple[str, float]] = {}
        self._spinner = _Spinner(console, self._running)
        self._thinking = False
        self._user_messages = 0

    def __call__(self, event: Any) -> None:
        handler = getattr(self, "_on_" + event.type, None)
        if handler is not None:
            handler(event)

    def close(self) -> None:
        self._spinner.stop()

    # -- events ------------------------------------------------------------------------------

    def _on_agent_start(self, event: Any) -> None:
        self._user_messages = 0

    def _on_message_start(self, event: Any) -> None:
        message = event.message
        if getattr(message, "role", None) == "assistant":
            self.console.end_out_line(final=True)  # the text before it is whole
        if getattr(message, "role", None) != "user":
            return
        self._user_messages += 1
        if self._user_messages > 1 and self.show_injected:  # a steering or follow-up message
            self.console.end_out_line()
            self.console.note(f"» {_message_text(message)}", "36")

    def _on_message_update(self, event: Any) -> None:
        update = event.assistant_message_event
        if update.type == "text_delta":
            if self._thinking:
                self._thinking = False
                self.console.note("")
            self.console.write_answer(update.delta)
        elif update.type == "thinking_delta":
            with self.console.lock:
                self._thinking = True
                self.console.err.write(self.console.style(self.console.shown(update.delta), "2"))
                self.console.err.flush()

    def _on_message_end(self, event: Any) -> None:
        message = event.message
        if getattr(message, "role", None) != "assistant":
            return
        if self._thinking:
            self._thinking = False
            self.console.note("")
        if message.stop_reason in ("error", "aborted"):
            text = message.error_message or message.stop_reason
            self.console.end_out_line()
            label = "aborted" if message.stop_reason == "aborted" else "error"
            self.console.note(f"{label}: {text}", "31")
        elif message.stop_reason == "refusal":
            category = (getattr(message, "refusal", None) or {}).get("category")
            self.console.end_out_line()
            self.console.note(f"(the model refused{': ' + category if category else ''})", "33")

    def _on_tool_execution_start(self, event: Any) -> None:
        self.console.end_out_line()
        self.console.note(f"→ {event.tool_name}({summarize_args(event.args)})", "33")
        with self.console.lock:
            self._running[event.tool_call_id] = (event.tool_name, time.monotonic())
        self._spinner.ensure_started()

    def _on_tool_execution_update(self, event: Any) -> None:
        if not self.console.is_tty:
            self.console.note(f"  … {event.tool_name}: {summarize_result(event.partial_result)}")

    def _on_tool_execution_end(self, event: Any) -> None:
        with self.console.lock:
            _, started = self._running.pop(event.tool_call_id, (event.tool_name, time.monotonic()))
        elapsed = time.monotonic() - started
        mark, code = ("✗", "31") if event.is_error else ("✓", "32")
        line = f"{mark} {event.tool_name} ({elapsed:.1f}s): {summarize_result(event.result)}"
        self.console.note(line, code)

    def _on_agent_end(self, event: Any) -> None:
        last = event.messages[-1] if event.messages else None
        self.console.end_out_line(final=getattr(last, "stop_reason", None) != "aborted")


class JsonRenderer:
    """Listener writing each event as one line of JSON (pi's camelCase form).

    A ``message_update`` carries its ``assistantMessageEvent`` (the delta) but not the partial
    ``message``, so the output grows linearly with the answer; ``full=True`` keeps the message
    (pi's form: every update repeats the whole answer so far).
    """

    def __init__(self, console: Console, full: bool = False) -> None:
        self.console = console
        self.full = full

    def __call__(self, event: Any) -> None:
        # an update without its partial message is not even built: building it at every delta
        # would take time growing with the square of the answer's length
        data = event.to_dict(with_message=self.full) if event.type == "message_update" else event.to_dict()
        self.console.write_out(json_line(data) + "\n")

    def close(self) -> None:
        pass


def usage_line(result: Any) -> str:
    """The one-line token and cost summary of a run (``RunResult``)."""
    usage = result.usage
    assistant = sum(1 for m in result.messages if getattr(m, "role", None) == "assistant")
    parts = [f"{usage.input + usage.cache_read:,} tokens in", f"{usage.output:,} out"]
    if usage.cache_read:
        parts[0] += f" ({usage.cache_read:,} cached)"
    if usage.cost.total:
        parts.append(f"${usage.cost.total:.4f}")
    parts.append(f"{assistant} turn{'s' if assistant != 1 else ''}")
    return "· " + " · ".join(parts)


def is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is a terminal."""
    return bool(getattr(stream, "isatty", lambda: False)())


def _message_text(message: Any) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    return " ".join(getattr(b, "text", f"[{getattr(b, 'type', '?')}]") for b in content)
