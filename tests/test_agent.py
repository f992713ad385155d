"""The Agent class: pi's Agent cases (A1–A22) and the rules of docs/loop.md#rule-21 onwards."""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

import piagent.agent as agent_module
from piagent import (
    AbortSignal,
    Agent,
    AgentBusyError,
    AgentState,
    AgentTool,
    AgentToolResult,
    ImageContent,
    InvalidStateError,
    ModelNotFoundError,
    RunResult,
    TextContent,
    TurnContext,
    TurnUpdate,
    Usage,
    UserMessage,
)
from piagent.ai import Model
from piagent.executors import abandoned_tool_threads
from piagent.testing import faux_message, faux_text, faux_tool_call
from tests.support.agent_support import WAIT, GatedStream, Recorder, echo_tool, roles, text_of, user
from tests.support.loop import MODEL, assistant


def noop_tool() -> AgentTool:
    schema = {"type": "object", "properties": {}}
    return AgentTool("noop", "does nothing", schema, lambda *a: AgentToolResult([TextContent("ok")]))


# --------------------------------------------------------------------------- A1–A3, A10–A13: state


def test_a1_default_state() -> None:
    state = Agent().state
    assert isinstance(state, AgentState)
    assert state.system_prompt == ""
    assert isinstance(state.model, Model) and state.model.api == "unknown"
    assert state.thinking_level == "off"
    assert state.tools == [] and state.messages == []
    assert state.is_streaming is False
    assert state.streaming_message is None
    assert state.pending_tool_calls == frozenset()
    assert state.error_message is None


def test_a2_custom_initial_state_keeps_the_model_object() -> None:
    agent = Agent(system_prompt="You are helpful.", model=MODEL, thinking_level="low")
    assert agent.state.system_prompt == "You are helpful."
    assert agent.state.model is MODEL
    assert agent.state.thinking_level == "low"


def test_a3_subscribe_and_state_mutation_emit_nothing() -> None:
    agent = Agent()
    seen: list[Any] = []
    unsubscribe = agent.subscribe(seen.append)
    assert seen == []
    agent.state.system_prompt = "Test prompt"
    assert seen == []
    unsubscribe()
    agent.state.system_prompt = "Another prompt"
    assert seen == []


def test_a10_state_mutators_copy_assigned_lists_and_return_live_ones() -> None:
    agent = Agent()
    agent.state.system_prompt = "Custom"
    agent.state.model = MODEL
    agent.state.thinking_level = "high"
    tools = [echo_tool()]
    agent.state.tools = tools
    messages = [user("Hello")]
    agent.state.messages = messages
    assert (agent.state.system_prompt, agent.state.model, agent.state.thinking_level) == ("Custom", MODEL, "high")
    assert agent.state.tools == tools and agent.state.tools is not tools
    assert agent.state.messages == messages and agent.state.messages is not messages
    extra = user("Hi")
    agent.state.messages.append(extra)
    assert len(agent.state.messages) == 2 and agent.state.messages[1] is extra
    agent.state.messages = []
    assert agent.state.messages == []


def test_agent_attributes_mirror_the_state() -> None:
    agent = Agent(system_prompt="a", model=MODEL, tools=[echo_tool()])
    assert (agent.system_prompt, agent.model, agent.thinking_level) == ("a", MODEL, "off")
    agent.system_prompt = "b"
    agent.thinking_level = "minimal"
    assert agent.state.system_prompt == "b" and agent.state.thinking_level == "minimal"
    assert agent.tools is agent.state.tools and agent.messages is agent.state.messages


def test_runtime_state_fields_are_read_only() -> None:
    agent = Agent()
    for name in ("is_streaming", "streaming_message", "pending_tool_calls", "error_message"):
        with pytest.raises(AttributeError):
            setattr(agent.state, name, None)


def test_a11_a12_queued_messages_are_not_in_the_transcript() -> None:
    agent = Agent()
    steering, follow = user("steer"), user("follow")
    agent.steer(steering)
    agent.follow_up(follow)
    assert steering not in agent.state.messages and follow not in agent.state.messages
    assert agent.has_queued_messages()


def test_a13_abort_when_idle_is_a_no_op() -> None:
    agent = Agent()
    agent.abort()
    assert agent.signal is None


# --------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    "option, value, error",
    [
        ("thinking_level", "huge", ValueError),
        ("tool_execution", "eventually", ValueError),
        ("steering_mode", "some", ValueError),
        ("follow_up_mode", "one", ValueError),
        ("max_turns", 0, ValueError),
        ("max_turns", True, ValueError),
        ("max_workers", -1, ValueError),
        ("tool_timeout", 0, ValueError),
        ("max_retry_delay_ms", -5, ValueError),
        ("tool_choice", "always", ValueError),
        ("tool_choice", {"name": ""}, ValueError),
        ("tool_choice", {"type": "function", "function": {"name": "echo"}}, ValueError),
        ("thinking_budgets", {"low": "many"}, ValueError),
        ("temperature", -0.5, ValueError),
        ("max_tokens", 0, ValueError),
        ("timeout_ms", 0, ValueError),
        ("max_retries", -1, ValueError),
        ("cache_retention", "forever", ValueError),
        ("before_tool_call", "not callable", TypeError),
        ("stream_fn", 42, TypeError),
        ("executor", object(), TypeError),
        ("session_id", 7, TypeError),
        ("system_prompt", 7, TypeError),
        ("tools", [object()], TypeError),
        ("messages", ["no role"], TypeError),
    ],
)
def test_bad_options_raise_at_construction_and_on_assignment(option: str, value: Any, error: type) -> None:
    with pytest.raises(error, match=option if error is ValueError else None):
        Agent(**{option: value})
    agent = Agent()
    before = getattr(agent, option)
    with pytest.raises(error):
        setattr(agent, option, value)
    assert getattr(agent, option) == before  # nothing lost


def test_duplicate_tool_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="echo"):
        Agent(tools=[echo_tool(), echo_tool()])


