"""pi's agent-loop suite (L1–L20), each case run with push- and pull-mode streams."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from piagent import (
    AfterToolCallResult,
    AgentContext,
    AgentTool,
    AgentToolResult,
    TextContent,
    TurnUpdate,
    agent_loop,
    agent_loop_continue,
    run_agent_loop,
    run_agent_loop_continue,
)
from piagent.types import keep_llm_messages
from tests.support.loop import (
    WAIT,
    Custom,
    Polls,
    ScriptedStream,
    assistant,
    call,
    config,
    echo_tool,
    kinds,
    of_type,
    roles,
    user,
)


@pytest.fixture(params=["push", "pull"])
def mode(request: Any) -> str:
    return request.param


def consume(stream: Any) -> list[Any]:
    """Iterate an agent_loop() stream to its end (bounded by the suite's timeout)."""
    return list(stream)


def test_L1_emits_events_with_agent_message_types(mode: str) -> None:
    prompt = user("Hello")
    answer = assistant("Hi there!")
    stream = agent_loop([prompt], AgentContext(), config(), stream_fn=ScriptedStream([answer], mode))
    events = consume(stream)
    assert stream.result() == [prompt, answer]
    assert stream.result()[0] is prompt and stream.result()[1] is answer
    assert kinds(events) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]


def test_L2_handles_custom_message_types_via_convert_to_llm(mode: str) -> None:
    converted: list[list[Any]] = []

    def convert(messages: list[Any]) -> list[Any]:
        out = [m for m in messages if m.role != "notification"]
        converted.append(out)
        return out

    context = AgentContext("", [Custom("notification", "build finished")])
    stream = agent_loop(
        [user("Hello")], context, config(convert_to_llm=convert), stream_fn=ScriptedStream([assistant("ok")], mode)
    )
    consume(stream)
    assert len(converted) == 1
    assert roles(converted[0]) == ["user"]


def test_L3_applies_transform_context_before_convert_to_llm(mode: str) -> None:
    old = [user("one"), assistant("two"), user("three"), assistant("four")]
    transformed: list[list[Any]] = []
    received: list[list[Any]] = []

    def transform(messages: list[Any], signal: Any) -> list[Any]:
        kept = messages[-2:]
        transformed.append(kept)
        return kept

    def convert(messages: list[Any]) -> list[Any]:
        received.append(list(messages))
        return keep_llm_messages(messages)

    stream_fn = ScriptedStream([assistant("ok")], mode)
    cfg = config(transform_context=transform, convert_to_llm=convert)
    consume(agent_loop([user("five")], AgentContext("", old), cfg, stream_fn=stream_fn))
    assert len(transformed[0]) == 2
    assert received == [transformed[0]]
    assert all(a is b for a, b in zip(received[0], transformed[0]))
    assert stream_fn.requests[0].context.messages == transformed[0]


def test_L4_handles_tool_calls_and_results(mode: str) -> None:
    executed: list[Any] = []
    tool = echo_tool(before=lambda tid, args, signal, on_update: executed.append(args["value"]))
    stream_fn = ScriptedStream([assistant([call("tool-1", value="hello")]), assistant("done")], mode)
    stream = agent_loop([user("echo hello")], AgentContext("", [], [tool]), config(), stream_fn=stream_fn)
    events = consume(stream)
    assert executed == ["hello"]
    assert len(of_type(events, "tool_execution_start")) == 1
    [end] = of_type(events, "tool_execution_end")
    assert end.is_error is False
    assert end.result.content[0].text == "echoed: hello"
    assert end.result.details == {"value": "hello"}
    result = stream.result()
    assert roles(result) == ["user", "assistant", "toolResult", "assistant"]
    assert result[2].tool_call_id == "tool-1" and result[2].content[0].text == "echoed: hello"


def test_L5_does_not_execute_tool_calls_from_a_length_truncated_message(mode: str) -> None:
    executed: list[Any] = []
    tool = echo_tool(before=lambda *a: executed.append(a))
    stream_fn = ScriptedStream(
        [assistant([call("tool-1", value="hel")], stop_reason="length"), assistant("sorry")], mode
    )
    stream = agent_loop([user("go")], AgentContext("", [], [tool]), config(), stream_fn=stream_fn)
    events = consume(stream)
    assert executed == []
    [end] = of_type(events, "tool_execution_end")
    assert end.is_error is True
    assert "output token limit" in end.result.content[0].text
    assert stream_fn.calls == 2
    assert stream.result()[-1].role == "assistant"


