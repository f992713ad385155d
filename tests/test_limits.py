"""Usage limits (docs/limits.md): an agent over a real Anthropic-shaped server on 127.0.0.1.

Each scripted answer reports 10 input and 5 output tokens; the model's prices make an answer
cost $0.015, so a limit's arithmetic is visible in the tests.
"""

from __future__ import annotations

import logging
import queue
import threading
from pathlib import Path
from typing import Any, Optional

import pytest

from piagent import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    LimitReached,
    Usage,
    UsageGuard,
    UsageLimitExceeded,
    UsageLimits,
    UserMessage,
    run_agent_loop,
)
from piagent.ai import Cost, TextContent
from piagent.exceptions import InvalidTypeError, InvalidValueError
from piagent.sessions import JsonlSession
from tests.reliability.wires import ANTHROPIC
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.timeout(20)

KEY = "sk-limits-0123456789abcdef"
ANSWER_COST = 0.015  # 10 input + 5 output tokens at $1,000 per million


@pytest.fixture
def server() -> Any:
    with ScriptedServer() as s:
        yield s


def echo_tool(ran: list[str]) -> AgentTool:
    def execute(tool_call_id: str, args: dict[str, Any], signal: Any, on_update: Any) -> AgentToolResult:
        ran.append(args["text"])
        return AgentToolResult([TextContent(f"echo {args['text']}")])

    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return AgentTool("echo", "Echo the text back", schema, execute)


def make_agent(server: ScriptedServer, ran: list[str], **options: Any) -> Agent:
    return Agent(
        model=ANTHROPIC.model(server.url, cost=Cost(1000, 1000)),
        tools=[echo_tool(ran)],
        get_api_key=lambda provider: KEY,
        **options,
    )


def call(server: ScriptedServer, text: str) -> None:
    server.reply(ANTHROPIC.tool_call(f"call_{text}", "echo", {"text": text}))


def roles(agent: Agent) -> list[str]:
    return [m.role for m in agent.state.messages]


def test_a_request_limit_ends_the_run_before_the_request_that_would_exceed_it(
    server: ScriptedServer, tmp_path: Path
) -> None:
    ran: list[str] = []
    path = tmp_path / "s.jsonl"
    agent = make_agent(server, ran, usage_limits=UsageLimits(requests=2), session=JsonlSession(path))
    events: list[Any] = []
    agent.subscribe(events.append)
    call(server, "one")
    call(server, "two")

    result = agent.prompt("go")

    assert len(server.requests) == 2 and ran == ["one", "two"]
    assert result.stop_reason == "error"
    assert result.error_message == "Usage limit reached: requests 2 of 2 per run"
    assert roles(agent) == ["user", "assistant", "toolResult", "assistant", "toolResult", "assistant"]
    limit_events = [e for e in events if e.type == "usage_limit"]
    assert [(e.reached.name, e.reached.used, e.raised) for e in limit_events] == [("requests", 2, None)]
    # the session holds the whole transcript, ending with the message that says why
    stored = JsonlSession(path).messages()
    assert [m.role for m in stored] == roles(agent) and stored[-1].error_message == result.error_message

    agent.usage_limits = UsageLimits(requests=3)  # raised: continuing answers the tool result
    server.reply(ANTHROPIC.text("Done."))
    again = agent.continue_()
    assert again.text == "Done." and again.stop_reason == "stop"
    assert ANTHROPIC.history(server.requests[-1].json) == [
        "user:go",
        "call:echo",
        "result:echo one",
        "call:echo",
        "result:echo two",
    ]


def test_a_cost_reached_by_a_response_stops_its_tool_calls_and_the_next_request(
    server: ScriptedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="piagent")
    ran: list[str] = []
    agent = make_agent(server, ran, usage_limits=UsageLimits(cost=0.02))
    call(server, "one")
    call(server, "two")

    result = agent.prompt("go")

    assert len(server.requests) == 2
    assert ran == ["one"]  # the second answer reached $0.03: its call did not run
    refused = agent.state.messages[-2]
    assert refused.role == "toolResult" and refused.is_error
    assert refused.text == "Usage limit reached: cost $0.0300 of $0.02 per run: the call was not run"
    assert (
        result.stop_reason == "error" and result.error_message == "Usage limit reached: cost $0.0300 of $0.02 per run"
    )
    assert agent.usage.cost == pytest.approx(2 * ANSWER_COST)
    assert agent.usage.requests == 2 and agent.usage.tool_calls == 1
    (record,) = [r for r in caplog.records if "Usage limit" in r.getMessage()]
    assert record.levelno == logging.INFO and record.exc_info is None  # a budget at work, not a failure


