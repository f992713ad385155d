"""piagent's ``openai-completions`` provider against a real OpenAI-compatible server.

The server is llama-cpp-python's (``python -m llama_cpp.server``) serving the embedded model
on 127.0.0.1, started once per chat format (``chatml-function-calling`` and the plain
``chatml``; see conftest). The model is declared as a user would, with no compat settings.
With ``chatml-function-calling`` the server repeats a tool call's id and name in every
streamed delta: the provider must treat a repeat as the same value, not as text to append.
Neither format makes several calls in one streamed response (chatml-function-calling does so
only for requests that are not streamed), so parallel calls are covered by the scripted
server of the fast suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from piagent import Agent, AgentToolResult, AssistantMessage, TextContent, ToolCall, ToolResultMessage
from piagent.abort import AbortController
from piagent.ai import Context, Tool, UserMessage, custom_model, stream_simple
from piagent.types import AgentTool, TurnUpdate
from tests.support.agent_support import text_of
from tests_local.conftest import running_server

WAIT = 120
WEATHER = Tool(
    "get_weather",
    "Get the current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def ask(text: str, tools=None) -> Context:
    return Context("You are a helpful assistant. Answer briefly.", [UserMessage(text)], tools)


def test_a_text_answer_streams_in_several_deltas(served_model):
    events = stream_simple(served_model, ask("What is the capital of France?"))
    deltas = [e.delta for e in events if e.type == "text_delta"]
    final = events.result(timeout=WAIT)
    assert final.stop_reason in ("stop", "length"), final.error_message
    assert len(deltas) > 2 and final.text == "".join(deltas) and final.text.strip()


def needs_function_calling(chat_format: str) -> None:
    if chat_format != "chatml-function-calling":
        pytest.skip(f"the {chat_format} format does not turn tools into calls")


def test_a_forced_tool_call_keeps_the_repeated_id_and_name_as_one_value(served_model, chat_format):
    needs_function_calling(chat_format)
    events = stream_simple(
        served_model, ask("What's the weather in Paris?", [WEATHER]), tool_choice={"name": "get_weather"}
    )
    deltas = [e for e in events if e.type == "toolcall_delta"]
    final = events.result(timeout=WAIT)
    assert final.stop_reason == "toolUse", final.error_message
    assert len(deltas) > 1  # the server sent the id and name again with each of these
    (call,) = final.tool_calls
    assert call.name == "get_weather"
    assert call.id.startswith("call_") and call.id.count("get_weather") == 1
    assert isinstance(call.arguments.get("city"), str)


def test_a_forced_tool_call_is_executed_and_answered_through_the_agent(served_model, chat_format):
    needs_function_calling(chat_format)
    seen = []

    def execute(tool_call_id, args, signal, on_update):
        seen.append(args)
        return AgentToolResult([TextContent(f"{args['city']}: sunny, 24 °C")])

    weather = AgentTool(WEATHER.name, WEATHER.description, WEATHER.parameters, execute)
    agent = Agent(
        model=served_model,
        system_prompt="You are a helpful assistant. Answer briefly.",
        tools=[weather],
        tool_choice={"name": "get_weather"},
        prepare_next_turn=lambda context, signal: TurnUpdate(tool_choice="none") if context.tool_results else None,
        max_turns=3,
    )
    result = agent.prompt("What's the weather in Paris?")
    assert result.stop_reason in ("stop", "length"), result.error_message
    roles = [m.role for m in result.messages]
    assert roles == ["user", "assistant", "toolResult", "assistant"]
    assert len(seen) == 1 and isinstance(seen[0]["city"], str)
    assert result.messages[2].tool_call_id == result.messages[1].tool_calls[0].id
    assert result.text.strip()


def test_abort_mid_stream_ends_the_answer_and_leaves_the_server_usable(served_model):
    controller = AbortController()
    events = stream_simple(
        served_model, ask("Write a long story about a dragon."), signal=controller.signal, max_tokens=400
    )
    deltas = []
    for event in events:
        if event.type == "text_delta":
            deltas.append(event.delta)
            if len(deltas) == 3:
                controller.abort()
    final = events.result(timeout=WAIT)
    assert final.stop_reason == "aborted"
    assert final.text == "".join(deltas) and len(deltas) == 3
    again = stream_simple(served_model, ask("Say hi.")).result(timeout=WAIT)
    assert again.stop_reason in ("stop", "length"), again.error_message


def test_a_conversation_holding_a_tool_call_and_its_result_is_accepted(served_model):
    """The round trip's second request: an assistant message with only a tool call, then its
    result (the server answered HTTP 500 to this when piagent sent ``content: null``)."""
    call = AssistantMessage(
        [ToolCall("call_1", "get_weather", {"city": "Paris"})],
        api=served_model.api,
        provider=served_model.provider,
        model=served_model.id,
        stop_reason="toolUse",
    )
    history = [
        UserMessage("What's the weather in Paris?"),
        call,
        ToolResultMessage("call_1", "get_weather", [TextContent("Paris: sunny, 24 °C")]),
    ]
    agent = Agent(model=served_model, system_prompt="You are a helpful assistant.", messages=history)
    result = agent.continue_()
    assert result.stop_reason in ("stop", "length"), result.error_message
    assert result.text.strip()


def test_a_steering_message_reaches_the_model_after_the_current_turn(served_model):
    agent = Agent(model=served_model, system_prompt="You are a helpful assistant. Answer briefly.")
    steered = threading.Event()

    def steer_on_first_delta(event):
        if event.type == "message_update" and not steered.is_set():
            steered.set()
            agent.steer("Now say goodbye.")

    agent.subscribe(steer_on_first_delta)
    result = agent.prompt("Say hello.")
    assert result.stop_reason in ("stop", "length"), result.error_message
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant"]
    assert text_of(result.messages[2]) == "Now say goodbye."
    assert all(m.stop_reason in ("stop", "length") for m in result.messages if m.role == "assistant")


def keyless_env():
    return {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PIAGENT_MODEL"}


def test_the_command_answers_through_the_server(llama_server):
    done = subprocess.run(
        [sys.executable, "-m", "piagent", "-v", "--base-url", llama_server, "--model", "smollm2-135m",
         "--max-tokens", "60", "What is the capital of France? One word."],
        capture_output=True, text=True, timeout=WAIT, env=keyless_env(),
    )  # fmt: skip
    assert done.returncode in (0, 3), done.stderr  # 3: the answer reached the model's token limit
    assert done.stdout.strip()
    assert "supports_null_content=false" in done.stderr  # what -v says about an unknown server
    assert "error" not in done.stderr


# --------------------------------------------------------------------------- tool calls with no flag set
# llama-cpp-python's server offers tools only when tool_choice is given, and cannot stream an
# automatic choice (an empty HTTP 200 stream): piagent says "auto" and learns to send that
# request unstreamed (docs/servers.md#tool-calls). The model is declared with no compat.


def test_an_automatic_tool_choice_calls_the_tool_and_goes_on_after_its_result(served_model, chat_format):
    seen = []

    def execute(tool_call_id, args, signal, on_update):
        seen.append(args)
        return AgentToolResult([TextContent("Paris: sunny, 24 °C")])

    weather = AgentTool(WEATHER.name, WEATHER.description, WEATHER.parameters, execute)
    agent = Agent(model=served_model, system_prompt="Use the tools.", tools=[weather], max_turns=2)
    updates = []
    agent.subscribe(lambda event: updates.append(event) if event.type == "message_update" else None)
    result = agent.prompt("Call get_weather for Paris.")
    assistants = [m for m in result.messages if m.role == "assistant"]
    assert all(m.stop_reason != "error" for m in assistants), [m.error_message for m in assistants]
    if chat_format == "chatml-function-calling":
        assert seen and assistants[0].tool_calls[0].name == "get_weather"
        assert len(assistants) == 2  # the turn after the tool result (auto again) was answered too
        assert updates  # the agent saw the answers' events as it sees a stream's
    else:
        assert result.stop_reason in ("stop", "length") and not seen  # the plain template offers no tool


def piagent_command(llama_server, tmp_path, *flags):
    """``piagent --base-url ... -m any --tools read_file [flags] 'Read notes.txt'`` in a directory
    holding notes.txt, with its own HOME."""
    (tmp_path / "notes.txt").write_text("The meeting is at noon.\n")
    env = dict(keyless_env(), HOME=str(tmp_path / "home"))
    return subprocess.run(
        [sys.executable, "-m", "piagent", "--base-url", llama_server, "-m", "any", "--tools", "read_file",
         "--max-turns", "2", "--max-tokens", "60", *flags, "Read notes.txt"],
        capture_output=True, text=True, timeout=WAIT * 2, env=env, cwd=tmp_path,
    )  # fmt: skip


@pytest.mark.parametrize("flags", [(), ("--tool-choice", "read_file")], ids=["auto", "forced first"])
def test_the_command_calls_read_file_with_no_flag_for_the_server(llama_server, chat_format, tmp_path, flags):
    needs_function_calling(chat_format)
    done = piagent_command(llama_server, tmp_path, *flags)
    assert "→ read_file(" in done.stdout + done.stderr, done.stderr
    assert not [line for line in done.stderr.splitlines() if line.startswith("error:")], done.stderr
    # 3: the turn limit; chatml-function-calling never shows the model a tool's result, so the model
    # calls again (docs/servers.md#after-a-tool-result)
    assert done.returncode in (0, 3), done.stderr


# --------------------------------------------------------------------------- the GGUF's own chat template
# Started without --chat_format, the server renders the template the GGUF carries: content must
# be a string there (a list of parts failed the template mid-stream), a forced choice becomes a
# call, and the tool's result is rendered for the next turn, which answers in text
# (docs/servers.md#after-a-tool-result).


@pytest.fixture(scope="module")
def gguf_template_server(gguf, tmp_path_factory):
    with running_server(gguf, None, tmp_path_factory.mktemp("server") / "server.log") as base_url:
        yield base_url


def test_a_prompt_is_answered_by_a_server_rendering_the_ggufs_template(gguf_template_server):
    model = custom_model("smollm2-135m", base_url=gguf_template_server, max_tokens=60, register=False)
    result = Agent(model=model, system_prompt="Answer briefly.").prompt("What is the capital of France?")
    assert result.stop_reason in ("stop", "length"), result.error_message
    assert result.text.strip()


def test_the_command_with_a_forced_first_call_ends_with_an_answer(gguf_template_server, tmp_path):
    done = piagent_command(gguf_template_server, tmp_path, "--tool-choice", "read_file")
    assert "→ read_file(" in done.stdout + done.stderr, done.stderr
    assert done.stdout.strip()  # the second turn's text
    assert done.returncode == 0 or "output token limit" in done.stderr, done.stderr  # never the turn limit
