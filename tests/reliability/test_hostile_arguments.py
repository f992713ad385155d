"""Hostile tool arguments from a model: each gets an error result for that call, the tool never
runs on them, and the transcript stays usable (the next request is valid JSON, ``to_dict()``
works, the agent goes on).

The model is a real OpenAI-compatible server on 127.0.0.1 streaming the arguments as text.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from piagent import AbortController, Agent, AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, run_agent_loop
from piagent.ai import TextContent
from piagent.ai.alternatives import alternatives_problem
from piagent.ai.arguments_check import MAX_ARGUMENT_CHARS, MAX_ARGUMENT_DEPTH, MAX_INTEGER_DIGITS
from piagent.ai.patterns import slow_pattern_problem
from piagent.exceptions import InvalidValueError
from tests.ai.providers.openai_wire import chat_stream, chat_text, chunk, tool_delta
from tests.reliability.wires import COMPLETIONS
from tests.support.loop import MODEL, ScriptedStream, assistant, call, user
from tests.support.scripted_server import ScriptedServer

pytestmark = pytest.mark.timeout(20)


def strict_json(body: bytes) -> Any:
    """What a real API accepts: RFC 8259 JSON (no NaN, no Infinity)."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(body, parse_constant=refuse)


def tool_call_answer(raw_arguments: str) -> list[bytes]:
    return chat_stream(
        chunk({"role": "assistant", "content": None}),
        tool_delta(0, "call_1", "echo", raw_arguments[: len(raw_arguments) // 2]),
        tool_delta(0, arguments=raw_arguments[len(raw_arguments) // 2 :]),
        chunk({}, "tool_calls"),
    )


def echo_tool(ran: list[Any], schema: Any = None) -> AgentTool:
    def execute(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        ran.append(args)
        return AgentToolResult([TextContent("echoed")])

    parameters = schema or {"type": "object", "properties": {"text": {}}}
    return AgentTool(name="echo", label="echo", description="Echo.", parameters=parameters, execute=execute)


def run_attack(raw_arguments: str, schema: Any = None) -> tuple[str, list[Any], Agent, ScriptedServer]:
    """One prompt whose answer calls ``echo`` with ``raw_arguments``; returns the tool result text."""
    server = ScriptedServer()
    server.reply(tool_call_answer(raw_arguments))
    server.reply(chat_text("Understood."))
    server.reply(chat_text("Still here."))
    ran: list[Any] = []
    agent = Agent(model=COMPLETIONS.model(server.url), tools=[echo_tool(ran, schema)], get_api_key=lambda p: "k")
    agent.prompt("go")
    result = next(m for m in agent.state.messages if m.role == "toolResult")
    assert result.is_error
    return result.content[0].text, ran, agent, server


def assert_transcript_usable(agent: Agent, server: ScriptedServer) -> None:
    strict_json(server.requests[1].body)  # the request after the tool result is valid JSON
    json.dumps([m.to_dict() for m in agent.state.messages], allow_nan=False)
    agent.prompt("and now?")
    assert agent.state.messages[-1].text == "Still here."
    strict_json(server.requests[2].body)
    server.close()


def test_deeply_nested_arguments_get_an_error_result_and_leave_the_transcript_usable():
    depth = 2_000
    text, ran, agent, server = run_attack('{"text": ' + "[" * depth + "]" * depth + "}")
    assert text == f"Tool echo was not executed: its arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels"
    assert ran == []
    assert_transcript_usable(agent, server)


def test_a_number_too_large_for_a_float_gets_an_error_result_never_infinity_in_a_request():
    text, ran, agent, server = run_attack('{"text": 1e999999}')
    assert text == (
        "Tool echo was not executed: its arguments contain a number that is not finite (inf), "
        "which JSON cannot represent"
    )
    assert ran == []
    assert_transcript_usable(agent, server)


def test_an_over_long_integer_gets_an_error_result_instead_of_silently_empty_arguments():
    text, ran, agent, server = run_attack('{"text": ' + "7" * 5_000 + "}")
    assert text == (
        f"Tool echo was not executed: its arguments contain an integer of 5,000 digits (at most {MAX_INTEGER_DIGITS:,})"
    )
    assert ran == []
    assert_transcript_usable(agent, server)


@pytest.mark.parametrize(
    "value", [10**MAX_INTEGER_DIGITS, -(10**5_000), 7**20_000], ids=["limit", "5000-digits", "7**20000"]
)
def test_an_over_long_integer_built_in_python_gets_an_error_result(value):
    """Arguments a stream function built in Python (never parsed from JSON): an int of 5,000+
    digits cannot even be turned into text on Python 3.11+."""
    ran: list[Any] = []
    events: list[Any] = []
    tool_call = call("call_1", "echo", text=value)
    run_agent_loop(
        [user("go")],
        AgentContext("", [], [echo_tool(ran)]),
        AgentLoopConfig(model=MODEL),
        events.append,
        AbortController().signal,
        ScriptedStream([assistant([tool_call]), assistant("done")]),
    )
    (end,) = [event for event in events if event.type == "tool_execution_end"]
    assert end.is_error
    assert end.result.content[0].text == (
        f"Tool echo was not executed: its arguments contain an integer of more than {MAX_INTEGER_DIGITS:,} digits"
    )
    assert ran == []


def test_an_integer_of_the_most_digits_allowed_is_passed_to_the_tool():
    ran: list[Any] = []
    value = -(10**MAX_INTEGER_DIGITS - 1)
    run_agent_loop(
        [user("go")],
        AgentContext("", [], [echo_tool(ran)]),
        AgentLoopConfig(model=MODEL),
        lambda event: None,
        AbortController().signal,
        ScriptedStream([assistant([call("call_1", "echo", text=value)]), assistant("done")]),
    )
    assert ran == [{"text": value}]


def test_arguments_larger_than_the_bound_are_not_validated():
    items = json.dumps([123] * (MAX_ARGUMENT_CHARS // 4))  # wrong-type items: one error each if validated
    schema = {"type": "object", "properties": {"text": {"type": "array", "items": {"type": "string"}}}}
    text, ran, agent, server = run_attack('{"text": ' + items + "}", schema)
    assert text == f"Tool echo was not executed: its arguments are larger than {MAX_ARGUMENT_CHARS:,} characters"
    assert_transcript_usable(agent, server)


def test_many_validation_errors_are_listed_up_to_a_bound():
    schema = {"type": "object", "properties": {"text": {"type": "array", "items": {"type": "string"}}}}
    text, ran, agent, server = run_attack('{"text": ' + json.dumps([{}] * 5_000) + "}", schema)
    assert text.count("\n  - text.") == 20
    assert "(more errors not listed: the first 20 are shown)" in text
    server.close()


@pytest.mark.parametrize(
    "pattern",
    [r"^(a+)+$", r"^(a*)*$", r"^(\w+\s?)*$", r"^(\d+|x)*$", r"^(?:x|(?:\d+)?)+$", r"^([a-z]*|-)+$", r"^((a+)?)+$"],
)
def test_a_pattern_repeating_a_repeat_is_found_also_inside_an_alternation(pattern):
    assert slow_pattern_problem(pattern) is not None


@pytest.mark.parametrize(
    "pattern", [r"^([a-z]+\.)+$", r"^(\d+-|x)*$", r"^[a-z]+(,[a-z]+)*$", r"^(ab|cd)+$", r"^(\d{3}-?)+$"]
)
def test_a_pattern_whose_repeat_needs_a_separator_is_accepted(pattern):
    assert slow_pattern_problem(pattern) is None


def test_a_catastrophic_schema_pattern_is_refused_before_any_argument_meets_it():
    schema = {"type": "object", "properties": {"text": {"type": "string", "pattern": "^(a+)+$"}}}
    text, ran, agent, server = run_attack(json.dumps({"text": "a" * 40 + "!"}), schema)
    assert text == (
        "The tool's parameter schema is refused: the pattern '^(a+)+$' repeats a group that itself repeats, "
        "which can take exponential time. Fix the schema."
    )
    assert ran == []
    server.close()


def nested_alternatives(levels: int) -> dict[str, Any]:
    """Two object alternatives sharing what is below them, ``levels`` deep: 2**levels paths."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        branch = {"type": "object", "properties": {"a": schema}}
        schema = {"anyOf": [{**branch, "required": ["y"]}, {**branch, "required": ["z"]}]}
    return {"type": "object", "properties": {"a": schema}}


def test_alternatives_nested_into_exponential_work_are_refused_before_any_argument_meets_them():
    """15 levels took 17.6 s of one thread holding the GIL, an abort seen only after it."""
    arguments: Any = 5
    for _ in range(16):
        arguments = {"a": arguments}
    text, ran, agent, server = run_attack(json.dumps(arguments), nested_alternatives(15))
    assert text == (
        "The tool's parameter schema is refused: its anyOf/oneOf alternatives nest into more than 64 paths, "
        "which take exponential time to check. Fix the schema."
    )
    assert ran == []
    server.close()


def test_alternatives_that_multiply_little_are_accepted():
    assert alternatives_problem(nested_alternatives(6)) is None  # 64 paths
    optional: dict[str, Any] = {"type": "string"}
    for _ in range(50):  # Optional[...] 50 deep: the null alternative multiplies nothing
        optional = {"anyOf": [{"type": "object", "properties": {"a": optional}}, {"type": "null"}]}
    assert alternatives_problem(optional) is None
    assert alternatives_problem(nested_alternatives(7)) is not None


def test_an_output_type_with_alternatives_nested_too_deep_is_refused_when_set():
    with pytest.raises(InvalidValueError, match="the output_type schema is refused: its anyOf/oneOf alternatives"):
        Agent(output_type=nested_alternatives(15))


# --------------------------------------------------------------------------- a tool that ignores abort


def test_abort_returns_from_prompt_while_a_tool_ignores_its_signal():
    """The user pressed stop: prompt() returns after the grace period, not when the tool is done,
    and the tool's late result is not recorded as a success."""
    from piagent.testing import faux_message, faux_tool_call, register_faux_provider

    started, release = threading.Event(), threading.Event()

    def execute(call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
        started.set()
        release.wait(20)  # sleeps, never looks at its signal
        return AgentToolResult([TextContent("slept well")])

    stubborn = AgentTool(name="nap", label="nap", description="Nap.", parameters={"type": "object"}, execute=execute)
    faux = register_faux_provider()
    try:
        faux.set_responses([faux_message([faux_tool_call("nap", {})]), faux_message("never")])
        agent = Agent(model=faux.get_model(), tools=[stubborn], abort_grace=0.2)
        threading.Thread(target=lambda: started.wait(10) and agent.abort(), daemon=True).start()
        agent.prompt("nap")  # returns although the tool still sleeps
        still_sleeping = not release.is_set()
    finally:
        release.set()
        faux.unregister()
    assert still_sleeping
    result = next(m for m in agent.state.messages if m.role == "toolResult")
    assert result.is_error
    assert result.content[0].text == "Tool nap was aborted: it did not stop within the abort grace period of 0.2 s"
    assert agent.state.messages[-1].stop_reason == "aborted"