def test_model_strings_resolve_through_the_catalogue_or_raise_model_not_found() -> None:
    with pytest.raises(ModelNotFoundError):
        Agent(model="no-such-provider:no-such-model")
    with pytest.raises(ModelNotFoundError, match="provider:model-id"):
        Agent(model="missing-colon")
    agent = Agent(model=MODEL)
    with pytest.raises(ModelNotFoundError):
        agent.model = "no-such-provider:x"
    assert agent.model is MODEL
    with pytest.raises(TypeError):
        Agent(model=42)  # type: ignore[arg-type]
    resolved = Agent(model="openai:gpt-4.1").model
    assert (resolved.provider, resolved.id) == ("openai", "gpt-4.1")


def test_every_option_is_a_public_attribute() -> None:
    budgets = {"low": 100}
    hook = lambda *a: None  # noqa: E731 -- one callable for every hook option
    agent = Agent(
        convert_to_llm=hook,
        transform_context=hook,
        stream_fn=hook,
        get_api_key=hook,
        before_tool_call=hook,
        after_tool_call=hook,
        prepare_next_turn=hook,
        should_stop_after_turn=hook,
        steering_mode="all",
        follow_up_mode="all",
        tool_execution="sequential",
        max_workers=2,
        max_turns=3,
        tool_timeout=1.5,
        session_id="s",
        thinking_budgets=budgets,
        max_retry_delay_ms=10,
        on_payload=hook,
        on_response=hook,
    )
    assert agent.convert_to_llm is hook and agent.on_response is hook
    assert (agent.steering_mode, agent.follow_up_mode, agent.tool_execution) == ("all", "all", "sequential")
    assert (agent.max_workers, agent.max_turns, agent.tool_timeout, agent.session_id) == (2, 3, 1.5, "s")
    assert (agent.thinking_budgets, agent.max_retry_delay_ms) == (budgets, 10)


def test_an_unknown_option_raises_type_error_naming_it() -> None:
    # `transport` was accepted and ignored by every provider; it is no longer an option
    with pytest.raises(TypeError, match="'transport'"):
        Agent(transport="sse")  # type: ignore[call-arg]  # the point of the test: not an option


# --------------------------------------------------------------------------- A4 and run failures


def test_a4_emits_full_lifecycle_events_for_thrown_run_failures() -> None:
    def exploding(*args: Any) -> Any:
        raise RuntimeError("provider exploded")

    agent = Agent(model=MODEL, stream_fn=exploding)
    recorder = Recorder()
    agent.subscribe(recorder)
    result = agent.prompt("Hello")
    assert recorder.types == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "message_start",
        "message_end",
        "turn_end",
        "agent_end",
    ]
    last = agent.state.messages[-1]
    assert last.role == "assistant" and last.stop_reason == "error"
    assert last.error_message == "provider exploded"
    assert (last.api, last.provider, last.model) == (MODEL.api, MODEL.provider, MODEL.id)
    assert agent.state.error_message == "provider exploded"
    assert result.stop_reason == "error" and result.error_message == "provider exploded"
    assert result.messages == agent.state.messages
    assert agent.state.is_streaming is False


def test_prompting_the_default_model_fails_as_a_run_failure_saying_how_to_set_one() -> None:
    agent = Agent()
    result = agent.prompt("hi")
    assert result.stop_reason == "error"
    assert (result.error_message or "").startswith("No model set: give the agent one, e.g. Agent(model=")


def test_a_listener_that_raises_ends_the_run_with_a_failure_message(faux) -> None:
    faux.set_responses([faux_message([faux_tool_call("echo", {"value": "x"})]), faux_message("never")])
    agent = Agent(model=faux.get_model(), tools=[echo_tool()])
    recorder = Recorder()

    def explode(event: Any) -> None:
        if event.type == "tool_execution_start":
            raise ValueError("listener broke")

    unsubscribe = agent.subscribe(explode)
    agent.subscribe(recorder)
    result = agent.prompt("go")
    assert result.stop_reason == "error" and result.error_message == "listener broke"
    assert faux.state.call_count == 1
    assert recorder.types[-4:] == ["message_start", "message_end", "turn_end", "agent_end"]
    assert agent.state.pending_tool_calls == frozenset()  # cleared at run finish
    unsubscribe()
    assert agent.prompt("again").text == "never"  # the agent stays usable


def test_a_failure_whose_own_agent_end_dispatch_raises_propagates_out_of_prompt(faux) -> None:
    faux.set_responses([faux_message("hi")])
    agent = Agent(model=faux.get_model())

    def explode(event: Any) -> None:
        if event.type == "agent_end":
            raise ValueError("agent_end listener broke")

    unsubscribe = agent.subscribe(explode)
    with pytest.raises(ValueError, match="agent_end listener broke"):
        agent.prompt("go")
    assert not agent.state.is_streaming and agent.signal is None
    unsubscribe()
    faux.set_responses([faux_message("fine")])
    assert agent.prompt("again").text == "fine"


def test_a_run_failure_after_an_abort_is_marked_aborted() -> None:
    def stream(model: Model, context: Any, options: Any) -> Any:
        agent.abort()
        raise RuntimeError("gone")

    agent = Agent(model=MODEL, stream_fn=stream)
    result = agent.prompt("hi")
    assert result.stop_reason == "aborted" and result.error_message == "gone"


# --------------------------------------------------------------------------- A5–A7, A14–A16: runs in progress


def test_a5_prompt_waits_for_agent_end_listeners() -> None:
    stream = GatedStream()
    stream.release.set()
    agent = Agent(model=MODEL, stream_fn=stream)
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()

    def slow_listener(event: Any) -> None:
        if event.type == "agent_end":
            entered.set()
            release.wait(WAIT)
            finished.set()

    agent.subscribe(slow_listener)
    future = agent.prompt("hi", wait=False)
    assert entered.wait(WAIT)
    assert not future.done() and not finished.is_set()
    assert agent.state.is_streaming is True
    release.set()
    assert future.result(WAIT).text == "released"
    assert finished.is_set()
    assert agent.state.is_streaming is False


