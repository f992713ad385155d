"""Compaction (docs/compaction.md): accounting, the cut, the summary, and an agent compacting a
long conversation with the faux provider (its usage is counted from each real request)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from piagent import Agent, AgentBusyError, Compaction, CompactionError, TextContent, tool
from piagent.ai import AssistantMessage, Context, UserMessage
from piagent.ai.overflow import context_window
from piagent.ai.tokens import estimate_tokens
from piagent.ai.types import ToolResultMessage, Usage
from piagent.compaction import (
    SUMMARY_PREFIX,
    CompactionSummary,
    estimate_context_tokens,
    find_cut,
    plan_compaction,
    run_compaction,
)
from piagent.compaction._summary import INITIAL_PROMPT, SYSTEM_PROMPT, TURN_PREFIX_PROMPT, UPDATE_PROMPT
from piagent.testing import FauxProvider, faux_message, faux_tool_call, register_faux_provider

WINDOW = 4000
TOO_LONG = "prompt is too long: {} tokens > {} maximum"


def request_tokens(context: Context) -> int:
    """What the faux provider counts for a request (its usage.input)."""
    parts = [context.system_prompt or ""]
    parts += [json.dumps(m.to_dict(), sort_keys=True, default=str) for m in context.messages]
    parts += [
        json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters})
        for t in context.tools or []
    ]
    return -(-len("\n".join(parts)) // 4)


class Script:
    """A faux model with a real window: a request larger than ``limit`` is refused with Anthropic's
    error; summary requests get a summary; other requests call ``read`` ``reads`` times, then answer."""

    def __init__(self, limit: int = WINDOW, reads: int = 0, refusal: str = TOO_LONG) -> None:
        self.limit = limit
        self.refusal = refusal
        self.reads = reads
        self.summaries: list[str] = []  # the prompt of each summary request
        self.sizes: list[int] = []  # the size of each conversation request
        self.on_summary: Any = None

    def __call__(self, context: Context, options: Any, state: Any, model: Any) -> AssistantMessage:
        size = request_tokens(context)
        if size > self.limit:
            return faux_message("", stop_reason="error", error_message=self.refusal.format(size, self.limit))
        if context.system_prompt == SYSTEM_PROMPT:
            self.summaries.append(context.messages[0].content[0].text)
            if self.on_summary is not None:
                self.on_summary(options)
            return faux_message(f"## Goal\nRead the files (summary {len(self.summaries)})")
        self.sizes.append(size)
        if self.reads:
            self.reads -= 1
            return faux_message([faux_tool_call("read", {"path": f"f{self.reads}.txt"})])
        return faux_message("Done.")


@tool
def read(path: str) -> str:
    """Read a file."""
    return f"{path}: " + "lorem ipsum dolor sit amet " * 60  # about 400 tokens


@pytest.fixture
def small() -> Iterator[FauxProvider]:
    provider = register_faux_provider(models=[{"id": "small", "context_window": WINDOW, "max_tokens": 256}])
    yield provider
    provider.unregister()


def scripted(provider: FauxProvider, script: Script, count: int = 200) -> None:
    provider.set_responses([script] * count)


def kinds(events: list[Any]) -> list[str]:
    return [e.type for e in events if e.type.startswith("compaction")]


# --------------------------------------------------------------------------- accounting


def answer(text: str, total: int, timestamp: int = 0) -> AssistantMessage:
    message = faux_message(text, usage=Usage(input=total - 10, output=10, total_tokens=total))
    if timestamp:
        message.timestamp = timestamp
    return message


def test_the_context_is_the_last_reported_usage_plus_an_estimate_of_what_came_after() -> None:
    messages = [UserMessage("a" * 400), answer("ok", 500), UserMessage("b" * 40), UserMessage("c" * 41)]
    estimate = estimate_context_tokens(messages)
    assert (estimate.usage_tokens, estimate.trailing_tokens, estimate.usage_index) == (500, 10 + 11, 1)
    assert estimate.tokens == 521


def test_failed_answers_and_answers_from_before_a_compaction_are_not_trusted() -> None:
    failed = faux_message("", stop_reason="error", error_message="boom", usage=Usage(total_tokens=9999))
    summary = CompactionSummary.of("s", 9000)
    stale = answer("kept", 9000, timestamp=summary.timestamp - 1)
    estimate = estimate_context_tokens([summary, stale, failed])
    assert estimate.usage_index is None
    assert estimate.tokens == sum(estimate_tokens(m) for m in (summary, stale, failed))


# --------------------------------------------------------------------------- the cut


def call(tool_id: str) -> AssistantMessage:
    return faux_message([faux_tool_call("read", {"path": "x"}, tool_id)])


def result(tool_id: str, chars: int) -> ToolResultMessage:
    return ToolResultMessage(tool_id, "read", [TextContent("r" * chars)])


def test_the_cut_never_separates_a_tool_call_from_its_result() -> None:
    messages = [UserMessage("u" * 400), call("1"), result("1", 400), call("2"), result("2", 4000)]
    cut = find_cut(messages, 0, keep_recent_tokens=500)  # the budget runs out inside the last result
    assert cut.first_kept == 3 and messages[cut.first_kept].role == "assistant"
    assert (cut.split, cut.turn_start) == (True, 0)  # the turn began with the user message


def test_a_cut_at_a_user_message_is_not_a_split_turn_and_everything_fitting_is_nothing_to_compact() -> None:
    messages = [UserMessage("u" * 4000), faux_message("a" * 40), UserMessage("v" * 400), faux_message("b")]
    cut = find_cut(messages, 0, keep_recent_tokens=100)
    assert (cut.first_kept, cut.split) == (2, False)
    assert plan_compaction(messages, Compaction(keep_recent_tokens=100_000), 0) is None


def test_a_split_turn_summarises_the_turns_beginning_apart_and_joins_both() -> None:
    messages = [UserMessage("old question"), faux_message("old answer"), UserMessage("u" * 400)]
    messages += [call("1"), result("1", 400), call("2"), result("2", 4000)]
    plan = plan_compaction(messages, Compaction(keep_recent_tokens=500), 0)
    assert plan is not None and plan.first_kept == 5
    prompts: list[str] = []

    def summarizer(model: Any, context: Context) -> AssistantMessage:
        prompts.append(context.messages[0].content[0].text)
        return faux_message(f"part {len(prompts)}", usage=Usage(input=100, output=5, total_tokens=105))

    done = run_compaction(plan, register_faux_provider().get_model(), summarizer)
    assert [INITIAL_PROMPT in prompts[0], TURN_PREFIX_PROMPT in prompts[1]] == [True, True]
    assert "[User]: old question" in prompts[0] and "u" * 400 not in prompts[0]
    assert "[User]: uuu" in prompts[1] and '[Assistant tool calls]: read(path="x")' in prompts[1]
    assert done.split_turn and done.summary.startswith("part 1") and done.summary.endswith("part 2")
    assert done.usage.total_tokens == 210
    assert [m.role for m in done.messages] == ["user", "assistant", "toolResult"]
    assert done.messages[0].content[0].text.startswith(SUMMARY_PREFIX)


# --------------------------------------------------------------------------- an agent


def test_a_long_conversation_is_compacted_before_each_request_that_would_not_fit(small: FauxProvider) -> None:
    script = Script(reads=12)
    scripted(small, script)
    agent = Agent(model=small.get_model(), tools=[read])
    events: list[Any] = []
    agent.subscribe(events.append)
    done = agent.prompt("Read the twelve files.")
    assert done.error_message is None and done.text == "Done."
    compactions = [e for e in events if e.type == "compaction_end"]
    assert len(compactions) >= 2 and all(e.reason == "threshold" and e.result for e in compactions)
    assert max(script.sizes) <= WINDOW - WINDOW // 4  # every request left the reserve free
    # one prompt and its tool calls: a single turn, whose beginning is summarised apart the first time
    assert TURN_PREFIX_PROMPT in script.summaries[0] and UPDATE_PROMPT in script.summaries[1]
    assert "<previous-summary>\nNo earlier history." in script.summaries[1]
    assert "Read the files (summary 1)" in script.summaries[1]
    first = agent.state.messages[0]
    assert isinstance(first, CompactionSummary) and first.summary.endswith(f"(summary {len(script.summaries)})")
    assert all(e.result.usage.total_tokens > 0 for e in compactions)  # what each summary cost


def test_without_compaction_the_same_conversation_ends_with_the_overflow(small: FauxProvider) -> None:
    scripted(small, Script(reads=12))
    agent = Agent(model=small.get_model(), tools=[read], compaction=None)
    done = agent.prompt("Read the twelve files.")
    assert done.stop_reason == "error" and "prompt is too long" in (done.error_message or "")


def test_an_overflow_is_compacted_and_the_request_sent_again_once(faux: FauxProvider) -> None:
    script = Script(limit=2500, reads=5)  # the model says 128,000 tokens; its server takes 2,500
    scripted(faux, script)
    agent = Agent(model=faux.get_model(), tools=[read], compaction=Compaction(keep_recent_tokens=600))
    events: list[Any] = []
    agent.subscribe(events.append)
    done = agent.prompt("Read the files.")
    assert done.text == "Done." and done.error_message is None
    ends = [e for e in events if e.type == "compaction_end"]
    assert [(e.reason, e.will_retry) for e in ends] == [("overflow", True)]
    types = [e.type for e in events]
    retry = types.index("compaction_end")
    assert types[retry - 1 : retry + 3] == ["compaction_start", "compaction_end", "agent_start", "turn_start"]
    assert types[retry - 2] == "agent_end"  # the failed attempt's run ended first
    assert not any(m.role == "assistant" and m.stop_reason == "error" for m in agent.state.messages)


def test_when_the_retried_request_still_overflows_the_run_ends_saying_so(faux: FauxProvider) -> None:
    scripted(faux, Script(limit=2500))
    agent = Agent(model=faux.get_model(), compaction=Compaction(keep_recent_tokens=1000))
    agent.prompt("hi")
    events: list[Any] = []
    agent.subscribe(events.append)
    done = agent.prompt("x" * 12_000)  # 3,000 tokens: no summary of what came before makes it fit
    assert done.stop_reason == "error"
    assert (done.error_message or "").startswith(
        "The context still exceeds the model's context window after compaction"
    )
    assert "prompt is too long" in (done.error_message or "")
    assert [(e.reason, e.will_retry) for e in events if e.type == "compaction_end"] == [("overflow", True)]


def test_an_overflow_error_stating_the_window_is_compacted_for_that_window_with_the_defaults(
    faux: FauxProvider,
) -> None:
    """A model declared with a guess (128,000) whose server takes 2,500 and says so: the stated
    window is learned, so the default settings compact for it, now and before later requests."""
    script = Script(limit=2500, reads=5)
    scripted(faux, script)
    model = faux.get_model()
    agent = Agent(model=model, tools=[read])
    events: list[Any] = []
    agent.subscribe(events.append)
    done = agent.prompt("Read the files.")
    assert done.text == "Done." and done.error_message is None
    assert context_window(model) == 2500 and model.context_window == 128000
    script.reads = 5
    assert agent.prompt("Read them again.").text == "Done."
    reasons = [e.reason for e in events if e.type == "compaction_end" and e.result is not None]
    assert reasons[0] == "overflow" and "threshold" in reasons[1:]
    assert max(script.sizes) <= 2500


def test_an_overflow_with_nothing_to_compact_ends_the_run_with_it(faux: FauxProvider) -> None:
    scripted(faux, Script(limit=2500, reads=5, refusal="prompt is too long"))  # the window unsaid
    agent = Agent(model=faux.get_model(), tools=[read])  # keeps 20,000 tokens: everything
    events: list[Any] = []
    agent.subscribe(events.append)
    done = agent.prompt("Read the files.")
    assert done.stop_reason == "error" and "prompt is too long" in (done.error_message or "")
    ends = [e for e in events if e.type == "compaction_end"]
    assert [(e.reason, e.result, e.error_message) for e in ends] == [
        ("overflow", None, "Nothing to compact: the transcript fits in what compaction keeps")
    ]


def test_a_compaction_is_aborted_with_the_run(small: FauxProvider) -> None:
    script = Script(reads=12)
    scripted(small, script)
    agent = Agent(model=small.get_model(), tools=[read])
    script.on_summary = lambda options: agent.abort()
    events: list[Any] = []
    agent.subscribe(events.append)
    done = agent.prompt("Read the twelve files.")
    ends = [e for e in events if e.type == "compaction_end"]
    assert len(ends) == 1 and ends[0].aborted and ends[0].result is None
    assert done.stop_reason == "aborted"
    assert not any(isinstance(m, CompactionSummary) for m in agent.state.messages)


def test_steering_queued_during_a_compaction_is_delivered_after_it(small: FauxProvider) -> None:
    script = Script(reads=12)
    scripted(small, script)
    agent = Agent(model=small.get_model(), tools=[read])
    script.on_summary = lambda options: agent.steer("Also count the words.") if len(script.summaries) == 1 else None
    done = agent.prompt("Read the twelve files.")
    assert done.error_message is None
    texts = [m.content[0].text for m in agent.state.messages if m.role == "user" and isinstance(m.content, list)]
    assert "Also count the words." in texts or any("Also count the words." in s for s in script.summaries)


def test_compact_on_demand_summarises_and_says_when_there_is_nothing_to_compact(faux: FauxProvider) -> None:
    script = Script(reads=3)
    scripted(faux, script)
    agent = Agent(model=faux.get_model(), tools=[read], compaction=Compaction(keep_recent_tokens=100))
    agent.prompt("Read three files.")
    events: list[Any] = []
    agent.subscribe(events.append)
    compacted = agent.compact("the file names")
    assert kinds(events) == ["compaction_start", "compaction_end"] and events[0].reason == "manual"
    assert "Also focus on: the file names" in script.summaries[-1]
    assert agent.state.messages == compacted.messages and isinstance(agent.state.messages[0], CompactionSummary)
    with pytest.raises(CompactionError, match="Nothing to compact"):
        agent.compact()


def test_a_keyboard_interrupt_from_a_listener_during_compact_aborts_it_and_propagates(faux: FauxProvider) -> None:
    """docs/loop.md#rule-22: a listener's KeyboardInterrupt aborts what runs and is raised after."""
    script = Script(reads=3)
    scripted(faux, script)
    agent = Agent(model=faux.get_model(), tools=[read], compaction=Compaction(keep_recent_tokens=100))
    agent.prompt("Read three files.")
    before = list(agent.state.messages)
    signals: list[Any] = []

    def interrupt(event: Any, signal: Any) -> None:
        if event.type == "compaction_start":
            signals.append(signal)
            raise KeyboardInterrupt

    agent.subscribe(interrupt)
    with pytest.raises(KeyboardInterrupt):
        agent.compact()
    assert signals[0].aborted and agent.state.is_streaming is False
    assert agent.state.messages == before  # the aborted compaction changed nothing


