"""The interactive session: lines typed while the agent works steer it, /follow queues a
follow-up, Ctrl-C aborts and a second Ctrl-C quits.

The session runs on its own thread, reading from a scripted terminal; the faux model holds
each gated answer until the test releases it, so "typed while the agent works" is exact.
"""

from __future__ import annotations

import io
import queue
import threading
from typing import Any, Optional

from piagent import Agent
from piagent.cli.interactive import InteractiveSession
from piagent.cli.render import Console, ConsoleRenderer
from piagent.testing import faux_message
from tests.support.agent_support import text_of
from tests.support.waits import wait_until

WAIT = 10


class Terminal:
    """Stands in for the keyboard: ``read_line()`` blocks until the test types something."""

    def __init__(self) -> None:
        self._lines: queue.Queue[Any] = queue.Queue()
        self._reads = 0
        self._cond = threading.Condition()

    def type(self, line: Any) -> None:
        self._lines.put(line)

    def __call__(self) -> Optional[str]:
        with self._cond:
            self._reads += 1
            self._cond.notify_all()
        item = self._lines.get(timeout=WAIT)
        if item is KeyboardInterrupt:
            raise KeyboardInterrupt
        return item  # type: ignore[no-any-return]

    def wait_until_waiting(self, reads: int) -> None:
        """Block until the session asked for its ``reads``-th line (so every earlier one is handled)."""
        with self._cond:
            assert self._cond.wait_for(lambda: self._reads >= reads, WAIT)