def test_a6_wait_for_idle_waits_for_listeners() -> None:
    stream = GatedStream()
    stream.release.set()
    agent = Agent(model=MODEL, stream_fn=stream)
    entered, release = threading.Event(), threading.Event()

    def blocking(event: Any) -> None:
        if event.type == "message_end" and event.message.role == "assistant":
            entered.set()
            release.wait(WAIT)

    agent.subscribe(blocking)
    future = agent.prompt("hi", wait=False)
    assert entered.wait(WAIT)
    waiter_returned = threading.Event()
    waiter = threading.Thread(target=lambda: agent.wait_for_idle(WAIT) and waiter_returned.set())
    waiter.start()
    assert agent.wait_for_idle(timeout=0) is False
    assert agent.state.is_streaming is True and not waiter_returned.is_set()
    release.set()
    assert agent.wait_for_idle(WAIT) is True
    waiter.join(WAIT)
    assert waiter_returned.is_set()
    assert agent.state.is_streaming is False
    future.result(WAIT)


def test_a7_listeners_receive_the_active_abort_signal() -> None:
    stream = GatedStream()
    agent = Agent(model=MODEL, stream_fn=stream)
    captured: list[AbortSignal] = []
    agent.subscribe(lambda event, signal: captured.append(signal) if event.type == "agent_start" else None)
    future = agent.prompt("hi", wait=False)
    assert stream.started.wait(WAIT)
    assert len(captured) == 1 and captured[0] is agent.signal
    assert captured[0].aborted is False
    agent.abort()
    result = future.result(WAIT)
    assert captured[0].aborted is True
    assert result.stop_reason == "aborted"
    assert agent.signal is None


def test_a14_reset_while_processing_raises_and_changes_nothing() -> None:
    stream = GatedStream()
    agent = Agent(model=MODEL, stream_fn=stream)
    future = agent.prompt("hi", wait=False)
    assert stream.started.wait(WAIT)
    assert agent.state.is_streaming is True
    assert roles(agent.state.messages) == ["user"]
    with pytest.raises(AgentBusyError, match=r"^Agent is already processing\. Wait for completion before resetting\.$"):
        agent.reset()
    assert roles(agent.state.messages) == ["user"] and agent.state.is_streaming is True
    stream.release.set()
    future.result(WAIT)
    assert agent.state.is_streaming is False
    assert roles(agent.state.messages) == ["user", "assistant"]
    agent.steer("queued")
    agent.reset()
    assert agent.state.messages == [] and not agent.has_queued_messages()


def test_a15_prompt_while_streaming_raises_the_busy_error() -> None:
    stream = GatedStream()
    agent = Agent(model=MODEL, stream_fn=stream)
    future = agent.prompt("first", wait=False)
    assert stream.started.wait(WAIT)
    with pytest.raises(AgentBusyError) as info:
        agent.prompt("second")
    assert str(info.value) == (
        "Agent is already processing a prompt. Use steer() or follow_up() to queue messages, or wait for completion."
    )
    agent.abort()
    assert future.result(WAIT).stop_reason == "aborted"


def test_a16_continue_while_streaming_raises_the_busy_error() -> None:
    stream = GatedStream()
    agent = Agent(model=MODEL, stream_fn=stream)
    future = agent.prompt("first", wait=False)
    assert stream.started.wait(WAIT)
    busy = r"^Agent is already processing\. Wait for completion before continuing\.$"
    with pytest.raises(AgentBusyError, match=busy):
        agent.continue_()
    agent.abort()
    future.result(WAIT)


def test_prompt_without_wait_claims_the_run_before_returning() -> None:
    stream = GatedStream()
    agent = Agent(model=MODEL, stream_fn=stream)
    future = agent.prompt("hi", wait=False)
    assert isinstance(future, Future)
    assert agent.state.is_streaming is True  # already, before the background thread ran anything
    assert agent.signal is not None
    with pytest.raises(AgentBusyError):
        agent.prompt("again", wait=False)
    stream.release.set()
    result = future.result(WAIT)
    assert isinstance(result, RunResult) and result.text == "released"


def test_wait_for_idle_on_the_run_thread_raises() -> None:
    stream = GatedStream()
    stream.release.set()
    agent = Agent(model=MODEL, stream_fn=stream)
    errors: list[BaseException] = []

    def listener(event: Any) -> None:
        if event.type == "agent_start":
            try:
                agent.wait_for_idle()
            except InvalidStateError as exc:
                errors.append(exc)

    agent.subscribe(listener)
    agent.prompt("hi")
    assert len(errors) == 1
    assert agent.wait_for_idle(timeout=0) is True


# --------------------------------------------------------------------------- A8, A9: late tool updates


