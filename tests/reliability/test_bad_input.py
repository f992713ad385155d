"""Bad input: each case gives a clear message and loses nothing already in the transcript.

Tool and hook failures become error tool results the model sees; failures of the run itself
(a raising listener or loop hook, a missing key) end the run with an error message in the
transcript; misuse (a bad model string, an unreadable message dict) raises a typed exception.
After each, the same agent takes the next prompt.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from piagent import (
    AfterToolCallResult,
    Agent,
    AgentTool,
    AgentToolResult,
    ModelNotFoundError,
    UserMessage,
    message_from_dict,
    tool,
)
from piagent.ai import Context, ImageContent, StreamOptions, TextContent, stream
from piagent.ai.transform import IMAGE_PLACEHOLDER, NO_RESULT_TEXT
from piagent.testing import faux_message, faux_tool_call
from tests.support.loop import echo_tool

pytestmark = pytest.mark.timeout(20)

KEY = "sk-bad-input-0123456789abcdef"
EMPTY = {"type": "object", "properties": {}}


def agent_with_history(faux: Any, **options: Any) -> Agent:
    """An agent that already holds one finished exchange (the part that must never be lost)."""
    faux.set_responses([faux_message("first answer")])
    agent = Agent(model=faux.get_model(), **options)
    assert agent.prompt("first").text == "first answer"
    return agent


def assert_kept(before: list[Any], agent: Agent) -> None:
    after = agent.state.messages
    assert len(after) > len(before) and all(a is b for a, b in zip(after, before))


def tool_results(agent: Agent) -> list[Any]:
    return [m for m in agent.state.messages if m.role == "toolResult"]


def run_tool_call(faux: Any, agent: Agent, name: str, args: dict[str, Any]) -> Any:
    """One model turn calling ``name``; the model then answers "after"."""
    faux.set_responses([faux_message([faux_tool_call(name, args)]), faux_message("after")])
    result = agent.prompt("call it")
    assert result.text == "after" and result.stop_reason == "stop"  # the run went on: the model saw the error
    return tool_results(agent)[-1]


# --------------------------------------------------------------------------- tools


@pytest.mark.parametrize(
    "args, detail",
    [
        ({}, "  - value: 'value' is a required property"),
        ({"value": ["a", "list"]}, "  - value: ['a', 'list'] is not of type 'string'"),
    ],
)
def test_arguments_failing_the_schema_are_an_error_result_naming_the_problem(faux, args, detail):
    agent = agent_with_history(faux, tools=[echo_tool()])
    before = list(agent.state.messages)
    result = run_tool_call(faux, agent, "echo", args)
    text = result.content[0].text
    assert result.is_error and text.startswith('Validation failed for tool "echo":\n') and detail in text
    assert text.endswith("Received arguments:\n" + json.dumps(args, indent=2))
    assert_kept(before, agent)


def test_an_unknown_tool_is_an_error_result(faux):
    agent = agent_with_history(faux, tools=[echo_tool()])
    before = list(agent.state.messages)
    result = run_tool_call(faux, agent, "no_such_tool", {})
    assert result.is_error and result.content[0].text == "Tool no_such_tool not found"
    assert_kept(before, agent)


def test_a_raising_tool_is_an_error_result_with_its_message(faux):
    def broken(*args: Any) -> AgentToolResult:
        raise PermissionError("cannot read /etc/shadow")

    agent = agent_with_history(faux, tools=[AgentTool("broken", "", EMPTY, broken)])
    before = list(agent.state.messages)
    result = run_tool_call(faux, agent, "broken", {})
    assert result.is_error and result.content[0].text == "cannot read /etc/shadow"
    assert_kept(before, agent)


@tool
def unserialisable() -> object:
    """Returns something with no JSON form."""
    return object()


@pytest.mark.parametrize(
    "make, expected",
    [
        (
            lambda: unserialisable,
            "Tool unserialisable returned a value of type object that cannot be sent to the model",
        ),
        (lambda: AgentTool("t", "", EMPTY, lambda *a: 42), "Tool t returned int, expected AgentToolResult"),
        (
            lambda: AgentTool("t", "", EMPTY, lambda *a: AgentToolResult("a plain string")),
            "Tool t returned invalid content: expected a list of TextContent/ImageContent blocks, got str",
        ),
        (
            lambda: AgentTool("t", "", EMPTY, lambda *a: AgentToolResult([{"type": "text", "text": "x"}])),
            "Tool t returned invalid content: expected TextContent/ImageContent blocks, got dict",
        ),
        (
            lambda: AgentTool("t", "", EMPTY, lambda *a: AgentToolResult([TextContent(b"bytes")])),
            "Tool t returned invalid content: expected TextContent/ImageContent blocks, "
            "got TextContent with text of type bytes",
        ),
    ],
    ids=["@tool-object", "int", "str-content", "dict-blocks", "bytes-text"],
)
def test_a_result_that_cannot_be_sent_is_an_error_result_and_never_enters_the_transcript(faux, make, expected):
    agent = agent_with_history(faux, tools=[make()])
    before = list(agent.state.messages)
    result = run_tool_call(faux, agent, make().name, {})
    assert result.is_error and result.content[0].text.startswith(expected)
    assert_kept(before, agent)
    json.dumps([m.to_dict() for m in agent.state.messages])  # the transcript still saves
    faux.set_responses([faux_message("still fine")])
    assert agent.prompt("next").text == "still fine"


def test_a_huge_output_is_cut_with_a_note_saying_how_much(faux):
    huge = "x" * 5_000_000

    agent = agent_with_history(
        faux, tools=[AgentTool("dump", "", EMPTY, lambda *a: AgentToolResult([TextContent(huge)]))]
    )
    result = run_tool_call(faux, agent, "dump", {})
    text = result.content[0].text
    assert not result.is_error and text.startswith("x" * 100_000)
    assert text.endswith(
        "\n\n[Output truncated: 4,900,000 of 5,000,000 characters omitted (max_tool_result_chars=100,000)]"
    )
    assert len(text) < 100_200


def test_a_huge_error_message_is_cut_too_and_the_bound_is_an_option(faux):
    def explode(*args: Any) -> AgentToolResult:
        raise ValueError("e" * 10_000)

    agent = agent_with_history(faux, tools=[AgentTool("explode", "", EMPTY, explode)], max_tool_result_chars=1_000)
    result = run_tool_call(faux, agent, "explode", {})
    assert result.is_error and result.content[0].text == "e" * 1_000 + (
        "\n\n[Output truncated: 9,000 of 10,000 characters omitted (max_tool_result_chars=1,000)]"
    )


# --------------------------------------------------------------------------- hooks and listeners


def test_hooks_returning_the_wrong_type_are_error_results(faux):
    agent = agent_with_history(faux, tools=[echo_tool()], before_tool_call=lambda ctx, signal: {"block": True})
    result = run_tool_call(faux, agent, "echo", {"value": "x"})
    assert result.content[0].text == "before_tool_call returned dict, expected BeforeToolCallResult or None"
    agent.before_tool_call = None
    agent.after_tool_call = lambda ctx, signal: AfterToolCallResult(content="not a list")
    result = run_tool_call(faux, agent, "echo", {"value": "x"})
    assert result.is_error and result.content[0].text.startswith("after_tool_call returned invalid content")


def _raise(message: str) -> Callable[..., Any]:
    def hook(*args: Any) -> Any:
        raise RuntimeError(message)

    return hook


@pytest.mark.parametrize("hook", ["before_tool_call", "after_tool_call"])
def test_a_raising_tool_hook_is_an_error_result(faux, hook):
    agent = agent_with_history(faux, tools=[echo_tool()], **{hook: _raise(f"{hook} broke")})
    before = list(agent.state.messages)
    result = run_tool_call(faux, agent, "echo", {"value": "x"})
    assert result.is_error and result.content[0].text == f"{hook} broke"
    assert_kept(before, agent)


@pytest.mark.parametrize(
    "hook",
    [
        "transform_context",
        "convert_to_llm",
        "get_api_key",
        "prepare_next_turn",
        "should_stop_after_turn",
        "finish_turn",
        "prepare_request",
    ],
)
def test_a_raising_loop_hook_ends_the_run_as_an_error_message(faux, hook):
    agent = agent_with_history(faux)
    before = list(agent.state.messages)
    setattr(agent, hook, _raise(f"{hook} broke"))
    # prepare_next_turn runs only before a second turn (pi 1.6): a tool call makes one
    first = [faux_message([faux_tool_call("missing", {})])] if hook == "prepare_next_turn" else []
    faux.set_responses([*first, faux_message("answer")])
    result = agent.prompt("second")
    assert (result.stop_reason, result.error_message) == ("error", f"{hook} broke")
    assert_kept(before, agent)
    assert agent.state.messages[-1].error_message == f"{hook} broke" and agent.state.error_message == f"{hook} broke"
    setattr(agent, hook, None)
    faux.set_responses([faux_message("back")])
    assert agent.prompt("third").text == "back"


@pytest.mark.parametrize("event_type", ["message_update", "message_end", "tool_execution_start", "turn_end"])
def test_a_raising_listener_ends_the_run_as_an_error_message(faux, event_type):
    agent = agent_with_history(faux, tools=[echo_tool()])
    before = list(agent.state.messages)

    raised: list[str] = []

    def listener(event: Any) -> None:
        if event.type == event_type and not raised:
            raised.append(event_type)
            raise RuntimeError(f"listener broke at {event_type}")

    unsubscribe = agent.subscribe(listener)
    faux.set_responses([faux_message([faux_text_and_call()]), faux_message("unused")])
    result = agent.prompt("second")
    assert (result.stop_reason, result.error_message) == ("error", f"listener broke at {event_type}")
    assert_kept(before, agent)
    assert agent.state.is_streaming is False and agent.state.pending_tool_calls == frozenset()
    unsubscribe()
    faux.set_responses([faux_message("back")])
    assert agent.prompt("third").text == "back"


def faux_text_and_call() -> Any:
    return faux_tool_call("echo", {"value": "x"})


def test_a_listener_that_raises_again_on_the_failure_makes_prompt_raise_and_the_agent_stays_usable(faux):
    agent = agent_with_history(faux)
    before = list(agent.state.messages)

    def listener(event: Any) -> None:
        if event.type == "agent_end":
            raise RuntimeError("listener always breaks")

    unsubscribe = agent.subscribe(listener)
    faux.set_responses([faux_message("answer")])
    with pytest.raises(
        RuntimeError, match="^listener always breaks$"
    ):  # docs/loop.md#rule-22: the failure's own dispatch raised
        agent.prompt("second")
    assert_kept(before, agent)
    assert agent.state.messages[-1].error_message == "listener always breaks"
    assert agent.state.is_streaming is False and agent.signal is None
    unsubscribe()
    faux.set_responses([faux_message("back")])
    assert agent.prompt("third").text == "back"


def test_a_listener_raising_mid_batch_leaves_a_call_the_next_request_repairs(server, wire):
    agent = Agent(model=wire.model(server.url), tools=[echo_tool()], get_api_key=lambda p: KEY)
    unsubscribe = agent.subscribe(lambda e: e.type == "tool_execution_end" and _raise("listener broke")())
    server.reply(wire.tool_call("call_1", "echo", {"value": "x"}))
    result = agent.prompt("hi")
    assert (result.stop_reason, result.error_message) == ("error", "listener broke")
    assert [m.role for m in agent.state.messages] == ["user", "assistant", "assistant"]
    unsubscribe()
    server.reply(wire.text("Back."))
    assert agent.continue_().text == "Back."  # a retry from the failure
    assert wire.history(server.requests[-1].json) == ["user:hi", "call:echo", f"result:{NO_RESULT_TEXT}"]


# --------------------------------------------------------------------------- messages and models


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n-not-really-an-image").decode()


def test_images_sent_to_a_text_only_model_become_a_placeholder(server, wire):
    agent = Agent(model=wire.model(server.url, input=["text"]), get_api_key=lambda p: KEY)
    server.reply(wire.text("I cannot see it."))
    result = agent.prompt("what is this?", images=[ImageContent(PNG, "image/png"), ImageContent(PNG, "image/png")])
    assert result.text == "I cannot see it."
    body = server.requests[0].body.decode()
    assert PNG not in body and body.count(IMAGE_PLACEHOLDER) == 1  # two consecutive images, one placeholder
    assert agent.state.messages[0].content[1] == ImageContent(PNG, "image/png")  # the transcript keeps them


@dataclass
class Note:
    """An application message: the loop carries it, the model never sees it."""

    text: str
    role: str = "notification"


def test_messages_with_unknown_roles_pass_through_the_loop_and_are_not_sent(server, wire):
    agent = Agent(model=wire.model(server.url), get_api_key=lambda p: KEY)
    note = Note("user switched project")
    seen: list[Any] = []
    agent.subscribe(lambda e: e.type == "message_end" and seen.append(e.message))
    server.reply(wire.text("ok"))
    result = agent.prompt([note, UserMessage("hi")])
    assert result.text == "ok" and seen[0] is note and agent.state.messages[0] is note
    assert wire.history(server.requests[0].json) == ["user:hi"]
    assert "switched project" not in server.requests[0].body.decode()


def test_a_provider_given_an_unknown_role_directly_leaves_it_out(server, wire):
    server.reply(wire.text("ok"))
    events = stream(
        wire.model(server.url), Context("", [Note("secret note"), UserMessage("hi")]), StreamOptions(api_key=KEY)
    )
    assert events.result(timeout=10).text == "ok"
    assert wire.history(server.requests[0].json) == ["user:hi"]


@pytest.mark.parametrize(
    "data, error, text",
    [
        ({"role": "notification", "text": "x"}, ValueError, "Unknown message role: 'notification'"),
        ({"content": "x"}, ValueError, "Unknown message role: None"),
        (
            {"role": "toolResult", "content": []},
            ValueError,
            "a toolResult message needs 'toolCallId'; got keys ['content', 'role']",
        ),
        ({"role": "user", "content": [{"type": "image", "data": "x"}]}, ValueError, "an image block needs 'mimeType'"),
        ({"role": "user", "content": 5}, ValueError, "'content' must be a string or a list of blocks, got int"),
        ("user: hi", TypeError, "a message must be a dict (its to_dict() form), got str"),
    ],
)
def test_message_from_dict_raises_a_clear_error(data, error, text):
    with pytest.raises(error) as info:
        message_from_dict(data)
    assert str(info.value).startswith(text)


@pytest.mark.parametrize(
    "spec, text",
    [
        ("no-such-provider:model", "Unknown provider 'no-such-provider'. Known providers: "),
        ("gpt-4o", "Invalid model reference 'gpt-4o': use 'provider:model-id' (e.g. 'openai:gpt-5.5')"),
        ("openai:gpt-nope", "Unknown model openai:gpt-nope."),
    ],
)
def test_an_invalid_model_string_raises_model_not_found_and_changes_nothing(faux, spec, text):
    with pytest.raises(ModelNotFoundError) as info:
        Agent(model=spec)
    assert str(info.value).startswith(text) and isinstance(info.value, LookupError)
    agent = agent_with_history(faux)
    model, before = agent.state.model, list(agent.state.messages)
    with pytest.raises(ModelNotFoundError):
        agent.state.model = spec
    assert agent.state.model is model and agent.state.messages == before


def test_a_missing_api_key_ends_the_run_naming_the_variable_then_the_key_is_picked_up(server, wire, monkeypatch):
    # a remote host (a key is needed), reached through the test server acting as HTTP proxy
    for name in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", server.url)
    agent = Agent(model=wire.model("http://api.example.test"))
    first = agent.prompt("hi")
    variables = "GEMINI_API_KEY or GOOGLE_API_KEY" if wire.provider == "google" else wire.env_var
    assert (first.stop_reason, first.error_message) == (
        "error",
        f"No API key for provider {wire.provider}: set {variables} or pass api_key",
    )
    assert [m.role for m in agent.state.messages] == ["user", "assistant"] and server.requests == []
    before = list(agent.state.messages)

    monkeypatch.setenv(wire.env_var, KEY)
    server.reply(wire.text("Hello."))
    assert agent.continue_().text == "Hello."
    assert_kept(before, agent)
    sent = server.requests[0]
    assert KEY in sent.headers[wire.key_header] and KEY not in sent.path