def test_a_run_whose_last_answer_reaches_a_limit_ends_normally(server: ScriptedServer) -> None:
    agent = make_agent(server, [], usage_limits=UsageLimits(total_tokens=15))
    server.reply(ANTHROPIC.text("Hi."))
    result = agent.prompt("hello")
    assert result.stop_reason == "stop" and result.text == "Hi."
    assert agent.usage.total_tokens == 15 and agent.usage.input_tokens == 10 and agent.usage.output_tokens == 5


def test_the_agent_counts_what_its_runs_use_without_any_limit(server: ScriptedServer) -> None:
    agent = make_agent(server, [])
    call(server, "one")
    server.reply(ANTHROPIC.text("Done."))
    agent.prompt("go")
    server.reply(ANTHROPIC.text("Again."))
    agent.prompt("again")
    usage = agent.usage
    assert (usage.requests, usage.tool_calls, usage.input_tokens, usage.output_tokens) == (3, 1, 30, 15)
    assert usage.cost == pytest.approx(3 * ANSWER_COST)


def test_the_tool_call_limit_refuses_the_call_past_it_and_ends_the_run(server: ScriptedServer) -> None:
    ran: list[str] = []
    agent = make_agent(server, ran, usage_limits=UsageLimits(tool_calls=2))
    call(server, "one")
    call(server, "two")
    call(server, "three")

    result = agent.prompt("go")

    assert ran == ["one", "two"] and len(server.requests) == 3
    assert agent.state.messages[-2].text.startswith("Usage limit reached: tool calls 2 of 2 per run")
    assert result.error_message == "Usage limit reached: tool calls 2 of 2 per run"


def test_an_agent_scope_limit_counts_every_run_of_the_agent(server: ScriptedServer) -> None:
    ran: list[str] = []
    limits = [UsageLimits(requests=10), UsageLimits(requests=3, scope="agent")]
    agent = make_agent(server, ran, usage_limits=limits)
    call(server, "one")
    server.reply(ANTHROPIC.text("First done."))
    assert agent.prompt("first").text == "First done."

    call(server, "two")
    result = agent.prompt("second")

    assert len(server.requests) == 3 and ran == ["one", "two"]
    assert result.error_message == "Usage limit reached: requests 3 of 3 for this agent"
    assert agent.usage.requests == 3


def test_on_limit_asks_a_person_on_another_thread_and_the_raised_limit_lets_the_run_go_on(
    server: ScriptedServer,
) -> None:
    asked: queue.Queue[LimitReached] = queue.Queue()
    answers: queue.Queue[Optional[UsageLimits]] = queue.Queue()
    hook_threads: list[str] = []

    def on_limit(reached: LimitReached, signal: Any) -> Optional[UsageLimits]:
        hook_threads.append(threading.current_thread().name)
        asked.put(reached)
        return answers.get(timeout=10)  # the run waits for the person's answer

    def person() -> None:
        reached = asked.get(timeout=10)
        answers.put(reached.limits.replace(cost=reached.limit * 10))  # "yes, spend up to ten times more"

    ran: list[str] = []
    agent = make_agent(server, ran, usage_limits=UsageLimits(cost=0.02, scope="agent"), on_limit=on_limit)
    events: list[Any] = []
    agent.subscribe(events.append)
    call(server, "one")
    call(server, "two")
    server.reply(ANTHROPIC.text("Done."))
    thread = threading.Thread(target=person, name="person")
    thread.start()

    result = agent.prompt("go", wait=False).result(timeout=15)
    thread.join(10)

    assert result.text == "Done." and ran == ["one", "two"]
    assert hook_threads == ["piagent-run"]  # asked on the run thread, answered from the person's
    (event,) = [e for e in events if e.type == "usage_limit"]
    assert event.reached.name == "cost" and event.raised is not None and event.raised.cost == pytest.approx(0.2)
    assert agent.usage_limits == (UsageLimits(cost=0.2, scope="agent"),)  # an agent's limit stays raised