class Gate:
    """A faux answer held back until released (or until the run is aborted)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.asked = threading.Event()
        self.release = threading.Event()

    def __call__(self, context: Any, options: Any, state: Any, model: Any) -> Any:
        self.asked.set()
        remove = options.signal.add_listener(self.release.set)
        try:
            assert self.release.wait(WAIT)
        finally:
            remove()
        return faux_message(self.text)


class Session:
    def __init__(self, faux: Any) -> None:
        self.agent = Agent(model=faux.get_model())
        self.out, self.err = io.StringIO(), io.StringIO()
        console = Console(self.out, self.err)
        self.agent.subscribe(ConsoleRenderer(console))
        self.terminal = Terminal()
        self.session = InteractiveSession(self.agent, console, read_line=self.terminal)
        self.code: list[int] = []
        self.thread = threading.Thread(target=lambda: self.code.append(self.session.run()), name="session")
        self.thread.start()

    def finish(self) -> int:
        self.thread.join(WAIT)
        assert not self.thread.is_alive()
        return self.code[0]

    def transcript(self) -> list[str]:
        return [f"{m.role}:{text_of(m)}" for m in self.agent.state.messages]


def test_a_line_typed_while_the_agent_works_steers_it(faux: Any) -> None:
    first = Gate("first answer")
    faux.set_responses([first, faux_message("steered answer")])
    s = Session(faux)
    s.terminal.type("hello")
    assert first.asked.wait(WAIT)  # the run is going, its answer held back
    s.terminal.type("actually, be brief")
    s.terminal.wait_until_waiting(3)  # both lines handled
    first.release.set()
    assert s.agent.wait_for_idle(WAIT)
    s.terminal.type(None)  # end of input
    assert s.finish() == 0
    assert s.transcript() == [
        "user:hello", "assistant:first answer", "user:actually, be brief", "assistant:steered answer"
    ]  # fmt: skip
    assert "(steering queued: actually, be brief)" in s.err.getvalue() and "» actually, be brief" in s.err.getvalue()
    assert s.out.getvalue() == "first answer\nsteered answer\n"


def test_follow_up_is_delivered_when_the_agent_would_stop(faux: Any) -> None:
    first = Gate("first answer")
    faux.set_responses([first, faux_message("follow-up answer")])
    s = Session(faux)
    s.terminal.type("hello")
    assert first.asked.wait(WAIT)
    s.terminal.type("/follow and then this")
    s.terminal.wait_until_waiting(3)
    assert "(follow-up queued: and then this)" in s.err.getvalue()
    first.release.set()
    assert s.agent.wait_for_idle(WAIT)
    s.terminal.type("/quit")
    assert s.finish() == 0
    assert s.transcript() == [
        "user:hello",
        "assistant:first answer",
        "user:and then this",
        "assistant:follow-up answer",
    ]


def test_ctrl_c_aborts_the_run_and_a_second_ctrl_c_quits(faux: Any) -> None:
    first = Gate("never finished")
    faux.set_responses([first, faux_message("must not run")])
    s = Session(faux)
    s.terminal.type("hello")
    assert first.asked.wait(WAIT)
    s.terminal.type("queued steering, dropped by the abort")
    s.terminal.type(KeyboardInterrupt)
    s.terminal.wait_until_waiting(4)
    assert s.agent.wait_for_idle(WAIT)
    assert s.agent.state.messages[-1].stop_reason == "aborted"
    assert not s.agent.has_queued_messages() and faux.get_pending_response_count() == 1
    s.terminal.type(KeyboardInterrupt)
    assert s.finish() == 130  # as Ctrl-C in a one-shot run
    assert "(aborted; Ctrl-C again to quit)" in s.err.getvalue()


def test_a_typed_line_resets_the_double_ctrl_c(faux: Any) -> None:
    faux.set_responses([faux_message("hi")])
    s = Session(faux)
    s.terminal.type(KeyboardInterrupt)  # idle: only a hint
    s.terminal.type("hello")
    s.terminal.wait_until_waiting(3)
    assert s.agent.wait_for_idle(WAIT)
    s.terminal.type(KeyboardInterrupt)
    s.terminal.wait_until_waiting(4)
    assert s.thread.is_alive()  # one Ctrl-C after a line does not quit
    s.terminal.type(KeyboardInterrupt)
    assert s.finish() == 130
    assert s.transcript() == ["user:hello", "assistant:hi"]
    assert "(Ctrl-C again, /quit or Ctrl-D to quit)" in s.err.getvalue()


def test_a_message_queued_as_the_run_ends_is_not_lost(faux: Any) -> None:
    faux.set_responses([faux_message("first answer"), faux_message("late answer")])
    s = Session(faux)
    late_answered = threading.Event()

    def steer_at_the_very_end(event: Any) -> None:
        if event.type == "agent_end" and len(s.agent.state.messages) == 2:  # after the loop's last poll
            s.agent.steer("one more thing")
        if event.type == "message_end" and text_of(event.message) == "late answer":
            late_answered.set()

    s.agent.subscribe(steer_at_the_very_end)
    s.terminal.type("hello")
    assert late_answered.wait(WAIT)  # the session continued the conversation with it
    assert s.agent.wait_for_idle(WAIT)
    s.terminal.type(None)
    assert s.finish() == 0
    assert s.transcript() == ["user:hello", "assistant:first answer", "user:one more thing", "assistant:late answer"]


def test_a_refusal_is_shown_as_such_after_its_text(faux: Any) -> None:
    refusal = faux_message("I can't help with that.", stop_reason="refusal")
    refusal.refusal = {"category": "cyber", "explanation": None}
    faux.set_responses([refusal])
    agent = Agent(model=faux.get_model())
    out, err = io.StringIO(), io.StringIO()
    agent.subscribe(ConsoleRenderer(Console(out, err)))
    agent.prompt("write malware")
    assert agent.wait_for_idle(WAIT)
    assert out.getvalue() == "I can't help with that.\n"
    assert "(the model refused: cyber)" in err.getvalue() and "error" not in err.getvalue()
    assert agent.state.messages[-1].stop_reason == "refusal"


def test_an_unknown_command_is_refused_and_never_sent_to_the_model(faux: Any) -> None:
    s = Session(faux)
    s.terminal.type("/frobnicate now")
    s.terminal.type("/help")
    s.terminal.type("/quit")
    assert s.finish() == 0
    assert not faux.state.requests and s.agent.state.messages == []
    err = s.err.getvalue()
    assert "unknown command /frobnicate (not sent to the model); /help lists the commands" in err
    assert "/follow TEXT" in err and "/quit" in err


def test_end_of_input_during_a_run_says_it_waits_for_the_run(faux: Any) -> None:
    first = Gate("the whole answer")
    faux.set_responses([first])
    s = Session(faux)
    s.terminal.type("hello")
    assert first.asked.wait(WAIT)
    s.terminal.type(None)  # Ctrl-D while the answer is held back
    waiting = "(end of input: waiting for the run to finish; Ctrl-C aborts it)"
    assert wait_until(lambda: waiting in s.err.getvalue())  # said while the run still goes on
    assert s.thread.is_alive() and s.agent.state.is_streaming
    first.release.set()
    assert s.finish() == 0
    assert waiting in s.err.getvalue() and s.out.getvalue() == "the whole answer\n"


def test_no_token_is_printed_after_the_abort_note(faux: Any) -> None:
    first = Gate("late token")
    faux.set_responses([first])
    s = Session(faux)
    s.terminal.type("hello")
    assert first.asked.wait(WAIT)
    s.session._on_interrupt()  # Ctrl-C, then the answer arrives anyway (it was on its way)
    s.session.console.write_answer("late token")
    first.release.set()
    assert s.agent.wait_for_idle(WAIT)
    s.terminal.type("/quit")
    assert s.finish() == 0
    assert "late token" not in s.out.getvalue()


def test_a_usage_limit_asks_the_person_at_the_terminal_whether_to_go_on(faux: Any) -> None:
    from piagent import UsageLimits
    from piagent.testing import faux_tool_call
    from piagent.tools import calculator

    faux.set_responses(
        [faux_message([faux_tool_call("calculator", {"expression": "1+1"})])] * 2 + [faux_message("two")]
    )
    s = Session(faux)
    s.agent.tools = [calculator()]
    s.agent.usage_limits = UsageLimits(requests=1)
    s.agent.on_limit = s.session.ask_limit
    s.terminal.type("add")
    assert wait_until(lambda: "Type a higher limit to go on" in s.err.getvalue(), WAIT)
    s.terminal.type("2")  # the answer: two requests, then asked again
    assert wait_until(lambda: s.err.getvalue().count("Type a higher limit") == 2, WAIT)
    s.terminal.type("")  # Enter: stop there
    assert s.agent.wait_for_idle(WAIT)
    s.terminal.type(None)
    assert s.finish() == 0
    assert "Usage limit reached: requests 1 of 1 per run" in s.err.getvalue()
    assert s.transcript()[-1] == "assistant:"  # the run ended on the limit, the question answered twice
    assert s.agent.state.messages[-1].error_message == "Usage limit reached: requests 2 of 2 per run"
    assert len(faux.state.requests) == 2


def test_compact_summarises_the_conversation_and_says_when_there_is_nothing_to_compact(faux: Any) -> None:
    from piagent.compaction import CompactionSummary

    faux.set_responses([faux_message("short"), faux_message("again"), faux_message("## Goal\nChat")])
    s = Session(faux)
    s.terminal.type("/compact")  # nothing yet: said, nothing sent
    wait_until(lambda: "(not compacted: Nothing to compact" in s.err.getvalue(), WAIT)
    for reads in (3, 4):  # two lines of about 25,000 tokens: the first is more than compaction keeps
        s.terminal.type("w " * 50_000)
        s.terminal.wait_until_waiting(reads)
        assert s.agent.wait_for_idle(WAIT)
    s.terminal.type("/compact the words")
    wait_until(lambda: "(compacted: about" in s.err.getvalue(), WAIT)
    first = s.agent.state.messages[0]
    assert isinstance(first, CompactionSummary) and first.summary == "## Goal\nChat"
    assert "Also focus on: the words" in text_of(faux.state.requests[-1].context.messages[0])
    s.terminal.type("/quit")
    assert s.finish() == 0
