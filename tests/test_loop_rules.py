"""Loop rules beyond the upstream suite (docs/loop.md): the exact event order of each scenario, the
queue polls (rule 19), turn updates, API-key resolution, streams that end badly, and how the
background entry points hand exceptions to their consumer."""

from __future__ import annotations

import json
import threading
from typing import Any, Optional

import pytest

from piagent import (
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentToolResult,
    BeforeToolCallResult,
    TextContent,
    TurnUpdate,
    agent_loop,
    agent_loop_continue,
    run_agent_loop,
    run_agent_loop_continue,
)
from piagent.ai import AssistantMessageEvent, AssistantMessageEventStream, Model
from tests.support.loop import (
    MODEL,
    WAIT,
    Polls,
    ScriptedStream,
    assistant,
    block_events,
    call,
    config,
    echo_tool,
    kinds,
    of_type,
    pull_stream,
    push_stream,
    roles,
    short,
    user,
)


class Run:
    """``run_agent_loop`` with recorded events."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.result: list[Any] = []

    def prompt(self, prompts: list[Any], context: AgentContext, cfg: AgentLoopConfig, stream_fn: Any) -> Run:
        self.result = run_agent_loop(prompts, context, cfg, self.events.append, stream_fn=stream_fn)
        return self

    def continue_(self, context: AgentContext, cfg: AgentLoopConfig, stream_fn: Any) -> Run:
        self.result = run_agent_loop_continue(context, cfg, self.events.append, stream_fn=stream_fn)
        return self

    @property
    def short(self) -> list[str]:
        return short(self.events)


def run(prompts: list[Any], context: AgentContext, cfg: AgentLoopConfig, stream_fn: Any) -> Run:
    return Run().prompt(prompts, context, cfg, stream_fn)


def tools(*extra: Any) -> AgentContext:
    return AgentContext("", [], [echo_tool(), *extra])


# =========================================================================== event orders (rules 1-19)


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_scenario_1_text_answer_streamed_from_start(mode: str) -> None:
    answer = assistant("Hi there!")
    r = run([user("Hello")], AgentContext(), config(), ScriptedStream([answer], mode, streamed=True))
    assert r.short == [
        "agent_start",
        "turn_start",
        "ms(U:Hello)",
        "me(U:Hello)",
        "ms(A)",
        "mu",
        "mu",
        "mu",
        "mu",
        "me(A:Hi there!)",
        "turn_end",
        "agent_end",
    ]
    updates = of_type(r.events, "message_update")
    assert [u.assistant_message_event.type for u in updates] == ["text_start", "text_delta", "text_delta", "text_end"]
    assert [u.assistant_message_event.delta for u in updates[1:3]] == ["Hi t", "here!"]
    assert of_type(r.events, "message_end")[-1].message is answer
    assert r.result == [r.events[2].message, answer]
    [turn_end] = of_type(r.events, "turn_end")
    assert turn_end.message is answer and turn_end.tool_results == []
    assert of_type(r.events, "agent_end")[0].messages is r.result


def test_message_updates_carry_snapshots_not_the_live_partial() -> None:
    answer = assistant("Hi there!")
    stream_events = block_events(answer) + [AssistantMessageEvent("done", reason="stop", message=answer)]
    r = run([user("Hello")], AgentContext(), config(), ScriptedStream([stream_events]))
    for update in of_type(r.events, "message_update"):
        partial = update.assistant_message_event.partial
        assert update.message is not partial
        assert update.message.content == partial.content and update.message.content is not partial.content


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_scenario_2_terminal_event_only_gives_start_and_end_of_the_final(mode: str) -> None:
    answer = assistant("Hi")
    r = run([user("Hello")], AgentContext(), config(), ScriptedStream([answer], mode))
    assert r.short == [
        "agent_start",
        "turn_start",
        "ms(U:Hello)",
        "me(U:Hello)",
        "ms(A:Hi)",
        "me(A:Hi)",
        "turn_end",
        "agent_end",
    ]
    start, end = of_type(r.events, "message_start")[1], of_type(r.events, "message_end")[1]
    assert end.message is answer
    assert start.message is not answer and start.message.content == answer.content


def _updating_echo(**options: Any) -> Any:
    return echo_tool(
        before=lambda tid, args, signal, on_update: on_update(AgentToolResult([TextContent("50%")])), **options
    )


def test_scenario_3_one_tool_call_then_text() -> None:
    stream_fn = ScriptedStream([assistant([call("tool-1", value="x")]), assistant("done")])
    r = run([user("go")], AgentContext("", [], [_updating_echo()]), config(), stream_fn)
    assert r.short == [
        "agent_start",
        "turn_start",
        "ms(U:go)",
        "me(U:go)",
        "ms(A)",
        "me(A)",
        "tes(tool-1)",
        "teu(tool-1)",
        "tee(tool-1)",
        "ms(TR:tool-1)",
        "me(TR:tool-1)",
        "turn_end",
        "turn_start",
        "ms(A:done)",
        "me(A:done)",
        "turn_end",
        "agent_end",
    ]
    assert roles(r.result) == ["user", "assistant", "toolResult", "assistant"]
    [update] = of_type(r.events, "tool_execution_update")
    assert update.args == {"value": "x"} and update.partial_result.content[0].text == "50%"


def test_scenario_4_sequential_batch_of_two() -> None:
    stream_fn = ScriptedStream([assistant([call("tool-1", value="a"), call("tool-2", value="b")]), assistant("done")])
    r = run([user("go")], AgentContext("", [], [_updating_echo()]), config(tool_execution="sequential"), stream_fn)
    assert r.short[4:19] == [
        "ms(A)",
        "me(A)",
        "tes(tool-1)",
        "teu(tool-1)",
        "tee(tool-1)",
        "ms(TR:tool-1)",
        "me(TR:tool-1)",
        "tes(tool-2)",
        "teu(tool-2)",
        "tee(tool-2)",
        "ms(TR:tool-2)",
        "me(TR:tool-2)",
        "turn_end",
        "turn_start",
        "ms(A:done)",
    ]
    assert [m.tool_call_id for m in of_type(r.events, "turn_end")[0].tool_results] == ["tool-1", "tool-2"]


def test_scenario_5_parallel_batch_call_two_finishes_first() -> None:
    release_first = threading.Event()

    def before(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> None:
        on_update(AgentToolResult([TextContent(f"working on {args['value']}")]))
        if args["value"] == "first":
            assert release_first.wait(WAIT)

    events: list[Any] = []

    def emit(event: Any) -> None:
        events.append(event)
        if event.type == "tool_execution_end" and event.tool_call_id == "tool-2":
            release_first.set()

    stream_fn = ScriptedStream(
        [assistant([call("tool-1", value="first"), call("tool-2", value="second")]), assistant("done")]
    )
    run_agent_loop([user("go")], AgentContext("", [], [echo_tool(before=before)]), config(), emit, stream_fn=stream_fn)
    batch = [s for s in short(events)[6:] if not s.startswith("teu")][:8]
    assert batch == [
        "tes(tool-1)",
        "tes(tool-2)",
        "tee(tool-2)",
        "tee(tool-1)",
        "ms(TR:tool-1)",
        "me(TR:tool-1)",
        "ms(TR:tool-2)",
        "me(TR:tool-2)",
    ]
    sequence = short(events)
    # Each call's update arrives between the batch's starts and that call's end.
    for tool_id in ("tool-1", "tool-2"):
        assert sequence.index("tes(tool-2)") < sequence.index(f"teu({tool_id})") < sequence.index(f"tee({tool_id})")


def test_scenario_5_parallel_batch_with_a_preflight_failure_first() -> None:
    stream_fn = ScriptedStream(
        [assistant([call("tool-1", "missing", value="a"), call("tool-2", value="b")]), assistant("done")]
    )
    r = run([user("go")], tools(), config(), stream_fn)
    assert r.short[6:14] == [
        "tes(tool-1)",
        "tee(tool-1)",
        "tes(tool-2)",
        "tee(tool-2)",
        "ms(TR:tool-1)",
        "me(TR:tool-1)",
        "ms(TR:tool-2)",
        "me(TR:tool-2)",
    ]


def test_scenario_6_steering_arrives_during_a_turn() -> None:
    steer = user("steer")
    steering = Polls()
    stream_fn = ScriptedStream([assistant([call("tool-1", value="x")]), assistant("done")])
    tool = echo_tool(before=lambda *a: steering.put(steer))  # queued while the tool runs
    r = run([user("go")], AgentContext("", [], [tool]), config(get_steering_messages=steering), stream_fn)
    assert r.short[9:16] == [
        "me(TR:tool-1)",
        "turn_end",
        "turn_start",
        "ms(U:steer)",
        "me(U:steer)",
        "ms(A:done)",
        "me(A:done)",
    ]
    assert r.result == [r.result[0], r.result[1], r.result[2], steer, r.result[4]]
    assert steer in stream_fn.requests[1].context.messages


def test_scenario_7_steering_already_queued_when_the_run_starts() -> None:
    steer = user("steer")
    stream_fn = ScriptedStream([assistant("done")])
    r = run([user("go")], AgentContext(), config(get_steering_messages=Polls([steer])), stream_fn)
    assert r.short == [
        "agent_start",
        "turn_start",
        "ms(U:go)",
        "me(U:go)",
        "ms(U:steer)",
        "me(U:steer)",
        "ms(A:done)",
        "me(A:done)",
        "turn_end",
        "agent_end",
    ]
    assert stream_fn.calls == 1
    assert roles(stream_fn.requests[0].context.messages) == ["user", "user"]
    assert r.result[1] is steer


def test_scenario_8_follow_up_after_the_agent_would_stop() -> None:
    follow = user("follow")
    steering, follow_up = Polls(), Polls([follow])
    stream_fn = ScriptedStream([assistant("one"), assistant("two")])
    r = run(
        [user("go")],
        AgentContext(),
        config(get_steering_messages=steering, get_follow_up_messages=follow_up),
        stream_fn,
    )
    assert r.short == [
        "agent_start",
        "turn_start",
        "ms(U:go)",
        "me(U:go)",
        "ms(A:one)",
        "me(A:one)",
        "turn_end",
        "turn_start",
        "ms(U:follow)",
        "me(U:follow)",
        "ms(A:two)",
        "me(A:two)",
        "turn_end",
        "agent_end",
    ]
    assert steering.count == 3 and follow_up.count == 2
    assert r.result[2] is follow


@pytest.mark.parametrize("stop_reason", ["error", "aborted"])
@pytest.mark.parametrize("streamed", [False, True])
def test_scenario_9_error_or_aborted_assistant_ends_the_run_without_tools_polls_or_hooks(
    stop_reason: str, streamed: bool
) -> None:
    executed: list[Any] = []
    hooks: list[str] = []
    steering, follow_up = Polls([]), Polls([user("never")])
    failed = assistant(
        [TextContent("partial"), call("tool-1", value="x")], stop_reason=stop_reason, error_message="boom"
    )
    cfg = config(
        get_steering_messages=steering,
        get_follow_up_messages=follow_up,
        prepare_next_turn=lambda *a: hooks.append("prepare"),
        should_stop_after_turn=lambda *a: hooks.append("stop") is not None,
    )
    context = AgentContext("", [], [echo_tool(before=lambda *a: executed.append(a))])
    r = run([user("go")], context, cfg, ScriptedStream([failed], streamed=streamed))
    updates = ["mu"] * 8 if streamed else []
    opening = ["ms(A)"] if streamed else ["ms(A:partial)"]
    assert r.short == [
        "agent_start",
        "turn_start",
        "ms(U:go)",
        "me(U:go)",
        *opening,
        *updates,
        "me(A:partial)",
        "turn_end",
        "agent_end",
    ]
    assert executed == [] and hooks == []
    assert steering.count == 1 and follow_up.count == 0  # only the initial steering poll
    assert r.result == [r.result[0], failed] and r.result[1].stop_reason == stop_reason


def test_scenario_10_should_stop_after_a_tool_turn() -> None:
    steering, follow_up = Polls(), Polls([user("never")])
    cfg = config(
        get_steering_messages=steering, get_follow_up_messages=follow_up, should_stop_after_turn=lambda t, s: True
    )
    r = run([user("go")], tools(), cfg, ScriptedStream([assistant([call("tool-1", value="x")])]))
    assert r.short == [
        "agent_start",
        "turn_start",
        "ms(U:go)",
        "me(U:go)",
        "ms(A)",
        "me(A)",
        "tes(tool-1)",
        "tee(tool-1)",
        "ms(TR:tool-1)",
        "me(TR:tool-1)",
        "turn_end",
        "agent_end",
    ]
    assert steering.count == 1 and follow_up.count == 0
    assert follow_up.queue != []  # left queued for the next run


def test_scenario_11_all_results_terminate_and_nothing_is_queued() -> None:
    steering, follow_up = Polls(), Polls()
    cfg = config(
        get_steering_messages=steering,
        get_follow_up_messages=follow_up,
        after_tool_call=lambda ctx, s: AfterToolCallResult(terminate=True),
    )
    stream_fn = ScriptedStream([assistant([call("tool-1", value="a"), call("tool-2", value="b")])])
    r = run([user("go")], tools(), cfg, stream_fn)
    assert r.short[-2:] == ["turn_end", "agent_end"]
    assert stream_fn.calls == 1
    assert steering.count == 2 and follow_up.count == 1


def test_scenario_12_length_stop_fails_every_call_in_order_and_continues() -> None:
    executed: list[Any] = []
    hooks: list[str] = []
    truncated = assistant([call("tool-1", value="a"), call("tool-2", value="b")], stop_reason="length")
    cfg = config(before_tool_call=lambda *a: hooks.append("before"), after_tool_call=lambda *a: hooks.append("after"))
    stream_fn = ScriptedStream([truncated, assistant("done")])
    r = run([user("go")], AgentContext("", [], [echo_tool(before=lambda *a: executed.append(a))]), cfg, stream_fn)
    assert r.short[4:] == [
        "ms(A)",
        "me(A)",
        "tes(tool-1)",
        "tee(tool-1)",
        "ms(TR:tool-1)",
        "me(TR:tool-1)",
        "tes(tool-2)",
        "tee(tool-2)",
        "ms(TR:tool-2)",
        "me(TR:tool-2)",
        "turn_end",
        "turn_start",
        "ms(A:done)",
        "me(A:done)",
        "turn_end",
        "agent_end",
    ]
    assert executed == [] and hooks == []
    for end in of_type(r.events, "tool_execution_end"):
        assert end.is_error is True
        assert end.result.content[0].text == (
            'Tool call "echo" was not executed: the response hit the output token limit, so its '
            "arguments may be truncated. Re-issue the tool call with complete arguments."
        )
    assert of_type(r.events, "tool_execution_start")[0].args == {"value": "a"}
    assert stream_fn.calls == 2


def test_scenario_13_continue_run_with_initial_steering() -> None:
    steer = user("steer")
    r = Run().continue_(
        AgentContext("", [user("earlier")]),
        config(get_steering_messages=Polls([steer])),
        ScriptedStream([assistant("ok")]),
    )
    assert r.short == [
        "agent_start",
        "turn_start",
        "ms(U:steer)",
        "me(U:steer)",
        "ms(A:ok)",
        "me(A:ok)",
        "turn_end",
        "agent_end",
    ]
    assert r.result == [steer, r.result[1]]


# =========================================================================== polls and queue modes (rule 19)


def test_polls_for_a_text_only_run() -> None:
    steering, follow_up = Polls(), Polls()
    run(
        [user("go")],
        AgentContext(),
        config(get_steering_messages=steering, get_follow_up_messages=follow_up),
        ScriptedStream([assistant("ok")]),
    )
    assert (steering.count, follow_up.count) == (2, 1)  # initial + after the turn; one follow-up poll


def test_polls_for_a_tool_turn_then_text() -> None:
    steering, follow_up = Polls(), Polls()
    cfg = config(get_steering_messages=steering, get_follow_up_messages=follow_up)
    run([user("go")], tools(), cfg, ScriptedStream([assistant([call("tool-1", value="x")]), assistant("ok")]))
    assert (steering.count, follow_up.count) == (3, 1)


@pytest.mark.parametrize("queue_mode, calls, turns", [("one-at-a-time", 4, 4), ("all", 2, 2)])
def test_follow_up_modes_at_the_loop_level(queue_mode: str, calls: int, turns: int) -> None:
    follows = [user(f"f{n}") for n in range(3)]
    follow_up = Polls(follows, queue_mode)
    stream_fn = ScriptedStream([assistant(f"a{n}") for n in range(calls)])
    r = run([user("go")], AgentContext(), config(get_follow_up_messages=follow_up), stream_fn)
    assert stream_fn.calls == calls
    assert len(of_type(r.events, "turn_start")) == turns
    assert [m for m in r.result if m in follows] == follows
    if queue_mode == "all":
        assert roles(stream_fn.requests[1].context.messages) == ["user", "assistant", "user", "user", "user"]


@pytest.mark.parametrize("queue_mode, calls", [("one-at-a-time", 3), ("all", 1)])
def test_steering_modes_at_the_loop_level(queue_mode: str, calls: int) -> None:
    steers = [user(f"s{n}") for n in range(3)]
    stream_fn = ScriptedStream([assistant(f"a{n}") for n in range(calls)])
    r = run([user("go")], AgentContext(), config(get_steering_messages=Polls(steers, queue_mode)), stream_fn)
    assert stream_fn.calls == calls
    assert [roles(req.context.messages) for req in stream_fn.requests][-1].count("user") == 4
    if queue_mode == "one-at-a-time":
        assert roles(r.result) == ["user", "user", "assistant", "user", "assistant", "user", "assistant"]
    else:
        assert roles(r.result) == ["user", "user", "user", "user", "assistant"]


def test_terminate_does_not_suppress_queued_steering() -> None:
    steer = user("steer")
    steering = Polls()
    tool = echo_tool(before=lambda *a: steering.put(steer))
    cfg = config(get_steering_messages=steering, after_tool_call=lambda ctx, s: AfterToolCallResult(terminate=True))
    stream_fn = ScriptedStream([assistant([call("tool-1", value="x")]), assistant("answered")])
    r = run([user("go")], AgentContext("", [], [tool]), cfg, stream_fn)
    assert stream_fn.calls == 2
    assert roles(r.result) == ["user", "assistant", "toolResult", "user", "assistant"]


def test_terminate_does_not_suppress_queued_follow_up() -> None:
    cfg = config(
        get_follow_up_messages=Polls([user("more")]), after_tool_call=lambda ctx, s: AfterToolCallResult(terminate=True)
    )
    stream_fn = ScriptedStream([assistant([call("tool-1", value="x")]), assistant("answered")])
    run([user("go")], tools(), cfg, stream_fn)
    assert stream_fn.calls == 2


# =========================================================================== tool rules (rules 10-17)


def test_unknown_tool_fails_without_calling_before_tool_call() -> None:
    hooks: list[Any] = []
    cfg = config(before_tool_call=lambda ctx, s: hooks.append(ctx), after_tool_call=lambda ctx, s: hooks.append(ctx))
    r = run(
        [user("go")], tools(), cfg, ScriptedStream([assistant([call("tool-1", "nope", value="x")]), assistant("ok")])
    )
    [end] = of_type(r.events, "tool_execution_end")
    assert end.is_error is True
    assert end.result.content[0].text == "Tool nope not found"
    assert end.result.details == {}
    assert hooks == []
    assert r.result[2].is_error is True and r.result[2].content[0].text == "Tool nope not found"


def test_invalid_arguments_fail_with_the_validation_frame_and_skip_after_tool_call() -> None:
    hooks: list[str] = []
    cfg = config(before_tool_call=lambda *a: hooks.append("before"), after_tool_call=lambda *a: hooks.append("after"))
    bad = {"value": ["not", "a", "string"]}
    r = run([user("go")], tools(), cfg, ScriptedStream([assistant([call("tool-1", **bad)]), assistant("ok")]))
    [end] = of_type(r.events, "tool_execution_end")
    text = end.result.content[0].text
    assert end.is_error is True
    assert text.startswith('Validation failed for tool "echo":\n  - value: ')
    assert text.endswith("\n\nReceived arguments:\n" + json.dumps(bad, indent=2))
    assert hooks == []


@pytest.mark.parametrize(
    "reason, expected",
    [(None, "Tool execution was blocked"), ("", "Tool execution was blocked"), ("not today", "not today")],
)
def test_before_tool_call_block_reports_its_reason_or_the_default(reason: Optional[str], expected: str) -> None:
    executed: list[Any] = []
    after: list[Any] = []
    cfg = config(
        before_tool_call=lambda ctx, s: BeforeToolCallResult(block=True, reason=reason),
        after_tool_call=lambda ctx, s: after.append(ctx),
    )
    context = AgentContext("", [], [echo_tool(before=lambda *a: executed.append(a))])
    r = run([user("go")], context, cfg, ScriptedStream([assistant([call("tool-1", value="x")]), assistant("ok")]))
    [end] = of_type(r.events, "tool_execution_end")
    assert (end.is_error, end.result.content[0].text) == (True, expected)
    assert executed == [] and after == []


def test_before_tool_call_sees_the_raw_call_and_validated_args() -> None:
    seen: list[Any] = []
    raw = call("tool-1", value="x")

    def before(ctx: Any, signal: Any) -> None:
        seen.append(
            (ctx.tool_call, ctx.args, ctx.assistant_message, roles(ctx.context.messages), threading.get_ident())
        )

    r = run([user("go")], tools(), config(before_tool_call=before), ScriptedStream([assistant([raw]), assistant("ok")]))
    [(tool_call, args, message, context_roles, thread)] = seen
    assert tool_call is raw and args == {"value": "x"} and args is not raw.arguments
    assert message is r.result[1]
    assert context_roles == ["user", "assistant"]
    assert thread == threading.get_ident()  # hooks run on the run thread


def test_after_tool_call_raising_becomes_an_error_result() -> None:
    def after(ctx: Any, signal: Any) -> None:
        raise RuntimeError("after exploded")

    r = run(
        [user("go")],
        tools(),
        config(after_tool_call=after),
        ScriptedStream([assistant([call("tool-1", value="x")]), assistant("ok")]),
    )
    [end] = of_type(r.events, "tool_execution_end")
    assert (end.is_error, end.result.content[0].text) == (True, "after exploded")
    assert r.result[2].is_error is True


def test_after_tool_call_is_error_flips_the_flag_and_keeps_the_content() -> None:
    seen: list[Any] = []

    def after(ctx: Any, signal: Any) -> AfterToolCallResult:
        seen.append((ctx.result.content[0].text, ctx.is_error, ctx.args))
        return AfterToolCallResult(is_error=True)

    r = run(
        [user("go")],
        tools(),
        config(after_tool_call=after),
        ScriptedStream([assistant([call("tool-1", value="x")]), assistant("ok")]),
    )
    [end] = of_type(r.events, "tool_execution_end")
    assert seen == [("echoed: x", False, {"value": "x"})]
    assert (end.is_error, end.result.content[0].text, end.result.details) == (True, "echoed: x", {"value": "x"})
    assert r.result[2].is_error is True and r.result[2].details == {"value": "x"}


def test_tool_errors_become_error_results_with_the_exception_message() -> None:
    def fail(*a: Any) -> None:
        raise ValueError("disk on fire")

    context = AgentContext("", [], [echo_tool(before=fail)])
    r = run([user("go")], context, config(), ScriptedStream([assistant([call("tool-1", value="x")]), assistant("ok")]))
    [end] = of_type(r.events, "tool_execution_end")
    assert (end.is_error, end.result.content[0].text, end.result.details) == (True, "disk on fire", {})


def test_parallel_preflight_failure_is_reported_before_any_tool_starts() -> None:
    log: list[str] = []
    lock = threading.Lock()

    def note(entry: str) -> None:
        with lock:
            log.append(entry)

    tool = echo_tool(before=lambda tid, *a: note(f"exec:{tid}"))
    cfg = config(before_tool_call=lambda ctx, s: note(f"before:{ctx.tool_call.id}"))
    calls = [call("tool-1", value="a"), call("tool-2", "missing", value="b"), call("tool-3", value="c")]

    def emit(event: Any) -> None:
        if event.type in ("tool_execution_start", "tool_execution_end"):
            note(f"{short([event])[0]}")

    run_agent_loop(
        [user("go")],
        AgentContext("", [], [tool]),
        cfg,
        emit,
        stream_fn=ScriptedStream([assistant(calls), assistant("ok")]),
    )
    first_exec = min(i for i, e in enumerate(log) if e.startswith("exec:"))
    assert log[:first_exec] == [
        "tes(tool-1)",
        "before:tool-1",
        "tes(tool-2)",
        "tee(tool-2)",
        "tes(tool-3)",
        "before:tool-3",
    ]
    assert sorted(e for e in log if e.startswith("exec:")) == ["exec:tool-1", "exec:tool-3"]


# =========================================================================== turn updates, keys, options


def test_prepare_next_turn_model_and_thinking_level_reach_the_next_call() -> None:
    other = Model(id="other-model", api="openai-responses", provider="other")
    updates = iter([TurnUpdate(model=other, thinking_level="high"), TurnUpdate(thinking_level="off"), None])
    seen_turns: list[Any] = []

    def prepare(turn: Any, signal: Any) -> Any:
        seen_turns.append(turn.message)
        return next(updates)

    stream_fn = ScriptedStream([assistant([call(f"tool-{n}", value="x")]) for n in (1, 2)] + [assistant("ok")])
    r = run([user("go")], tools(), config(reasoning="low", prepare_next_turn=prepare), stream_fn)
    assert [req.model for req in stream_fn.requests] == [MODEL, other, other]
    assert [req.options.reasoning for req in stream_fn.requests] == ["low", "high", None]
    assert seen_turns == [r.result[1], r.result[3]]  # before each later turn (pi 1.6): not after the last


def test_prepare_next_turn_tool_choice_applies_from_the_next_call_and_none_keeps_it() -> None:
    updates = iter([TurnUpdate(tool_choice="none"), None, None])
    stream_fn = ScriptedStream(
        [assistant([call("tool-1", value="x")]), assistant([call("tool-2", value="y")]), assistant("ok")]
    )
    run(
        [user("go")],
        tools(),
        config(tool_choice={"name": "echo"}, prepare_next_turn=lambda t, s: next(updates)),
        stream_fn,
    )
    assert [req.options.tool_choice for req in stream_fn.requests] == [{"name": "echo"}, "none", "none"]


def test_should_stop_after_turn_ends_the_run_before_prepare_next_turn_runs() -> None:
    """pi 1.6 prepares a turn only once it will start: a run that should_stop_after_turn ends
    never prepares one, and the hook sees the context the turn was made in."""
    context = tools()
    prepared: list[Any] = []
    seen: list[Any] = []
    cfg = config(
        prepare_next_turn=lambda turn, s: prepared.append(turn),
        should_stop_after_turn=lambda turn, s: seen.append(turn.context) is None,  # True: stop
    )
    stream_fn = ScriptedStream([assistant([call("tool-1", value="x")]), assistant("never")])
    r = run([user("go")], context, cfg, stream_fn)
    assert prepared == [] and stream_fn.calls == 1
    assert len(seen) == 1 and roles(seen[0].messages) == ["user", "assistant", "toolResult"]
    assert r.short[-2:] == ["turn_end", "agent_end"]


def test_replaced_context_is_the_one_appended_to_from_then_on() -> None:
    replacement = AgentContext("second", [user("fresh start")], [echo_tool()])
    updates = iter([TurnUpdate(context=replacement), None, None])
    stream_fn = ScriptedStream(
        [assistant([call("tool-1", value="x")]), assistant([call("tool-2", value="y")]), assistant("ok")]
    )
    r = run([user("go")], tools(), config(prepare_next_turn=lambda t, s: next(updates)), stream_fn)
    assert roles(stream_fn.requests[1].context.messages) == ["user"]
    assert roles(replacement.messages) == ["user", "assistant", "toolResult", "assistant"]
    assert roles(r.result) == ["user", "assistant", "toolResult", "assistant", "toolResult", "assistant"]


def test_get_api_key_is_resolved_before_every_call_with_an_empty_string_falling_back() -> None:
    other = Model(id="other-model", api="openai-responses", provider="other")
    asked: list[str] = []
    keys = {"openai": "", "other": "short-lived-token"}

    def get_api_key(provider: str) -> Optional[str]:
        asked.append(provider)
        return keys[provider]

    updates = iter([None, TurnUpdate(model=other), None])
    stream_fn = ScriptedStream(
        [assistant([call("tool-1", value="x")]), assistant([call("tool-2", value="x")]), assistant("ok")]
    )
    cfg = config(api_key="configured-key", get_api_key=get_api_key, prepare_next_turn=lambda t, s: next(updates))
    run([user("go")], tools(), cfg, stream_fn)
    assert asked == ["openai", "openai", "other"]
    assert [req.options.api_key for req in stream_fn.requests] == [
        "configured-key",
        "configured-key",
        "short-lived-token",
    ]


def test_get_api_key_returning_none_falls_back_and_runs_on_the_run_thread() -> None:
    threads: list[int] = []

    def get_api_key(provider: str) -> None:
        threads.append(threading.get_ident())
        return None

    stream_fn = ScriptedStream([assistant("ok")])
    run([user("go")], AgentContext(), config(api_key="configured-key", get_api_key=get_api_key), stream_fn)
    assert stream_fn.requests[0].options.api_key == "configured-key"
    assert threads == [threading.get_ident()]


def test_stream_options_carry_the_run_signal_and_config_options() -> None:
    from piagent import AbortController

    controller = AbortController()
    stream_fn = ScriptedStream([assistant("ok")])
    cfg = config(temperature=0.25, max_tokens=77, session_id="s-1", api_key="k", reasoning="medium")
    run_agent_loop([user("go")], AgentContext("sys"), cfg, lambda e: None, controller.signal, stream_fn)
    options = stream_fn.requests[0].options
    assert options.signal is controller.signal
    assert (options.temperature, options.max_tokens, options.session_id, options.reasoning) == (
        0.25,
        77,
        "s-1",
        "medium",
    )
    assert stream_fn.requests[0].context.system_prompt == "sys"
    assert [t.name for t in stream_fn.requests[0].context.tools] == []


def test_prompt_message_events_carry_the_prompt_object_itself() -> None:
    prompt = user("Hello")
    r = run([prompt], AgentContext(), config(), ScriptedStream([assistant("ok")]))
    assert r.events[2].type == "message_start" and r.events[2].message is prompt
    assert r.events[3].type == "message_end" and r.events[3].message is prompt
    assert r.result[0] is prompt


def test_run_agent_loop_does_not_mutate_the_callers_context() -> None:
    messages = [user("earlier"), assistant("reply")]
    context = AgentContext("", messages, [echo_tool()])
    r = run([user("go")], context, config(), ScriptedStream([assistant([call("tool-1", value="x")]), assistant("ok")]))
    assert len(messages) == 2 and context.messages is messages
    assert roles(r.result) == ["user", "assistant", "toolResult", "assistant"]


def test_the_partial_is_replaced_by_the_final_in_the_context_and_never_in_new_messages() -> None:
    seen: list[Any] = []
    answer = assistant("Hi there!")
    cfg = config(should_stop_after_turn=lambda turn, s: seen.append(list(turn.context.messages)) is not None)
    r = run([user("Hello")], AgentContext(), cfg, ScriptedStream([answer], streamed=True))
    assert seen[0] == [r.result[0], answer] and seen[0][1] is answer
    assert r.result == [r.result[0], answer]


# =========================================================================== streams that end badly


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_block_events_before_start_are_ignored(mode: str) -> None:
    answer = assistant("Hi")
    stray = block_events(answer)[1:3]  # text_start, text_delta, before any start
    events = stray + block_events(answer) + [AssistantMessageEvent("done", reason="stop", message=answer)]
    r = run([user("go")], AgentContext(), config(), ScriptedStream([events], mode))
    assert r.short == [
        "agent_start",
        "turn_start",
        "ms(U:go)",
        "me(U:go)",
        "ms(A)",
        "mu",
        "mu",
        "mu",
        "mu",
        "me(A:Hi)",
        "turn_end",
        "agent_end",
    ]


def _ends_without_terminal(mode: str, events: list[Any]) -> AssistantMessageEventStream:
    return push_stream(events) if mode == "push" else pull_stream(events)


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_a_stream_ending_without_a_terminal_event_gives_an_error_message_keeping_the_partial(mode: str) -> None:
    partial_events = block_events(assistant("Hi there"))[:4]  # start, text_start, two deltas
    steering, follow_up = Polls(), Polls([user("never")])
    cfg = config(get_steering_messages=steering, get_follow_up_messages=follow_up)
    r = run([user("go")], AgentContext(), cfg, lambda m, c, o: _ends_without_terminal(mode, partial_events))
    final = r.result[-1]
    assert final.stop_reason == "error"
    assert "terminal event" in (final.error_message or "")
    assert [b.text for b in final.content] == ["Hi there"]
    assert (final.api, final.provider, final.model) == (MODEL.api, MODEL.provider, MODEL.id)
    assert r.short == [
        "agent_start",
        "turn_start",
        "ms(U:go)",
        "me(U:go)",
        "ms(A)",
        "mu",
        "mu",
        "mu",
        "me(A:Hi there)",
        "turn_end",
        "agent_end",
    ]
    assert of_type(r.events, "message_end")[-1].message is final
    assert follow_up.count == 0


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_a_stream_ending_with_no_events_at_all_gives_an_error_message(mode: str) -> None:
    r = run([user("go")], AgentContext(), config(), lambda m, c, o: _ends_without_terminal(mode, []))
    final = r.result[-1]
    assert (final.role, final.stop_reason, final.content) == ("assistant", "error", [])
    assert "terminal event" in (final.error_message or "")
    assert r.short[-4:] == ["ms(A)", "me(A)", "turn_end", "agent_end"]


def test_a_stream_ended_with_a_result_but_no_terminal_event_uses_that_result() -> None:
    answer = assistant("complete answer")

    def stream_fn(model: Any, context: Any, options: Any) -> AssistantMessageEventStream:
        stream = AssistantMessageEventStream()

        def produce() -> None:
            for event in block_events(assistant("compl")):
                stream.push(event)
            stream.end(answer)

        threading.Thread(target=produce, daemon=True).start()
        return stream

    r = run([user("go")], AgentContext(), config(), stream_fn)
    assert r.result[-1] is answer
    assert of_type(r.events, "message_end")[-1].message is answer


# =========================================================================== background entry points


def test_agent_loop_runs_on_a_background_thread_and_returns_at_once() -> None:
    gate = threading.Event()
    threads: list[int] = []

    def stream_fn(model: Any, context: Any, options: Any) -> AssistantMessageEventStream:
        threads.append(threading.get_ident())
        return push_stream([AssistantMessageEvent("done", reason="stop", message=assistant("ok"))], gate=gate)

    stream = agent_loop([user("go")], AgentContext(), config(), stream_fn=stream_fn)
    assert not stream.done  # the model has not answered yet
    gate.set()
    assert kinds(list(stream))[-1] == "agent_end"
    assert threads and threads[0] != threading.get_ident()


def _raising_convert(messages: list[Any]) -> list[Any]:
    raise RuntimeError("convert exploded")


def test_agent_loop_raises_the_loops_exception_to_the_iterating_consumer() -> None:
    stream = agent_loop(
        [user("go")], AgentContext(), config(convert_to_llm=_raising_convert), stream_fn=ScriptedStream([])
    )
    seen: list[str] = []
    with pytest.raises(RuntimeError, match="convert exploded"):
        for event in stream:
            seen.append(event.type)
    assert seen == ["agent_start", "turn_start", "message_start", "message_end"]
    with pytest.raises(RuntimeError, match="convert exploded"):
        stream.result(timeout=WAIT)


def test_agent_loop_raises_the_loops_exception_from_result_without_iterating() -> None:
    stream = agent_loop(
        [user("go")], AgentContext(), config(convert_to_llm=_raising_convert), stream_fn=ScriptedStream([])
    )
    with pytest.raises(RuntimeError, match="convert exploded"):
        stream.result(timeout=WAIT)


def test_agent_loop_continue_raises_the_loops_exception_to_the_consumer() -> None:
    def stream_fn(model: Any, context: Any, options: Any) -> Any:
        raise ConnectionError("provider exploded")

    stream = agent_loop_continue(AgentContext("", [user("go")]), config(), stream_fn=stream_fn)
    with pytest.raises(ConnectionError, match="provider exploded"):
        list(stream)
    with pytest.raises(ConnectionError, match="provider exploded"):
        stream.result(timeout=WAIT)


def test_run_agent_loop_lets_an_emit_exception_propagate() -> None:
    def emit(event: Any) -> None:
        if event.type == "turn_end":
            raise KeyError("listener broke")

    with pytest.raises(KeyError, match="listener broke"):
        run_agent_loop([user("go")], AgentContext(), config(), emit, stream_fn=ScriptedStream([assistant("ok")]))


@pytest.mark.parametrize("entry", ["agent_loop_continue", "run_agent_loop_continue"])
def test_continue_raises_synchronously_when_the_last_message_is_an_assistant(entry: str) -> None:
    stream_fn = ScriptedStream([])
    context = AgentContext("", [user("hi"), assistant("hello")])
    with pytest.raises(ValueError, match="^Cannot continue from message role: assistant$"):
        if entry == "agent_loop_continue":
            agent_loop_continue(context, config(), stream_fn=stream_fn)
        else:
            run_agent_loop_continue(context, config(), lambda e: None, stream_fn=stream_fn)
    assert stream_fn.calls == 0


def test_agent_loop_result_is_the_new_messages_list() -> None:
    stream = agent_loop([user("go")], AgentContext(), config(), stream_fn=ScriptedStream([assistant("ok")]))
    events = list(stream)
    assert stream.result(timeout=WAIT) is events[-1].messages