def test_on_limit_declining_ends_the_run_and_an_abort_while_it_waits_ends_it_too(server: ScriptedServer) -> None:
    agent = make_agent(server, [], usage_limits=UsageLimits(requests=1), on_limit=lambda reached, signal: None)
    call(server, "one")
    assert agent.prompt("go").error_message == "Usage limit reached: requests 1 of 1 per run"

    waiting = threading.Event()

    def on_limit(reached: LimitReached, signal: Any) -> Optional[UsageLimits]:
        waiting.set()
        signal.wait(10)  # a person who never answers; the abort ends the wait
        return reached.limits.replace(requests=100)

    agent.on_limit = on_limit
    call(server, "two")
    future = agent.prompt("again", wait=False)
    assert waiting.wait(10)
    agent.abort()
    result = future.result(timeout=10)
    assert result.stop_reason == "aborted" and len(server.requests) == 2


def test_usage_another_feature_reports_through_an_event_counts(server: ScriptedServer) -> None:
    """The documented point: an event with a ``usage`` (a compaction summary's) is counted as a request."""

    class SummaryEvent:
        type = "summary_end"

        def __init__(self, usage: Usage) -> None:
            self.usage = usage

    summary = Usage(input=100, output=20, total_tokens=120)
    summary.cost.total = 0.5
    emit_through: list[Any] = []

    def summarise_first(request: Any, signal: Any) -> None:  # a feature calling a model before the request
        if not emit_through[1:]:
            emit_through[0](SummaryEvent(summary))
            emit_through.append("summarised")

    guard = UsageGuard([UsageLimits(requests=3, cost=0.5 + ANSWER_COST)])
    model = ANTHROPIC.model(server.url, cost=Cost(1000, 1000))
    config = AgentLoopConfig(model=model, api_key=KEY, prepare_request=summarise_first)
    config, emit = guard.install(config, lambda event: None)
    emit_through.append(emit)
    call(server, "one")
    context = AgentContext("", [], [echo_tool([])])

    with pytest.raises(UsageLimitExceeded) as caught:
        run_agent_loop([UserMessage("hello")], context, config, emit)

    assert len(server.requests) == 1  # the summary and one answer spent the budget
    assert guard.run.totals().requests == 2 and guard.run.totals().cost == pytest.approx(0.5 + ANSWER_COST)
    assert str(caught.value) == "Usage limit reached: cost $0.5150 of $0.515 per run"


@pytest.mark.parametrize(
    "value",
    [UsageLimits(requests=1), [UsageLimits(cost=1.5), UsageLimits(tool_calls=3, scope="agent")], None],
)
def test_usage_limits_take_one_limit_or_one_per_scope(value: Any) -> None:
    agent = Agent(usage_limits=value)
    expected = () if value is None else (value,) if isinstance(value, UsageLimits) else tuple(value)
    assert agent.usage_limits == expected


def test_bad_limits_are_refused_with_a_clear_error() -> None:
    with pytest.raises(InvalidValueError, match="requests must be a non-negative number"):
        UsageLimits(requests=-1)
    with pytest.raises(InvalidValueError, match="tool_calls must be an int"):
        UsageLimits(tool_calls=1.5)
    with pytest.raises(InvalidValueError, match="scope must be"):
        UsageLimits(scope="day")  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="at most one UsageLimits per scope"):
        Agent(usage_limits=[UsageLimits(requests=1), UsageLimits(cost=1)])
    with pytest.raises(InvalidTypeError, match="usage_limits must be a UsageLimits"):
        Agent(usage_limits={"requests": 1})  # type: ignore[arg-type]


def test_what_a_compaction_summary_cost_counts_against_the_limits() -> None:
    """compaction_end carries the summary's usage, which the meter counts as one request."""
    from piagent.ai import Usage
    from piagent.compaction import CompactionResult
    from piagent.events import CompactionEndEvent
    from piagent.limits import UsageMeter

    spent = Usage(input=1200, output=300, total_tokens=1500)
    result = CompactionResult(
        summary="s", first_kept_index=0, tokens_before=9000, tokens_after=100, usage=spent, messages=[]
    )
    meter = UsageMeter()
    meter.observe(CompactionEndEvent("threshold", result))
    meter.observe(CompactionEndEvent("threshold", None, aborted=True))
    totals = meter.totals()
    assert (totals.requests, totals.input_tokens, totals.output_tokens) == (1, 1200, 300)
