"""How the ``piagent`` command shows a run: listeners that write agent events to a console.

* :class:`ConsoleRenderer`: the answer streams to stdout as it arrives; thinking, tool calls
  (name, arguments, elapsed time, result summary), injected steering/follow-up messages and
  errors go to stderr. On a terminal a spinner line shows the tools still running.
* :class:`JsonRenderer`: one JSON line per event on stdout (the event's ``to_dict()``).

Listeners run on the agent's run thread; the spinner runs on its own thread. Every write
goes through :class:`Console`, which serialises them.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from typing import IO, Any, Optional

__all__ = ["Console", "ConsoleRenderer", "JsonRenderer", "summarize_args", "summarize_result"]

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
TICK = 0.1
SUMMARY_WIDTH = 100


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
    lines = text.count("\n") + 1 if text else 0
    summary = _shorten(text) if text else ("(no output)" if not images else "")
    extras = []
    if lines > 1:
        extras.append(f"{lines} lines")
    if images:
        extras.append(f"{images} image{'s' if images > 1 else ''}")
    return summary + (f" ({', '.join(extras)})" if extras else "")


class Console:
    """stdout and stderr behind one lock, with an optional status line on a terminal's stderr."""

    def __init__(self, out: IO[str], err: IO[str], color: Optional[bool] = None) -> None:
        self.out = out
        self.err = err
        self.lock = threading.RLock()
        self.is_tty = bool(getattr(err, "isatty", lambda: False)())
        self.color = self.is_tty if color is None else color
        self._status = ""
        self.out_at_line_start = True
        self.out_closed = False

    def style(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

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
            try:
                self.out.write(text)
                self.out.flush()
            except BrokenPipeError:
                self._drop_out()
                return
            if text:
                self.out_at_line_start = text.endswith("\n")

    def _drop_out(self) -> None:
        self.out_closed = True
        try:  # so that the interpreter's own flush at exit does not complain either
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.out.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            pass

    def end_out_line(self) -> None:
        """Finish the answer's current line, so that stderr notes start on their own line."""
        with self.lock:
            if not self.out_at_line_start:
                self.write_out("\n")

    def note(self, text: str) -> None:
        """One line on stderr."""
        with self.lock:
            self._clear_status()
            self.err.write(text + "\n")
            self.err.flush()

    def status(self, text: str) -> None:
        """Replace the status line (terminals only)."""
        if not self.is_tty:
            return
        with self.lock:
            self._clear_status()
            if text:
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
        if getattr(message, "role", None) != "user":
            return
        self._user_messages += 1
        if self._user_messages > 1 and self.show_injected:  # a steering or follow-up message
            self.console.end_out_line()
            self.console.note(self.console.style(f"» {_message_text(message)}", "36"))

    def _on_message_update(self, event: Any) -> None:
        update = event.assistant_message_event
        if update.type == "text_delta":
            if self._thinking:
                self._thinking = False
                self.console.note("")
            self.console.write_out(update.delta)
        elif update.type == "thinking_delta":
            with self.console.lock:
                self._thinking = True
                self.console.err.write(self.console.style(update.delta, "2"))
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
            self.console.note(self.console.style(f"{label}: {text}", "31"))
        elif message.stop_reason == "refusal":
            category = (getattr(message, "refusal", None) or {}).get("category")
            self.console.end_out_line()
            self.console.note(self.console.style(f"(the model refused{': ' + category if category else ''})", "33"))

    def _on_tool_execution_start(self, event: Any) -> None:
        self.console.end_out_line()
        self.console.note(self.console.style(f"→ {event.tool_name}({summarize_args(event.args)})", "33"))
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
        self.console.note(self.console.style(line, code))

    def _on_agent_end(self, event: Any) -> None:
        self.console.end_out_line()


class JsonRenderer:
    """Listener writing each event as one line of JSON (pi's camelCase form)."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def __call__(self, event: Any) -> None:
        self.console.write_out(json.dumps(event.to_dict(), ensure_ascii=False, default=str) + "\n")

    def close(self) -> None:
        pass


def _message_text(message: Any) -> str:
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    return " ".join(getattr(b, "text", f"[{getattr(b, 'type', '?')}]") for b in content)