def test_a8_ignores_tool_updates_after_settlement(faux) -> None:
    captured: list[Any] = []

    def execute(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        captured.append(on_update)
        on_update(AgentToolResult([TextContent("partial")]))
        return AgentToolResult([TextContent("done")], terminate=True)

    tool = AgentTool("updater", "sends an update", {"type": "object", "properties": {}}, execute)
    faux.set_responses([faux_message([faux_tool_call("updater", {}, id="tool-1")])])
    agent = Agent(model=faux.get_model(), tools=[tool])
    recorder = Recorder()
    agent.subscribe(recorder)
    agent.prompt("go")
    count = len(recorder.events)
    captured[0](AgentToolResult([TextContent("late")]))  # no event, no error
    assert len(recorder.events) == count
    assert len(recorder.of_type("tool_execution_update")) == 1


def test_a9_ignores_a_settled_parallel_tools_update_while_another_runs(faux) -> None:
    captured: list[Any] = []
    slow_started, release, settled_end_seen = threading.Event(), threading.Event(), threading.Event()

    def settled(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        captured.append(on_update)
        return AgentToolResult([TextContent("settled")], terminate=True)

    def slow(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        slow_started.set()
        release.wait(WAIT)
        return AgentToolResult([TextContent("slow")], terminate=True)

    schema = {"type": "object", "properties": {}}
    tools = [AgentTool("settled_tool", "", schema, settled), AgentTool("slow_tool", "", schema, slow)]
    calls = [faux_tool_call("settled_tool", {}, "s-1"), faux_tool_call("slow_tool", {}, "w-1")]
    faux.set_responses([faux_message(calls)])
    agent = Agent(model=faux.get_model(), tools=tools)
    recorder = Recorder(
        lambda e: settled_end_seen.set() if e.type == "tool_execution_end" and e.tool_call_id == "s-1" else None
    )
    agent.subscribe(recorder)
    future = agent.prompt("go", wait=False)
    assert slow_started.wait(WAIT) and settled_end_seen.wait(WAIT)
    assert agent.state.pending_tool_calls == frozenset({"w-1"})
    captured[0](AgentToolResult([TextContent("late")]))
    release.set()
    future.result(WAIT)
    assert recorder.of_type("tool_execution_update") == []
    assert faux.state.call_count == 1


# --------------------------------------------------------------------------- A17, A18: continue_


def test_a17_continue_runs_a_queued_follow_up_after_an_assistant_tail(faux) -> None:
    faux.set_responses([faux_message("after follow-up")])
    agent = Agent(model=faux.get_model(), messages=[user("Initial"), assistant("Initial response")])
    follow = user("Queued follow-up")
    agent.follow_up(follow)
    result = agent.continue_()
    assert isinstance(result, RunResult)
    assert follow in agent.state.messages
    assert agent.state.messages[-1].role == "assistant"
    assert result.messages[0] is follow
    assert not agent.has_queued_messages()


def test_a18_continue_keeps_one_at_a_time_steering_from_an_assistant_tail(faux) -> None:
    faux.set_responses([faux_message("first"), faux_message("second")])
    agent = Agent(model=faux.get_model(), messages=[user("Initial"), assistant("Initial response")])
    agent.steer(user("Steering 1"))
    agent.steer(user("Steering 2"))
    agent.continue_()
    assert roles(agent.state.messages[-4:]) == ["user", "assistant", "user", "assistant"]
    assert [text_of(m) for m in agent.state.messages[-4:]] == ["Steering 1", "first", "Steering 2", "second"]
    assert faux.state.call_count == 2


def test_continue_from_an_assistant_tail_prefers_steering_over_follow_ups(faux) -> None:
    faux.set_responses([faux_message("a"), faux_message("b")])
    agent = Agent(model=faux.get_model(), messages=[user("Initial"), assistant("Initial response")])
    agent.follow_up("later")
    agent.steer("now")
    agent.continue_()
    assert [text_of(m) for m in agent.state.messages[2:]] == ["now", "a", "later", "b"]


def test_continue_from_a_custom_role_message_is_allowed(faux) -> None:
    class Note:
        role = "note"
        content = "remember"

    faux.set_responses([faux_message("noted")])
    convert = lambda messages: [user(m.content) if m.role == "note" else m for m in messages]  # noqa: E731 -- reads as the one-liner a user writes
    agent = Agent(model=faux.get_model(), messages=[Note()], convert_to_llm=convert)
    result = agent.continue_()
    assert roles(result.messages) == ["assistant"] and result.text == "noted"
    assert text_of(faux.state.requests[0].context.messages[0]) == "remember"


def test_continue_without_wait_returns_a_future(faux) -> None:
    faux.set_responses([faux_message("continued")])
    agent = Agent(model=faux.get_model(), messages=[user("hi")])
    future = agent.continue_(wait=False)
    assert future.result(WAIT).text == "continued"


# --------------------------------------------------------------------------- A19–A22: forwarded options


def test_a19_legacy_prepare_next_turn_receives_only_the_signal(faux) -> None:
    received: list[Any] = []
    faux.set_responses([faux_message([faux_tool_call("noop", {})]), faux_message("done")])
    agent = Agent(model=faux.get_model(), tools=[noop_tool()], prepare_next_turn=lambda signal: received.append(signal))
    agent.prompt("go")
    assert faux.state.call_count == 2
    assert received and all(isinstance(s, AbortSignal) for s in received)


def test_prepare_next_turn_with_context_can_switch_the_model(faux) -> None:
    from piagent import TurnUpdate

    second = Model(**{**faux.get_model().__dict__, "id": "faux-2"})
    seen: list[Any] = []

    def prepare(context: TurnContext, signal: AbortSignal) -> TurnUpdate:
        seen.append((type(context), roles(context.new_messages)))
        return TurnUpdate(model=second, thinking_level="high")

    faux.set_responses([faux_message([faux_tool_call("noop", {})]), faux_message("done")])
    agent = Agent(model=faux.get_model(), tools=[noop_tool()], prepare_next_turn=prepare)
    agent.prompt("go")
    assert seen[0] == (TurnContext, ["user", "assistant", "toolResult"])
    assert faux.state.requests[1].model.id == "faux-2" and faux.state.requests[1].options.reasoning == "high"
    assert agent.state.model.id == "faux-1"  # the agent's state is not updated from the hook


def test_prepare_next_turn_is_installed_at_run_start_and_read_at_each_turn(faux) -> None:
    calls: list[str] = []
    agent: Agent

    def first(context: TurnContext, signal: AbortSignal) -> None:
        calls.append("first")
        agent.prepare_next_turn = lambda context, signal: calls.append("second")

    faux.set_responses([faux_message([faux_tool_call("noop", {})]) for _ in range(2)] + [faux_message("done")])
    agent = Agent(model=faux.get_model(), tools=[noop_tool()], prepare_next_turn=first)
    agent.prompt("go")
    # the wrapper reads the current attribute; it prepares the two later turns only (pi 1.6)
    assert calls == ["first", "second"]

    calls.clear()
    agent.prepare_next_turn = None
    agent.subscribe(lambda e: setattr(agent, "prepare_next_turn", first) if e.type == "agent_start" else None)
    faux.set_responses([faux_message([faux_tool_call("noop", {})]), faux_message("done")])
    agent.prompt("go")
    assert calls == []  # not set when the run started: no wrapper for this run


def test_a20_should_stop_after_turn_is_forwarded(faux) -> None:
    calls: list[Any] = []

    def should_stop(context: TurnContext, signal: AbortSignal) -> bool:
        calls.append((roles(context.context.messages), signal))
        return True

    faux.set_responses([faux_message([faux_tool_call("noop", {})]), faux_message("never")])
    agent = Agent(model=faux.get_model(), tools=[noop_tool()], should_stop_after_turn=should_stop)
    agent.prompt("go")
    assert faux.state.call_count == 1
    assert calls[0][0] == ["user", "assistant", "toolResult"]
    assert isinstance(calls[0][1], AbortSignal)


def test_a21_session_id_is_forwarded_and_read_at_each_run(faux) -> None:
    faux.set_responses([faux_message("one"), faux_message("two")])
    agent = Agent(model=faux.get_model(), session_id="session-abc")
    agent.prompt("hi")
    agent.session_id = "session-def"
    agent.prompt("again")
    assert [r.options.session_id for r in faux.state.requests] == ["session-abc", "session-def"]


def test_model_call_options_reach_the_stream_function_and_are_read_at_each_run(faux) -> None:
    faux.set_responses([faux_message("one"), faux_message("two")])
    agent = Agent(
        model=faux.get_model(), temperature=0.2, max_tokens=64, timeout_ms=5000, max_retries=0, cache_retention="none"
    )
    agent.prompt("hi")
    agent.temperature, agent.max_retries = None, 5
    agent.prompt("again")
    first, second = (r.options for r in faux.state.requests)
    assert (first.temperature, first.max_tokens, first.timeout_ms, first.max_retries, first.cache_retention) == (
        0.2,
        64,
        5000,
        0,
        "none",
    )
    assert (second.temperature, second.max_retries) == (None, 5)


def test_a22_the_process_wide_default_stream_function_is_used(faux) -> None:
    calls: list[Any] = []

    def default_stream(model: Model, context: Any, options: Any) -> Any:
        calls.append(model)
        return faux.stream(model, context, options)

    faux.set_responses([faux_message("via default")])
    agent_module.set_default_stream_fn(default_stream)
    try:
        result = Agent(model=faux.get_model()).prompt("hi")
    finally:
        agent_module.set_default_stream_fn(None)
    assert len(calls) == 1 and result.text == "via default"
    assert agent_module.get_default_stream_fn() is agent_module.stream_simple


def test_stream_options_are_forwarded_and_snapshotted_at_run_start() -> None:
    payloads: list[Any] = []
    responses: list[Any] = []
    stream = GatedStream()

    def stream_fn(model: Model, context: Any, options: Any) -> Any:
        return stream(model, context, options)

    agent = Agent(
        model=MODEL,
        stream_fn=stream_fn,
        thinking_level="medium",
        thinking_budgets={"medium": 99},
        max_retry_delay_ms=1234,
        on_payload=payloads.append,
        on_response=responses.append,
        session_id="s1",
        get_api_key=lambda provider: f"key-for-{provider}",
    )
    future = agent.prompt("hi", wait=False)
    assert stream.started.wait(WAIT)
    agent.thinking_level = "off"  # mid-run changes affect the next run only (docs/loop.md#rule-21)
    agent.session_id = "s2"
    stream.release.set()
    future.result(WAIT)
    options = stream.calls[0]
    assert (options.reasoning, options.thinking_budgets) == ("medium", {"medium": 99})
    assert (options.max_retry_delay_ms, options.session_id) == (1234, "s1")
    assert options.on_payload == payloads.append and options.on_response == responses.append
    assert options.api_key == "key-for-openai"
    agent.prompt("again")
    assert stream.calls[1].reasoning is None and stream.calls[1].session_id == "s2"


def test_tools_and_hooks_are_snapshotted_at_run_start(faux) -> None:
    before_calls: list[str] = []
    agent: Agent

    def before(context: Any, signal: AbortSignal) -> None:
        before_calls.append(context.tool_call.name)
        agent.tools = []  # mid-run: the running loop keeps its snapshot
        agent.before_tool_call = None

    faux.set_responses(
        [
            faux_message([faux_tool_call("echo", {"value": "1"})]),
            faux_message([faux_tool_call("echo", {"value": "2"})]),
            faux_message("done"),
        ]
    )
    agent = Agent(model=faux.get_model(), tools=[echo_tool()], before_tool_call=before)
    result = agent.prompt("go")
    assert before_calls == ["echo", "echo"]
    tool_results = [m for m in result.messages if m.role == "toolResult"]
    assert [m.is_error for m in tool_results] == [False, False]
    assert agent.tools == [] and agent.before_tool_call is None


def test_executor_max_workers_and_tool_timeout_are_forwarded(faux) -> None:
    submitted: list[Any] = []

    class CountingExecutor(ThreadPoolExecutor):
        def submit(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
            submitted.append(fn)
            return super().submit(fn, *args, **kwargs)

    def stuck(tool_call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        signal.wait(WAIT)  # until the timeout aborts this call's signal
        return AgentToolResult([TextContent("late")])

    schema = {"type": "object", "properties": {}}
    faux.set_responses(
        [
            faux_message([faux_tool_call("echo", {"value": "a"}), faux_tool_call("stuck", {})]),
            faux_message("done"),
        ]
    )
    with CountingExecutor(2) as executor:
        agent = Agent(
            model=faux.get_model(),
            tools=[echo_tool(), AgentTool("stuck", "", schema, stuck)],
            executor=executor,
            tool_timeout=0.05,
        )
        result = agent.prompt("go")
    assert len(submitted) == 2
    stuck_result = [m for m in result.messages if m.role == "toolResult"][1]
    assert stuck_result.is_error and "timed out" in stuck_result.content[0].text


def test_tool_choice_is_forwarded_to_every_call_and_a_turn_update_replaces_it(faux) -> None:
    faux.set_responses([faux_message([faux_tool_call("echo", {"value": "a"})]), faux_message("done")])
    agent = Agent(
        model=faux.get_model(),
        tools=[echo_tool()],
        tool_choice={"name": "echo"},
        prepare_next_turn=lambda turn, signal: TurnUpdate(tool_choice="none") if turn.tool_results else None,
    )
    agent.prompt("go")
    assert [r.options.tool_choice for r in faux.state.requests] == [{"name": "echo"}, "none"]
    assert agent.tool_choice == {"name": "echo"}  # the update lasted one run, the option stays


# --------------------------------------------------------------------------- max_turns


def test_max_turns_ends_the_run_after_that_many_turns(faux) -> None:
    faux.set_responses([faux_message([faux_tool_call("noop", {})]) for _ in range(5)])
    agent = Agent(model=faux.get_model(), tools=[noop_tool()], max_turns=2)
    recorder = Recorder()
    agent.subscribe(recorder)
    result = agent.prompt("loop forever")
    assert faux.state.call_count == 2
    assert len(recorder.of_type("turn_end")) == 2
    assert roles(result.messages) == ["user", "assistant", "toolResult", "assistant", "toolResult"]
    assert recorder.types[-1] == "agent_end"
    faux.set_responses([faux_message([faux_tool_call("noop", {})]) for _ in range(5)])
    agent.prompt("again")  # the count is per run
    assert faux.state.call_count == 4


def test_max_turns_combines_with_should_stop_after_turn(faux) -> None:
    faux.set_responses([faux_message([faux_tool_call("noop", {})]) for _ in range(5)])
    hook_calls: list[int] = []
    agent = Agent(
        model=faux.get_model(),
        tools=[noop_tool()],
        max_turns=3,
        should_stop_after_turn=lambda ctx, signal: hook_calls.append(1) or False,
    )
    agent.prompt("go")
    assert faux.state.call_count == 3 and len(hook_calls) == 3
    faux.set_responses([faux_message([faux_tool_call("noop", {})]) for _ in range(5)])
    agent.should_stop_after_turn = lambda ctx, signal: True
    agent.prompt("go")
    assert faux.state.call_count == 4


# --------------------------------------------------------------------------- listeners


def test_listeners_run_in_subscription_order_and_twice_subscribed_runs_once(faux) -> None:
    faux.set_responses([faux_message("hi")])
    agent = Agent(model=faux.get_model())
    order: list[str] = []
    first = lambda event: order.append("first")  # noqa: E731 -- a one-argument listener, as users write it
    agent.subscribe(first)
    agent.subscribe(lambda event, signal: order.append("second"))
    unsubscribe_again = agent.subscribe(first)
    agent.prompt("hi")
    assert order[:2] == ["first", "second"]
    assert order.count("first") == order.count("second")
    unsubscribe_again()
    unsubscribe_again()  # idempotent
    order.clear()
    faux.set_responses([faux_message("hi")])
    agent.prompt("hi")
    assert set(order) == {"second"}


def test_listener_signature_decides_the_arguments() -> None:
    agent = Agent()
    with pytest.raises(TypeError):
        agent.subscribe(lambda: None)
    with pytest.raises(TypeError):
        agent.subscribe("not callable")  # type: ignore[arg-type]
    got: list[Any] = []

    class Bound:
        def on_event(self, event: Any) -> None:
            got.append(("one", event.type))

    def two(event: Any, signal: Any = None) -> None:
        got.append(("two", event.type, signal is not None))

    def varargs(*args: Any) -> None:
        got.append(("var", len(args)))

    agent.subscribe(Bound().on_event)
    agent.subscribe(two)
    agent.subscribe(varargs)
    agent.prompt("hi")
    assert got[:3] == [("one", "agent_start"), ("two", "agent_start", True), ("var", 2)]


def test_dispatch_iterates_over_a_snapshot_of_the_listeners(faux) -> None:
    faux.set_responses([faux_message("hi")])
    agent = Agent(model=faux.get_model())
    late: list[str] = []
    unsubscribers: list[Any] = []

    def first(event: Any) -> None:
        if event.type == "agent_start":
            agent.subscribe(late_listener)
            unsubscribers[0]()  # removes "second" while this dispatch is running

    def second(event: Any) -> None:
        late.append("second:" + event.type)

    def late_listener(event: Any) -> None:
        late.append("late:" + event.type)

    agent.subscribe(first)
    unsubscribers.append(agent.subscribe(second))
    agent.prompt("hi")
    assert late[0] == "second:agent_start"  # in the snapshot of this dispatch
    assert late[1] == "late:turn_start"  # added during it: from the next event on
    assert not any(item.startswith("second:") for item in late[1:])


def test_state_is_reduced_before_listeners_see_the_event(faux) -> None:
    faux.set_responses([faux_message([faux_tool_call("echo", {"value": "x"}, id="c-1")]), faux_message("done")])
    agent = Agent(model=faux.get_model(), tools=[echo_tool()])
    checks: list[Any] = []

    def listener(event: Any) -> None:
        state = agent.state
        if event.type == "message_start" and event.message.role == "user":
            checks.append(("streaming user", state.streaming_message is event.message))
        elif event.type == "message_end":
            checks.append(("appended", state.messages[-1] is event.message and state.streaming_message is None))
        elif event.type == "tool_execution_start":
            checks.append(("pending", state.pending_tool_calls == frozenset({"c-1"})))
        elif event.type == "tool_execution_end":
            checks.append(("not pending", state.pending_tool_calls == frozenset()))
        elif event.type in ("agent_start", "agent_end"):
            checks.append(("streaming", state.is_streaming))

    agent.subscribe(listener)
    agent.prompt("go")
    assert checks and all(ok for _, ok in checks), checks


def test_pending_tool_calls_is_a_new_frozenset_on_each_change(faux) -> None:
    faux.set_responses([faux_message([faux_tool_call("echo", {"value": "x"}, id="c-1")]), faux_message("done")])
    agent = Agent(model=faux.get_model(), tools=[echo_tool()])
    snapshots: list[Any] = []
    agent.subscribe(
        lambda e: snapshots.append(agent.state.pending_tool_calls) if e.type.startswith("tool_execution") else None
    )
    agent.prompt("go")
    assert snapshots == [frozenset({"c-1"}), frozenset()]
    assert all(isinstance(s, frozenset) for s in snapshots)


def test_error_message_is_set_by_an_error_turn_and_cleared_at_the_next_run(faux) -> None:
    faux.set_responses([faux_message("", stop_reason="error", error_message="rate limited")])
    agent = Agent(model=faux.get_model())
    result = agent.prompt("hi")
    assert agent.state.error_message == "rate limited" and result.error_message == "rate limited"
    faux.set_responses([faux_message("fine")])
    cleared: list[Any] = []
    agent.subscribe(lambda e: cleared.append(agent.state.error_message) if e.type == "agent_start" else None)
    agent.prompt("again")
    assert cleared == [None] and agent.state.error_message is None


# --------------------------------------------------------------------------- prompt input and RunResult


def test_prompt_input_forms(faux) -> None:
    faux.set_responses([faux_message("a"), faux_message("b"), faux_message("c"), faux_message("d")])
    agent = Agent(model=faux.get_model())
    image = ImageContent("aGk=", "image/png")
    result = agent.prompt("look", [image])
    prompt = result.messages[0]
    assert isinstance(prompt, UserMessage) and prompt.content == [TextContent("look"), image]
    message = user("as message")
    assert agent.prompt(message).messages[0] is message
    pair = [user("one"), user("two")]
    assert agent.prompt(pair).messages[:2] == pair
    assert roles(agent.prompt([]).messages) == ["assistant"]  # an empty list calls the model on the context
    with pytest.raises(TypeError):
        agent.prompt(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        agent.prompt(message, [image])
    with pytest.raises(TypeError):
        agent.prompt("x", ["not an image"])  # type: ignore[list-item]
    assert agent.state.is_streaming is False


def test_run_result_summarises_the_run(faux) -> None:
    faux.set_responses(
        [
            faux_message([faux_text("calling"), faux_tool_call("echo", {"value": "x"})], usage=Usage(input=1)),
            faux_message("The answer is 42."),
        ]
    )
    agent = Agent(model=faux.get_model(), tools=[echo_tool()], messages=[user("earlier")])
    result = agent.prompt("go")
    assert roles(result.messages) == ["user", "assistant", "toolResult", "assistant"]
    assert result.messages == agent.state.messages[1:]
    assert result.text == "The answer is 42." and result.stop_reason == "stop" and result.error_message is None
    assistants = [m for m in result.messages if m.role == "assistant"]
    assert result.usage.total_tokens == sum(m.usage.total_tokens for m in assistants) > 0
    assert result.usage.output == sum(m.usage.output for m in assistants)
    assert repr(result) == (
        f"RunResult(stop_reason='stop', text='The answer is 42.', messages=4, tokens={result.usage.total_tokens})"
    )
    assert repr(agent) == "<Agent idle model=faux:faux-1 tools=['echo'] messages=5>"


def test_run_result_without_an_assistant_message() -> None:
    result = RunResult.from_messages([user("x")])
    assert (result.text, result.stop_reason, result.error_message) == ("", None, None)
    long = RunResult.from_messages([assistant("y" * 200)])
    assert len(repr(long)) < 150 and "…" in repr(long)


def test_run_result_renders_as_escaped_html_in_notebooks(faux) -> None:
    faux.set_responses([faux_message([faux_tool_call("echo", {"value": "<x>"})]), faux_message("a <b>bold</b> claim")])
    result = Agent(model=faux.get_model(), tools=[echo_tool()]).prompt("go <now>")
    rendered = result._repr_html_()
    assert rendered.startswith('<div class="piagent-run">')
    assert f"run: stop · 4 messages · {result.usage.total_tokens} tokens" in rendered
    assert rendered.count('class="piagent-message"') == 4
    assert "go &lt;now&gt;" in rendered and "a &lt;b&gt;bold&lt;/b&gt; claim" in rendered
    assert "<b>bold</b>" not in rendered and "echoed: &lt;x&gt;" in rendered
    failed = RunResult.from_messages([assistant("", stop_reason="error", error_message="<boom>")])
    assert "error · 1 messages · 0 tokens · &lt;boom&gt;" in failed._repr_html_()


# --------------------------------------------------------------------------- queues


@pytest.mark.parametrize("mode, calls", [("one-at-a-time", 3), ("all", 2)])
def test_steering_modes_one_at_a_time_and_all(faux, mode: str, calls: int) -> None:
    faux.set_responses([faux_message(f"r{i}") for i in range(3)])
    agent = Agent(model=faux.get_model(), steering_mode=mode)

    def steer_twice(event: Any) -> None:
        if event.type == "turn_end" and len(agent.state.messages) == 2:
            agent.steer("s1")
            agent.steer("s2")

    agent.subscribe(steer_twice)
    result = agent.prompt("go")
    assert faux.state.call_count == calls
    assert [text_of(m) for m in result.messages if m.role == "user"] == ["go", "s1", "s2"]


@pytest.mark.parametrize("mode, calls", [("one-at-a-time", 3), ("all", 2)])
def test_follow_up_modes_one_at_a_time_and_all(faux, mode: str, calls: int) -> None:
    faux.set_responses([faux_message(f"r{i}") for i in range(3)])
    agent = Agent(model=faux.get_model(), follow_up_mode=mode)
    agent.follow_up("f1")
    agent.follow_up("f2")
    result = agent.prompt("go")
    assert faux.state.call_count == calls
    assert [text_of(m) for m in result.messages if m.role == "user"] == ["go", "f1", "f2"]


def test_queue_mode_is_read_at_each_poll(faux) -> None:
    faux.set_responses([faux_message(f"r{i}") for i in range(4)])
    agent = Agent(model=faux.get_model(), follow_up_mode="one-at-a-time")
    for text in ("f1", "f2", "f3"):
        agent.follow_up(text)

    def switch(event: Any) -> None:
        if event.type == "message_end" and text_of(event.message) == "f1":
            agent.follow_up_mode = "all"

    agent.subscribe(switch)
    agent.prompt("go")
    assert faux.state.call_count == 3  # go, f1, then f2+f3 together


def test_put_on_the_queues_is_equivalent_to_steer_and_follow_up(faux) -> None:
    faux.set_responses([faux_message("a"), faux_message("b"), faux_message("c")])
    agent = Agent(model=faux.get_model())
    agent.follow_up_queue.put("from put")
    agent.steering_queue.put(user("steer put"))
    with pytest.raises(TypeError):
        agent.steering_queue.put(42)
    result = agent.prompt("go")
    assert [text_of(m) for m in result.messages if m.role == "user"] == ["go", "steer put", "from put"]
    assert isinstance(result.messages[1].content, list)
    agent.steering_queue.join()  # every put message was delivered (returns at once)
    agent.follow_up_queue.join()


def test_clearing_the_queues() -> None:
    agent = Agent()
    agent.steer("a")
    agent.follow_up("b")
    agent.clear_steering_queue()
    assert agent.has_queued_messages()
    agent.clear_follow_up_queue()
    assert not agent.has_queued_messages()
    agent.steer("a")
    agent.follow_up("b")
    agent.clear_all_queues()
    assert not agent.has_queued_messages()
    assert agent.steering_queue.qsize() == 0


def test_queued_messages_survive_a_should_stop_and_run_next_time(faux) -> None:
    faux.set_responses([faux_message("first"), faux_message("second")])
    agent = Agent(model=faux.get_model(), should_stop_after_turn=lambda ctx, signal: True)
    agent.subscribe(lambda e: agent.follow_up("later") if e.type == "turn_end" else None)
    agent.prompt("go")
    assert agent.has_queued_messages() and faux.state.call_count == 1
    agent.should_stop_after_turn = None
    agent.clear_all_queues()
    agent.follow_up("later")
    result = agent.prompt("next")
    assert [text_of(m) for m in result.messages if m.role == "user"] == ["next", "later"]


def test_a_steering_message_taken_by_a_failed_run_is_put_back(faux) -> None:
    faux.set_responses([faux_message([faux_tool_call("noop", {})]), faux_message("unused")])
    agent = Agent(model=faux.get_model(), tools=[noop_tool()])
    turns = [0]

    def listener(event: Any) -> None:
        if event.type == "tool_execution_end":
            agent.steer("s1")
            agent.steer("s2")
        if event.type == "turn_start":
            turns[0] += 1
            if turns[0] == 2:  # the steering poll already took "s1"; it is not delivered yet
                raise RuntimeError("turn_start listener broke")

    unsubscribe = agent.subscribe(listener)
    result = agent.prompt("go")
    assert result.error_message == "turn_start listener broke"
    assert [text_of(m) for m in agent.steering_queue.drain("all")] == ["s1", "s2"]
    unsubscribe()


# --------------------------------------------------------------------------- abort and sequential tools


class IgnoresItsSignal:
    """A tool that never looks at its signal: it waits for ``release`` (set at cleanup)."""

    def __init__(self) -> None:
        self.started, self.release = threading.Event(), threading.Event()
        self.threads: list[threading.Thread] = []

    def execute(self, call_id: str, args: Any, signal: AbortSignal, on_update: Any) -> AgentToolResult:
        self.threads.append(threading.current_thread())
        self.started.set()
        self.release.wait(WAIT)
        return AgentToolResult([TextContent("finished anyway")])

    def tool(self, **options: Any) -> AgentTool:
        return AgentTool("slow", "ignores its signal", {"type": "object", "properties": {}}, self.execute, **options)


def _run_and_abort(faux, tool: IgnoresItsSignal, agent: Agent) -> RunResult:
    faux.set_responses([faux_message([faux_tool_call("slow", {}, id="a")]), faux_message("never")])
    threading.Thread(target=lambda: tool.started.wait(WAIT) and agent.abort()).start()
    try:
        return agent.prompt("go")
    finally:
        tool.release.set()


@pytest.mark.parametrize("options", [{"tool_execution": "sequential"}, {"execution_mode": "sequential"}])
@pytest.mark.parametrize("timeout", [None, WAIT])
def test_abort_abandons_a_sequential_tool_that_ignores_it(faux, options: dict[str, Any], timeout: Any) -> None:
    slow = IgnoresItsSignal()
    tool_options = {"timeout": timeout, **({} if "tool_execution" in options else options)}
    agent_options = options if "tool_execution" in options else {}
    before = abandoned_tool_threads()
    agent = Agent(model=faux.get_model(), tools=[slow.tool(**tool_options)], abort_grace=0.05, **agent_options)
    result = _run_and_abort(faux, slow, agent)
    assert result.stop_reason == "aborted"
    [tool_result] = [m for m in agent.state.messages if m.role == "toolResult"]
    assert tool_result.is_error and text_of(tool_result) == (
        "Tool slow was aborted: it did not stop within the abort grace period of 0.05 s"
    )
    assert abandoned_tool_threads() == before + 1
    assert slow.threads and slow.threads[0] is not threading.current_thread()


def test_abort_waits_for_an_on_run_thread_tool(faux) -> None:
    slow = IgnoresItsSignal()
    before = abandoned_tool_threads()
    agent = Agent(model=faux.get_model(), tools=[slow.tool(on_run_thread=True)], abort_grace=0)
    faux.set_responses([faux_message([faux_tool_call("slow", {}, id="a")]), faux_message("never")])

    def abort_then_release() -> None:
        slow.started.wait(WAIT)
        agent.abort()
        slow.release.set()  # with a grace of 0, a call that could be abandoned would be abandoned at once

    threading.Thread(target=abort_then_release).start()
    try:
        result = agent.prompt("go")
    finally:
        slow.release.set()
    assert result.stop_reason == "aborted"
    [tool_result] = [m for m in agent.state.messages if m.role == "toolResult"]
    assert (tool_result.is_error, text_of(tool_result)) == (False, "finished anyway")
    assert abandoned_tool_threads() == before
    assert slow.threads == [threading.current_thread()]