def test_compact_during_a_run_is_refused(faux: FauxProvider) -> None:
    started, release = threading.Event(), threading.Event()

    def slow(context: Context, options: Any, state: Any, model: Any) -> AssistantMessage:
        started.set()
        release.wait(10)
        return faux_message("ok")

    faux.set_responses([slow])
    agent = Agent(model=faux.get_model())
    future = agent.prompt("hi", wait=False)
    assert started.wait(10)
    with pytest.raises(AgentBusyError):
        agent.compact()
    release.set()
    assert future.result(10).text == "ok"


def test_compaction_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        Compaction(reserve_tokens=-1)
    with pytest.raises(TypeError):
        Compaction(keep_recent_tokens="many")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Agent(compaction={"reserve_tokens": 1})  # type: ignore[arg-type]
    assert Compaction().limits(2048) == (512, 512) and Compaction().limits(200_000) == (16384, 20000)


def test_events_to_dict_use_pis_names(small: FauxProvider) -> None:
    scripted(small, Script(reads=12))
    agent = Agent(model=small.get_model(), tools=[read])
    events: list[Any] = []
    agent.subscribe(events.append)
    agent.prompt("Read the twelve files.")
    end = next(e for e in events if e.type == "compaction_end").to_dict()
    assert end["type"] == "compaction_end" and end["reason"] == "threshold" and end["willRetry"] is False
    assert set(end["result"]) >= {"summary", "tokensBefore", "estimatedTokensAfter", "usage"}