def test_L6_executes_mutated_before_tool_call_args_without_revalidation(mode: str) -> None:
    received: list[Any] = []

    def execute(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        received.append(args["value"])
        return AgentToolResult([TextContent(str(args["value"]))])

    tool = AgentTool("echo", "echo", echo_tool().parameters, execute)

    def before(ctx: Any, signal: Any) -> None:
        ctx.args["value"] = 123

    stream_fn = ScriptedStream([assistant([call("tool-1", value="hello")]), assistant("done")], mode)
    events = consume(
        agent_loop([user("go")], AgentContext("", [], [tool]), config(before_tool_call=before), stream_fn=stream_fn)
    )
    assert received == [123]
    assert [e.is_error for e in of_type(events, "tool_execution_end")] == [False]


def test_L7_prepares_tool_arguments_for_validation(mode: str) -> None:
    received: list[Any] = []
    schema = {
        "type": "object",
        "properties": {
            "edits": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"oldText": {"type": "string"}, "newText": {"type": "string"}},
                    "required": ["oldText", "newText"],
                },
            }
        },
        "required": ["edits"],
    }

    def prepare(raw: Any) -> Any:
        if "edits" not in raw:
            return {"edits": [{"oldText": raw["oldText"], "newText": raw["newText"]}]}
        return raw

    def execute(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        received.append(args["edits"])
        return AgentToolResult([TextContent("edited")])

    tool = AgentTool("edit", "edit", schema, execute, prepare_arguments=prepare)
    legacy = call("tool-1", "edit", oldText="before", newText="after")
    stream_fn = ScriptedStream([assistant([legacy]), assistant("done")], mode)
    events = consume(agent_loop([user("go")], AgentContext("", [], [tool]), config(), stream_fn=stream_fn))
    assert received == [[{"oldText": "before", "newText": "after"}]]
    assert [e.is_error for e in of_type(events, "tool_execution_end")] == [False]
    assert of_type(events, "tool_execution_start")[0].args == {"oldText": "before", "newText": "after"}


def test_L8_emits_tool_execution_end_in_completion_order_but_persists_results_in_source_order(mode: str) -> None:
    first_started = threading.Event()
    release_first = threading.Event()
    seen_first_pending: list[bool] = []

    def before(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> None:
        if args["value"] == "first":
            first_started.set()
            assert release_first.wait(WAIT)
        else:
            assert first_started.wait(WAIT)
            seen_first_pending.append(not release_first.is_set())

    events: list[Any] = []

    def emit(event: Any) -> None:
        events.append(event)
        if event.type == "tool_execution_end" and event.tool_call_id == "tool-2":
            release_first.set()  # "first" finishes only after "second" was reported

    stream_fn = ScriptedStream(
        [assistant([call("tool-1", value="first"), call("tool-2", value="second")]), assistant("done")], mode
    )
    run_agent_loop([user("go")], AgentContext("", [], [echo_tool(before=before)]), config(), emit, stream_fn=stream_fn)
    assert seen_first_pending == [True]
    assert [e.tool_call_id for e in of_type(events, "tool_execution_end")] == ["tool-2", "tool-1"]
    result_ends = [e.message.tool_call_id for e in of_type(events, "message_end") if e.message.role == "toolResult"]
    assert result_ends == ["tool-1", "tool-2"]
    [turn_end] = [e for e in of_type(events, "turn_end") if e.tool_results]
    assert [m.tool_call_id for m in turn_end.tool_results] == ["tool-1", "tool-2"]


def test_L9_injects_queued_messages_after_all_tool_calls_complete(mode: str) -> None:
    executed: list[str] = []
    interrupt = user("interrupt")
    delivered: list[bool] = []

    def steering() -> list[Any]:
        if executed and not delivered:
            delivered.append(True)
            return [interrupt]
        return []

    tool = echo_tool(before=lambda tid, args, signal, on_update: executed.append(args["value"]))
    stream_fn = ScriptedStream(
        [assistant([call("tool-1", value="first"), call("tool-2", value="second")]), assistant("done")], mode
    )
    cfg = config(tool_execution="sequential", get_steering_messages=steering)
    stream = agent_loop([user("go")], AgentContext("", [], [tool]), cfg, stream_fn=stream_fn)
    events = consume(stream)
    assert executed == ["first", "second"]
    assert [e.is_error for e in of_type(events, "tool_execution_end")] == [False, False]
    starts = []
    for e in of_type(events, "message_start"):
        if e.message.role == "toolResult":
            starts.append(f"tool:{e.message.tool_call_id}")
        elif e.message is interrupt:
            starts.append("interrupt")
    assert starts == ["tool:tool-1", "tool:tool-2", "interrupt"]
    assert interrupt in stream_fn.requests[1].context.messages
    assert interrupt not in stream_fn.requests[0].context.messages


class _Overlap:
    """Records which thread ran each tool and the start/end order (under a lock)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.order: list[str] = []
        self.threads: list[int] = []

    def tool(self, name: str, **options: Any) -> AgentTool:
        def execute(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
            label = f"{name}:{args['value']}"
            with self.lock:
                self.order.append(f"start:{label}")
                self.threads.append(threading.get_ident())
            with self.lock:
                self.order.append(f"end:{label}")
            return AgentToolResult([TextContent(label)])

        return AgentTool(name, name, echo_tool().parameters, execute, **options)


def tool_event_order(events: list[Any]) -> list[str]:
    """``start:<id>``/``end:<id>`` for each tool_execution_start/end, in order (a parallel batch
    starts every call before any ends)."""
    names = {"tool_execution_start": "start", "tool_execution_end": "end"}
    return [f"{names[e.type]}:{e.tool_call_id}" for e in events if e.type in names]


def test_L10_forces_sequential_when_a_tool_has_execution_mode_sequential(mode: str) -> None:
    overlap = _Overlap()
    tool = overlap.tool("slow", execution_mode="sequential")
    events: list[Any] = []
    stream_fn = ScriptedStream(
        [assistant([call("tool-1", "slow", value="first"), call("tool-2", "slow", value="second")]), assistant("done")],
        mode,
    )
    run_agent_loop([user("go")], AgentContext("", [], [tool]), config(), events.append, stream_fn=stream_fn)
    # Each call ended before the next one was even preflighted, so they cannot have overlapped.
    assert tool_event_order(events) == ["start:tool-1", "end:tool-1", "start:tool-2", "end:tool-2"]
    assert overlap.order == ["start:slow:first", "end:slow:first", "start:slow:second", "end:slow:second"]
    assert len(overlap.threads) == 2 and threading.get_ident() not in overlap.threads  # on workers
    result_ends = [e.message.tool_call_id for e in of_type(events, "message_end") if e.message.role == "toolResult"]
    assert result_ends == ["tool-1", "tool-2"]


def test_L11_forces_sequential_when_one_of_multiple_tools_is_sequential(mode: str) -> None:
    overlap = _Overlap()
    slow = overlap.tool("slow", execution_mode="sequential")
    fast = overlap.tool("fast")
    stream_fn = ScriptedStream(
        [assistant([call("a", "slow", value="a"), call("b", "fast", value="b")]), assistant("done")], mode
    )
    events: list[Any] = []
    run_agent_loop([user("go")], AgentContext("", [], [slow, fast]), config(), events.append, stream_fn=stream_fn)
    assert tool_event_order(events) == ["start:a", "end:a", "start:b", "end:b"]
    assert overlap.order == ["start:slow:a", "end:slow:a", "start:fast:b", "end:fast:b"]
    assert len(overlap.threads) == 2 and threading.get_ident() not in overlap.threads


def test_L12_allows_parallel_when_all_tools_have_execution_mode_parallel(mode: str) -> None:
    second_started = threading.Event()
    overlapped: list[bool] = []

    def before(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> None:
        if args["value"] == "first":
            overlapped.append(second_started.wait(WAIT))  # only possible if both run at once
        else:
            second_started.set()

    tool = echo_tool(before=before, execution_mode="parallel")
    stream_fn = ScriptedStream(
        [assistant([call("tool-1", value="first"), call("tool-2", value="second")]), assistant("done")], mode
    )
    run_agent_loop([user("go")], AgentContext("", [], [tool]), config(), lambda e: None, stream_fn=stream_fn)
    assert overlapped == [True]


def test_L13_uses_prepare_next_turn_snapshot_before_continuing(mode: str) -> None:
    updates: list[int] = []

    def prepare_next_turn(turn: Any, signal: Any) -> Any:
        if updates:
            return None
        updates.append(1)
        ctx = turn.context
        return TurnUpdate(context=AgentContext("second prompt", list(ctx.messages), ctx.tools))

    stream_fn = ScriptedStream([assistant([call("tool-1", value="x")]), assistant("done")], mode)
    context = AgentContext("first prompt", [], [echo_tool()])
    consume(agent_loop([user("go")], context, config(prepare_next_turn=prepare_next_turn), stream_fn=stream_fn))
    assert stream_fn.calls == 2
    assert stream_fn.requests[0].context.system_prompt == "first prompt"
    assert stream_fn.requests[1].context.system_prompt == "second prompt"


def test_L14_stops_after_the_current_turn_when_should_stop_after_turn_returns_true(mode: str) -> None:
    executed: list[Any] = []
    steering = Polls()
    follow_up = Polls([user("follow")])
    seen: list[Any] = []

    def should_stop(turn: Any, signal: Any) -> bool:
        seen.append(([m.tool_call_id for m in turn.tool_results], roles(turn.context.messages)))
        return True

    tool = echo_tool(before=lambda *a: executed.append(a))
    stream_fn = ScriptedStream([assistant([call("tool-1", value="x")]), assistant("never")], mode)
    cfg = config(get_steering_messages=steering, get_follow_up_messages=follow_up, should_stop_after_turn=should_stop)
    stream = agent_loop([user("go")], AgentContext("", [], [tool]), cfg, stream_fn=stream_fn)
    events = consume(stream)
    assert stream_fn.calls == 1
    assert len(executed) == 1
    assert steering.count == 1
    assert follow_up.count == 0
    assert seen == [(["tool-1"], ["user", "assistant", "toolResult"])]
    assert roles(stream.result()) == ["user", "assistant", "toolResult"]
    assert kinds(events) == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]


def _terminating_echo(terminate_for: Any = None) -> AgentTool:
    def execute(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        terminate = terminate_for is None or args["value"] == terminate_for
        return AgentToolResult([TextContent(f"echoed: {args['value']}")], {"value": args["value"]}, terminate)

    return AgentTool("echo", "echo", echo_tool().parameters, execute)


def test_L15_stops_after_a_tool_batch_when_every_result_sets_terminate(mode: str) -> None:
    stream_fn = ScriptedStream([assistant([call(f"tool-{n}", value="x")]) for n in range(1, 4)], mode)
    stream = agent_loop([user("go")], AgentContext("", [], [_terminating_echo()]), config(), stream_fn=stream_fn)
    events = consume(stream)
    assert stream_fn.calls == 1
    assert roles(stream.result()) == ["user", "assistant", "toolResult"]
    assert len(of_type(events, "turn_end")) == 1


def test_L16_continues_after_parallel_tool_calls_when_not_all_results_terminate(mode: str) -> None:
    stream_fn = ScriptedStream(
        [assistant([call("tool-1", value="first"), call("tool-2", value="second")]), assistant("done")], mode
    )
    stream = agent_loop([user("go")], AgentContext("", [], [_terminating_echo("first")]), config(), stream_fn=stream_fn)
    consume(stream)
    assert stream_fn.calls == 2
    assert roles(stream.result()) == ["user", "assistant", "toolResult", "toolResult", "assistant"]


def test_L17_allows_after_tool_call_to_mark_a_batch_as_terminating(mode: str) -> None:
    stream_fn = ScriptedStream([assistant([call("tool-1", value="x")]), assistant("never")], mode)
    cfg = config(after_tool_call=lambda ctx, signal: AfterToolCallResult(terminate=True))
    stream = agent_loop([user("go")], AgentContext("", [], [echo_tool()]), cfg, stream_fn=stream_fn)
    consume(stream)
    assert stream_fn.calls == 1
    assert roles(stream.result()) == ["user", "assistant", "toolResult"]


def test_L18_agent_loop_continue_raises_when_context_has_no_messages(mode: str) -> None:
    stream_fn = ScriptedStream([], mode)
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(ValueError, match="^Cannot continue: no messages in context$"):
        agent_loop_continue(AgentContext(), config(), stream_fn=stream_fn)
    started = [t for t in threading.enumerate() if t.ident not in before and t.name == "piagent-loop"]
    assert started == []
    with pytest.raises(ValueError, match="^Cannot continue: no messages in context$"):
        run_agent_loop_continue(AgentContext(), config(), lambda e: None, stream_fn=stream_fn)
    assert stream_fn.calls == 0


def test_L19_continues_from_existing_context_without_user_message_events(mode: str) -> None:
    answer = assistant("Hi")
    messages = [user("Hello")]
    context = AgentContext("", messages)
    stream = agent_loop_continue(context, config(), stream_fn=ScriptedStream([answer], mode))
    events = consume(stream)
    assert stream.result() == [answer]
    ends = of_type(events, "message_end")
    assert len(ends) == 1 and ends[0].message is answer
    assert kinds(events)[:2] == ["agent_start", "turn_start"]
    # docs/loop.md#rule-2: the caller's list is copied, never appended to.
    assert context.messages is messages and len(messages) == 1


def test_L20_allows_custom_message_types_as_last_message(mode: str) -> None:
    def convert(messages: list[Any]) -> list[Any]:
        return [user(m.text) if m.role == "custom" else m for m in messages]

    answer = assistant("ok")
    stream_fn = ScriptedStream([answer], mode)
    stream = agent_loop_continue(
        AgentContext("", [Custom("custom", "hook output")]), config(convert_to_llm=convert), stream_fn=stream_fn
    )
    consume(stream)
    assert stream.result() == [answer]
    assert roles(stream_fn.requests[0].context.messages) == ["user"]
