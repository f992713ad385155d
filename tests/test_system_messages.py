"""System messages in the transcript (pi 1.6, docs/loop.md#rule-36, docs/llm.md#system-messages):
replaying them, announcing tool changes, folding them into each API's request, the Agent's
state and reset, sessions; and a transcript without them behaving as 0.73.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from piagent import Agent, AgentContext, InvalidStateError, SystemMessage, message_from_dict, run_agent_loop
from piagent.ai import Context, Tool, get_model
from piagent.ai.providers import anthropic as anthropic_provider
from piagent.ai.transcript import collapse_system_messages, current_system_message, current_system_prompt
from piagent.sessions import JsonlSession
from tests.ai.providers.openai_wire import chat_text
from tests.ai.providers.test_agent_conversations import anthropic_text, google_model, google_reply
from tests.support.loop import MODEL, ScriptedStream, assistant, call, config, echo_tool, roles, user
from tests.support.scripted_server import ScriptedServer

KEY = "sk-test-system-messages-0123456789"
READ = Tool("read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
WRITE = Tool("write", "Write a file", {"type": "object", "properties": {"path": {"type": "string"}}})


def names(tools: Any) -> list[str]:
    return [t.name for t in tools or []]


# =========================================================================== replay


def test_replay_appends_contents_patches_sections_and_applies_tool_changes() -> None:
    transcript = [
        SystemMessage("You are terse.", {"skills": "<skills>a</skills>", "rules": "<rules/>"}, [READ]),
        user("hi"),
        SystemMessage("Answer in French.", {"skills": "<skills>b</skills>"}, [WRITE]),
        SystemMessage("", {"rules": None}, tools_removed=["read"]),
    ]
    head = current_system_message(transcript)
    assert head is not None and head.text == "You are terse.\n\nAnswer in French."
    assert head.sections == {"skills": "<skills>b</skills>"} and names(head.tools_added) == ["write"]
    assert current_system_prompt(transcript) == "You are terse.\n\nAnswer in French.\n\n<skills>b</skills>"
    assert current_system_prompt([user("no system messages")]) == ""


def test_system_messages_round_trip_through_pis_json_form() -> None:
    message = SystemMessage("base", {"a": "x", "b": None}, [READ], ["old"], timestamp=5)
    data = message.to_dict()
    assert data == {
        "role": "system",
        "content": "base",
        "sections": {"a": "x", "b": None},
        "toolsAdded": [READ.to_dict()],
        "toolsRemoved": [{"name": "old"}],
        "timestamp": 5,
    }
    assert message_from_dict(data) == message
    with pytest.raises(ValueError, match="toolsRemoved"):
        message_from_dict({**data, "toolsRemoved": ["old"]})


def test_a_context_without_system_messages_is_not_folded() -> None:
    context = Context("prompt", [user("hi")], [READ])
    assert collapse_system_messages(context) is context


def test_folding_keeps_the_contexts_own_prompt_and_tools_first() -> None:
    context = Context("base", [user("hi"), SystemMessage("more", tools_added=[WRITE])], [READ])
    folded = collapse_system_messages(context)
    assert folded.system_prompt == "base\n\nmore" and names(folded.tools) == ["read", "write"]
    assert roles(folded.messages) == ["user"]


# =========================================================================== compatibility


def test_a_transcript_without_system_messages_runs_as_in_0731() -> None:
    stream_fn = ScriptedStream([assistant("ok"), assistant("ok")])
    agent = Agent(model=MODEL, system_prompt="You are terse.", tools=[echo_tool()], stream_fn=stream_fn)
    agent.prompt("hi")
    request = stream_fn.requests[0].context
    assert request.system_prompt == "You are terse." and names(request.tools) == ["echo"]
    assert roles(agent.state.messages) == ["user", "assistant"]
    agent.state.system_prompt = "Changed."  # assignable, as in 0.73.1
    agent.state.tools = []  # not announced: no system message appears
    agent.prompt("again")
    assert stream_fn.requests[1].context.system_prompt == "Changed." and stream_fn.requests[1].context.tools == []
    assert "system" not in roles(agent.state.messages)


# =========================================================================== the Agent (pi 1.6 rules)


def test_the_system_messages_option_seeds_the_leading_message_which_state_replays() -> None:
    agent = Agent(model=MODEL, system_prompt="You are terse.", tools=[echo_tool()], system_messages=True)
    first = agent.state.messages[0]
    assert isinstance(first, SystemMessage) and first.text == "You are terse." and names(first.tools_added) == ["echo"]
    agent.state.messages.append(SystemMessage("", {"skills": "<skills/>"}))
    assert agent.state.system_prompt == "You are terse.\n\n<skills/>"
    with pytest.raises(InvalidStateError, match="append a SystemMessage"):
        agent.state.system_prompt = "other"


def test_tool_changes_between_runs_are_announced_before_the_next_request() -> None:
    stream_fn = ScriptedStream([assistant("one"), assistant("two")])
    other = echo_tool("other")
    agent = Agent(model=MODEL, system_prompt="base", tools=[echo_tool()], stream_fn=stream_fn, system_messages=True)
    agent.prompt("first")
    agent.state.tools = [other]
    result = agent.prompt("second")
    announcement = agent.state.messages[3]
    assert isinstance(announcement, SystemMessage)
    assert names(announcement.tools_added) == ["other"] and announcement.tools_removed == ["echo"]
    assert roles(agent.state.messages) == ["system", "user", "assistant", "system", "user", "assistant"]
    assert roles(result.messages)[:2] == ["system", "user"]
    # the stream function gets the transcript; the request's tools are what it declares
    assert stream_fn.requests[1].context.tools is None
    assert names(collapse_system_messages(stream_fn.requests[1].context).tools) == ["other"]


def test_a_pending_system_messages_tool_fields_are_replaced_by_the_real_difference() -> None:
    stream_fn = ScriptedStream([assistant("ok")])
    agent = Agent(model=MODEL, tools=[echo_tool()], stream_fn=stream_fn, system_messages=True)
    update = SystemMessage("Be brief.", tools_added=[WRITE])  # intent: only what runs is declared
    agent.prompt([update, user("go")])
    sent = agent.state.messages[1]
    assert isinstance(sent, SystemMessage) and sent.text == "Be brief." and sent.tools_added is None
    assert names(current_system_message(agent.state.messages).tools_added) == ["echo"]  # type: ignore[union-attr]


def test_reset_keeps_the_replayed_system_message_and_continue_needs_more_than_it() -> None:
    stream_fn = ScriptedStream([assistant("ok")])
    agent = Agent(model=MODEL, system_prompt="base", stream_fn=stream_fn, system_messages=True)
    agent.prompt([SystemMessage("", {"s": "<s/>"}), user("go")])
    agent.reset()
    assert len(agent.state.messages) == 1 and agent.state.system_prompt == "base\n\n<s/>"
    with pytest.raises(InvalidStateError, match="No messages to continue from"):
        agent.continue_()


def test_pi_the_default_converter_passes_system_messages_through() -> None:
    """pi's agent.test.ts: "passes system messages through the default LLM converter" (an agent
    without a prompt, prompted with a system message alone, requests with just that message)."""
    stream_fn = ScriptedStream([assistant("ok")])
    Agent(model=MODEL, stream_fn=stream_fn).prompt(SystemMessage("updated guidance"))
    assert roles(stream_fn.requests[0].context.messages) == ["system"]


def test_the_loop_folds_the_contexts_prompt_ahead_of_a_transcript_that_does_not_lead_with_one() -> None:
    stream_fn = ScriptedStream([assistant("ok")])
    context = AgentContext("base", [user("earlier"), assistant("answer")], [echo_tool()])
    events: list[Any] = []
    run_agent_loop(
        [SystemMessage("", {"s": "<s/>"}), user("go")], context, config(), events.append, stream_fn=stream_fn
    )
    folded = collapse_system_messages(stream_fn.requests[0].context)
    assert folded.system_prompt == "base\n\n<s/>" and names(folded.tools) == ["echo"]


# =========================================================================== over HTTP


def test_mid_conversation_system_messages_reach_openai_and_anthropic_folded_into_the_prompt() -> None:
    """Models the catalogue does not mark as taking them in place (Claude Sonnet 5: "not available",
    Anthropic's page on mid-conversation system messages; GPT-5.4 nano: not in pi-ai 1.6's list)."""
    openai = get_model("openai", "gpt-5.4-nano")
    anthropic = get_model("anthropic", "claude-sonnet-5")
    assert not openai.capabilities.system_messages_in_place and not anthropic.capabilities.system_messages_in_place
    with ScriptedServer() as server:
        openai.base_url, openai.api = server.url + "/v1", "openai-completions"
        anthropic.base_url = server.url
        server.reply(chat_text("one"))
        server.reply(anthropic_text("two"))
        agent = Agent(
            model=openai, system_prompt="base", tools=[echo_tool()], system_messages=True, get_api_key=lambda p: KEY
        )
        agent.prompt([SystemMessage("", {"skills": "<skills/>"}), user("first")])
        agent.state.model = anthropic
        agent.prompt("second")
        chat, messages = server.requests[0].json, server.requests[1].json
    assert chat["messages"][0] == {"role": "system", "content": "base\n\n<skills/>"}
    assert [m["role"] for m in chat["messages"]][1:] == ["user"]
    assert [t["function"]["name"] for t in chat["tools"]] == ["echo"]
    system = messages["system"]
    assert (system if isinstance(system, str) else system[0]["text"]) == "base\n\n<skills/>"
    assert [m["role"] for m in messages["messages"]] == ["user", "assistant", "user"]
    assert [t["name"] for t in messages["tools"]] == ["echo"]


def test_gemini_gets_later_system_messages_folded_even_for_a_model_declaring_them() -> None:
    """pi-ai 1.6's Google APIs take no system message inside the conversation: the replayed prompt
    is the systemInstruction and the tools the current ones, whatever the model's compat says."""
    gemini = google_model()
    gemini.compat = {"supports_mid_convo_system_messages": True}
    with ScriptedServer() as server:
        gemini.base_url = server.url + "/v1beta"
        server.reply(google_reply({"text": "one"}))
        server.reply(google_reply({"text": "two"}))
        agent = Agent(
            model=gemini, system_prompt="base", tools=[echo_tool()], system_messages=True, get_api_key=lambda p: KEY
        )
        agent.prompt("first")
        agent.state.tools = []
        agent.prompt([SystemMessage("", {"skills": "<skills/>"}), user("second")])
        body = server.requests[1].json
    assert body["systemInstruction"]["parts"] == [{"text": "base\n\n<skills/>"}]
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    assert "tools" not in body  # the echo tool's removal is folded too


# =========================================================================== sessions


def test_sessions_store_system_messages_and_a_resumed_agent_replays_its_prompt(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    stream_fn = ScriptedStream([assistant("one"), assistant("two")])
    agent = Agent(
        model=MODEL, system_prompt="base", stream_fn=stream_fn, session=JsonlSession(path), system_messages=True
    )
    agent.prompt([SystemMessage("", {"s": "<s/>"}), user("first")])
    stored = [e["message"] for e in JsonlSession(path).entries() if e["type"] == "message"]
    assert [m["role"] for m in stored] == ["system", "system", "user", "assistant"]
    assert stored[1]["sections"] == {"s": "<s/>"}
    again = Agent(model=MODEL, stream_fn=stream_fn, session=JsonlSession(path))
    assert again.state.system_prompt == "base\n\n<s/>" and isinstance(again.state.messages[0], SystemMessage)
    again.prompt("second")
    folded = collapse_system_messages(stream_fn.requests[1].context)
    assert folded.system_prompt == "base\n\n<s/>"


def _stored(path: Path) -> list[str]:
    """The session's entries, as their type (a custom entry's type, a message's role)."""
    return [
        e.get("customType") or e["message"]["role"] if e["type"] in ("custom", "message") else e["type"]
        for e in JsonlSession(path).entries()
    ]


def test_a_session_leading_with_a_system_message_stores_the_prompt_there_only(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    stream_fn = ScriptedStream([assistant("one"), assistant("two")])
    agent = Agent(
        model=MODEL, system_prompt="base", stream_fn=stream_fn, session=JsonlSession(path), system_messages=True
    )
    agent.prompt("first")
    again = Agent(model=MODEL, stream_fn=stream_fn, session=JsonlSession(path), system_messages=True)
    again.prompt("second")
    assert "piagent.system_prompt" not in _stored(path)  # the system message is the record
    assert _stored(path).count("system") == 1
    assert again.state.system_prompt == "base"
    assert collapse_system_messages(stream_fn.requests[1].context).system_prompt == "base"


def test_a_session_recorded_without_system_messages_keeps_its_prompt_entry_when_resumed_with_them(
    tmp_path: Path,
) -> None:
    """A branch that has messages but no system message keeps the prompt in its custom entry: an
    agent with system_messages=True leads its own transcript with it, and never appends it to
    the session's end (where the next resume would replay it twice)."""
    path = tmp_path / "s.jsonl"
    stream_fn = ScriptedStream([assistant(str(n)) for n in range(3)])
    Agent(model=MODEL, system_prompt="old", stream_fn=stream_fn, session=JsonlSession(path)).prompt("first")
    for question in ("second", "third"):
        agent = Agent(model=MODEL, stream_fn=stream_fn, session=JsonlSession(path), system_messages=True)
        assert isinstance(agent.state.messages[0], SystemMessage) and agent.state.system_prompt == "old"
        agent.prompt(question)
    assert _stored(path).count("piagent.system_prompt") == 1 and "system" not in _stored(path)
    assert [collapse_system_messages(r.context).system_prompt for r in stream_fn.requests] == ["old"] * 3


def test_catching_up_with_another_writer_keeps_the_leading_system_message(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    stream_fn = ScriptedStream([assistant(str(n)) for n in range(3)])
    Agent(model=MODEL, system_prompt="old", stream_fn=stream_fn, session=JsonlSession(path)).prompt("first")
    mine = Agent(model=MODEL, stream_fn=stream_fn, session=JsonlSession(path), system_messages=True)
    Agent(model=MODEL, stream_fn=stream_fn, session=JsonlSession(path)).prompt("theirs")
    mine.prompt("mine")
    assert isinstance(mine.state.messages[0], SystemMessage)
    assert roles(mine.state.messages)[1:] == ["user", "assistant"] * 3
    request = stream_fn.requests[2].context
    assert collapse_system_messages(request).system_prompt == "old" and roles(request.messages)[-1] == "user"


def test_a_models_compat_overrides_the_catalogue_for_system_messages_in_place() -> None:
    """compat's supports_mid_convo_system_messages, when given, decides for that one model."""
    opus = get_model("anthropic", "claude-opus-4-8")
    opus.compat = {"supports_mid_convo_system_messages": False}
    with ScriptedServer() as server:
        opus.base_url = server.url
        server.reply(anthropic_text("one"))
        agent = Agent(model=opus, system_prompt="base", system_messages=True, get_api_key=lambda p: KEY)
        agent.prompt([SystemMessage("Be brief."), user("go")])
        body = server.requests[0].json
    assert body["system"][0]["text"] == "base\n\nBe brief." and [m["role"] for m in body["messages"]] == ["user"]


@pytest.mark.parametrize("api", ["openai-completions", "openai-responses", "anthropic-messages"])
def test_catalogue_models_that_take_system_messages_mid_conversation_get_them_in_place(api: str) -> None:
    """Claude Opus 4.8 and GPT-5.4 mini take them (the catalogue's system_messages_in_place, from
    Anthropic's page and pi-ai 1.6's catalogue): no compat needed."""
    from tests.ai.providers.openai_wire import responses_text
    from tests.ai.providers.sdk_oracle import check_types

    model = (
        get_model("anthropic", "claude-opus-4-8")
        if api == "anthropic-messages"
        else get_model("openai", "gpt-5.4-mini")
    )
    reply = {"openai-completions": chat_text, "openai-responses": responses_text, "anthropic-messages": anthropic_text}[
        api
    ]
    with ScriptedServer() as server:
        model.base_url, model.api = (server.url if api == "anthropic-messages" else server.url + "/v1"), api
        server.reply(reply("one"))
        server.reply(reply("two"))
        agent = Agent(model=model, system_prompt="base", tools=[echo_tool()], system_messages=True)
        agent.get_api_key = lambda provider: KEY
        agent.prompt("first")
        agent.prompt([SystemMessage("Be brief.", {"skills": "<skills/>", "old": None}), user("second")])
        body = server.requests[1].json
    update = 'Be brief.\n\nUpdated system prompt section "skills":\n\n<skills/>\n\nRemoved system prompt section "old".'
    if api == "openai-completions":
        pytest.importorskip("openai")
        from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

        check_types(CompletionCreateParamsStreaming, body)
        # a loopback server is not OpenAI: "system" rather than "developer"
        assert body["messages"][0] == {"role": "system", "content": "base"}
        assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "system", "user"]
        assert body["messages"][3]["content"] == update
        assert [t["function"]["name"] for t in body["tools"]] == ["echo"]
    elif api == "openai-responses":
        pytest.importorskip("openai")
        from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

        check_types(ResponseCreateParamsStreaming, body)
        assert body["instructions"] == "base"
        assert [item.get("role", item.get("type")) for item in body["input"]][-2:] == ["developer", "user"]
        assert body["input"][-2]["content"] == update
        assert [t["name"] for t in body["tools"]] == ["echo"]
    else:
        pytest.importorskip("anthropic")
        from anthropic.types.message_create_params import MessageCreateParamsStreaming

        check_types(MessageCreateParamsStreaming, body)
        assert body["system"][0]["text"] == "base"
        # held back until the next assistant message, or the end: after the user message here
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "system"]
        # the conversation's cache breakpoint is its last message, the system one here (as pi-ai)
        assert body["messages"][-1]["content"] == [
            {"type": "text", "text": update, "cache_control": {"type": "ephemeral"}}
        ]
        assert "cache_control" not in body["messages"][-2]["content"][-1]
        # it takes tool changes in place too: the list stays, with pi-ai 1.6's deferred placeholder
        assert [t["name"] for t in body["tools"]] == ["echo", anthropic_provider.DEFERRED_PLACEHOLDER["name"]]


def echo_declaration(name: str) -> dict[str, Any]:
    tool = echo_tool(name)
    return {"name": name, "description": tool.description, "input_schema": tool.parameters}


def test_anthropic_sends_tool_changes_between_runs_in_place_keeping_the_tool_list() -> None:
    """Claude Opus 4.8 takes tool changes in place (tool_changes_in_place): the tools the
    conversation started with stay the request's list, followed by a deferred placeholder (as pi-ai
    1.6 sends it), and the change is a system message's tool_removal and tool_addition blocks,
    under the inline-tools beta; checked against the SDK's beta request types."""
    pytest.importorskip("anthropic")
    from anthropic.types.beta.message_create_params import MessageCreateParamsStreaming

    from tests.ai.providers.sdk_oracle import check_types

    model = get_model("anthropic", "claude-opus-4-8")
    with ScriptedServer() as server:
        model.base_url = server.url
        server.reply(anthropic_text("one"))
        server.reply(anthropic_text("two"))
        agent = Agent(
            model=model, system_prompt="base", tools=[echo_tool()], system_messages=True, get_api_key=lambda p: KEY
        )
        agent.prompt("first")
        agent.state.tools = [echo_tool("other")]
        agent.prompt("second")
        first, second = (request.json for request in server.requests)
        betas = [request.headers.get("anthropic-beta") for request in server.requests]
    placeholder = {**anthropic_provider.DEFERRED_PLACEHOLDER}
    assert first["tools"] == second["tools"] == [echo_declaration("echo"), placeholder]
    assert betas == [anthropic_provider.INLINE_TOOLS_BETA] * 2
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user", "system"]
    assert second["messages"][-1]["content"] == [
        {"type": "tool_removal", "tool": {"type": "tool_reference", "name": "echo"}},
        {
            "type": "tool_addition",
            "tool": {"type": "tool_definition", "definition": echo_declaration("other")},
            "cache_control": {"type": "ephemeral"},
        },
    ]
    check_types(MessageCreateParamsStreaming, second)


def test_a_model_taking_system_messages_but_not_tool_changes_gets_the_current_tools() -> None:
    """compat's supports_mid_convo_tool_changes False: system messages stay in place (the first of
    them right after the prompt too), the tool list is the current one, no placeholder, no beta."""
    model = get_model("anthropic", "claude-opus-4-8")
    model.compat = {"supports_mid_convo_tool_changes": False}
    with ScriptedServer() as server:
        model.base_url = server.url
        server.reply(anthropic_text("one"))
        agent = Agent(
            model=model, system_prompt="base", tools=[echo_tool()], system_messages=True, get_api_key=lambda p: KEY
        )
        agent.prompt([SystemMessage("Be brief."), user("go")])
        body, beta = server.requests[0].json, server.requests[0].headers.get("anthropic-beta")
    assert body["system"][0]["text"] == "base" and body["tools"] == [echo_declaration("echo")] and beta is None
    assert [m["role"] for m in body["messages"]] == ["user", "system"]


def test_anthropic_sends_system_messages_held_to_the_same_place_as_one() -> None:
    """Anthropic's page on mid-conversation system messages: one may not be adjacent to another.
    System messages held back to the same place (before the next assistant message, or the end)
    go as one system message, their blocks in transcript order: each text, then its tool changes."""
    pytest.importorskip("anthropic")
    from anthropic.types.beta.message_create_params import MessageCreateParamsStreaming

    from tests.ai.providers.sdk_oracle import check_types

    model = get_model("anthropic", "claude-opus-4-8")
    with ScriptedServer() as server:
        model.base_url = server.url
        server.reply(anthropic_text("one"))
        server.reply(anthropic_text("two"))
        server.reply(anthropic_text("three"))
        agent = Agent(
            model=model, system_prompt="base", tools=[echo_tool()], system_messages=True, get_api_key=lambda p: KEY
        )
        agent.prompt("first")
        agent.state.tools = [echo_tool("other")]  # announced on the run's last system message
        agent.prompt([SystemMessage("Be brief."), user("second"), SystemMessage("Answer in French.")])
        agent.prompt("third")
        second, third = (request.json for request in server.requests[1:])
    merged = [
        {"type": "text", "text": "Be brief."},
        {"type": "text", "text": "Answer in French."},
        {"type": "tool_removal", "tool": {"type": "tool_reference", "name": "echo"}},
        {"type": "tool_addition", "tool": {"type": "tool_definition", "definition": echo_declaration("other")}},
    ]
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user", "system"]
    assert second["messages"][-1]["content"] == merged[:-1] + [{**merged[-1], "cache_control": {"type": "ephemeral"}}]
    # held before the assistant message that answered them, still as one
    assert [m["role"] for m in third["messages"]] == ["user", "assistant", "user", "system", "assistant", "user"]
    assert third["messages"][3] == {"role": "system", "content": merged}
    check_types(MessageCreateParamsStreaming, second)
    check_types(MessageCreateParamsStreaming, third)


def test_anthropic_sends_the_current_tools_when_the_conversation_started_without_any() -> None:
    """With no tool declared up front there is nothing to keep (pi-ai 1.6): the request's list is
    the current tools and the system message says only its text."""
    model = get_model("anthropic", "claude-opus-4-8")
    with ScriptedServer() as server:
        model.base_url = server.url
        server.reply(anthropic_text("one"))
        server.reply(anthropic_text("two"))
        agent = Agent(model=model, system_prompt="base", system_messages=True, get_api_key=lambda p: KEY)
        agent.prompt("first")
        agent.state.tools = [echo_tool()]
        agent.prompt([SystemMessage("Use echo."), user("second")])
        first, second = (request.json for request in server.requests)
        beta = server.requests[1].headers.get("anthropic-beta")
    assert "tools" not in first and second["tools"] == [echo_declaration("echo")] and beta is None
    assert second["messages"][-1] == {
        "role": "system",
        "content": [{"type": "text", "text": "Use echo.", "cache_control": {"type": "ephemeral"}}],
    }


def responses_function(name: str) -> dict[str, Any]:
    tool = echo_tool(name)
    return {
        "type": "function",
        "name": name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": False,
    }


def test_responses_declares_tools_in_additional_tools_items_for_a_model_taking_tool_changes() -> None:
    """GPT-5.6 takes tool changes in place (tool_changes_in_place): no top-level tools; the first
    tools head the input in an additional_tools item, each change adds one where it stands, after
    a note that it adds to the earlier ones (naming the tools still unavailable), and a removal is
    said in the system message's text (pi-ai 1.6's rendering; the SDK's request types)."""
    pytest.importorskip("openai")
    from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

    from tests.ai.providers.openai_wire import responses_text
    from tests.ai.providers.sdk_oracle import check_types

    model = get_model("openai", "gpt-5.6-sol")
    with ScriptedServer() as server:
        model.base_url = server.url + "/v1"
        for text in ("one", "two", "three"):
            server.reply(responses_text(text))
        agent = Agent(
            model=model, system_prompt="base", tools=[echo_tool()], system_messages=True, get_api_key=lambda p: KEY
        )
        agent.prompt("first")
        agent.state.tools = [echo_tool("other")]
        agent.prompt("second")
        agent.state.tools = [echo_tool("other"), echo_tool("third")]
        agent.prompt("third")
        bodies = [request.json for request in server.requests]
    head = {"type": "additional_tools", "role": "developer", "tools": [responses_function("echo")]}
    assert all("tools" not in body for body in bodies) and bodies[0]["instructions"] == "base"
    assert bodies[0]["input"][0] == head and bodies[2]["input"][0] == head
    note = (
        "The tools below are added to the ones declared earlier, which remain available unless they were "
        "said to be unavailable; a tool declared again is available again, with its new definition."
    )
    assert [item for item in bodies[2]["input"] if item.get("role") == "developer"][1:] == [
        {"role": "developer", "content": note},
        {"type": "additional_tools", "role": "developer", "tools": [responses_function("other")]},
        {"role": "developer", "content": "These tools are no longer available; do not call them:\n- echo"},
        {"role": "developer", "content": note + "\nStill unavailable: echo."},
        {"type": "additional_tools", "role": "developer", "tools": [responses_function("third")]},
    ]
    for body in bodies:
        check_types(ResponseCreateParamsStreaming, body)


@pytest.mark.parametrize("api", ["anthropic-messages", "openai-responses"])
def test_a_transcript_without_system_messages_reaches_a_model_taking_tool_changes_as_in_0731(api: str) -> None:
    """Claude Opus 4.8 and GPT-5.6 take tool changes in place, but a transcript without system
    messages (no system_messages option) sends what 0.73.1 sent: the prompt, the current tools as
    the request's list (no placeholder, no inline-tools beta, no additional_tools item)."""
    from tests.ai.providers.openai_wire import responses_text

    anthropic = api == "anthropic-messages"
    model = get_model("anthropic", "claude-opus-4-8") if anthropic else get_model("openai", "gpt-5.6-sol")
    with ScriptedServer() as server:
        model.base_url = server.url if anthropic else server.url + "/v1"
        for text in ("one", "two"):
            server.reply(anthropic_text(text) if anthropic else responses_text(text))
        agent = Agent(model=model, system_prompt="base", tools=[echo_tool()], get_api_key=lambda p: KEY)
        agent.prompt("first")
        agent.state.tools = [echo_tool("other")]
        agent.prompt("second")
        bodies = [request.json for request in server.requests]
        betas = [request.headers.get("anthropic-beta") for request in server.requests]
    assert "system" not in roles(agent.state.messages)
    if anthropic:
        assert [body["tools"] for body in bodies] == [[echo_declaration("echo")], [echo_declaration("other")]]
        assert betas == [None, None] and [body["system"][0]["text"] for body in bodies] == ["base", "base"]
        assert [m["role"] for m in bodies[1]["messages"]] == ["user", "assistant", "user"]
    else:
        assert [body["tools"] for body in bodies] == [[responses_function("echo")], [responses_function("other")]]
        assert [body["instructions"] for body in bodies] == ["base", "base"]
        assert [item.get("role") for item in bodies[1]["input"]] == ["user", "assistant", "user"]


def test_responses_renders_a_later_system_message_as_system_where_the_server_takes_no_developer_role() -> None:
    """pi-ai 1.6's Responses API: "developer" for a reasoning model unless the model's compat
    says the server takes no developer role (supports_developer_role False)."""
    from tests.ai.providers.openai_wire import responses_text

    model = get_model("openai", "gpt-5.4-mini")
    model.compat = {**(model.compat or {}), "supports_developer_role": False}
    with ScriptedServer() as server:
        model.base_url, model.api = server.url + "/v1", "openai-responses"
        server.reply(responses_text("one"))
        agent = Agent(model=model, system_prompt="base", system_messages=True, get_api_key=lambda p: KEY)
        agent.prompt([SystemMessage("Be brief."), user("first")])
        body = server.requests[0].json
    assert model.reasoning and body["input"][0] == {"role": "system", "content": "Be brief."}


def test_a_system_message_after_an_unanswered_tool_call_goes_after_its_result() -> None:
    """A run killed mid-batch leaves a tool call without a result; a system message the next
    prompt brings must not come between the call and the result
    the provider adds for it, or Chat Completions rejects the request (pi-ai 1.6 holds it back)."""
    model = get_model("openai", "gpt-5.4-mini")  # takes system messages in place (the catalogue)
    killed = [SystemMessage("base", tools_added=[READ]), user("go"), assistant([call("call-1", "read", path="a")])]
    with ScriptedServer() as server:
        model.base_url, model.api = server.url + "/v1", "openai-completions"
        server.reply(chat_text("ok"))
        agent = Agent(model=model, messages=killed, tools=[echo_tool()], get_api_key=lambda p: KEY)
        agent.prompt([SystemMessage("Be brief."), user("go on")])
        body = server.requests[0].json
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "system", "user"]
    assert [m["content"] for m in body["messages"][3:5]] == ["No result provided", "Be brief."]


def test_the_first_system_messages_a_run_brings_are_preceded_by_the_prompt_option() -> None:
    stream_fn = ScriptedStream([assistant("ok")])
    agent = Agent(model=MODEL, system_prompt="base", stream_fn=stream_fn)
    agent.state.system_prompt = "changed"  # assignable while the transcript has no system message
    agent.prompt([SystemMessage("", {"s": "<s/>"}), user("go")])
    first = agent.state.messages[0]
    assert isinstance(first, SystemMessage) and first.text == "changed"
    assert roles(agent.state.messages) == ["system", "system", "user", "assistant"]
    assert agent.state.system_prompt == "changed\n\n<s/>"
    assert collapse_system_messages(stream_fn.requests[0].context).system_prompt == "changed\n\n<s/>"
    with pytest.raises(InvalidStateError):
        agent.state.system_prompt = "again"


def test_structured_output_in_tool_mode_counts_the_tools_the_transcript_declares(faux: Any) -> None:
    from piagent.testing import faux_message, faux_tool_call
    from tests.test_structured_output import Invoice

    faux.set_responses([faux_message([faux_tool_call("final_answer", {"number": "A", "total": 1.0})])])
    agent = Agent(
        model=faux.get_model(), tools=[echo_tool()], output_type=Invoice, output_mode="tool", system_messages=True
    )
    result = agent.prompt("?")
    assert result.output == Invoice("A", 1.0)
    request = faux.state.requests[0]
    assert request.options.tool_choice == "required"  # echo is declared too: not forced to final_answer
    assert sorted(names(request.context.tools)) == ["echo", "final_answer"]


def test_traces_show_the_prompt_and_tools_the_system_messages_give(faux: Any) -> None:
    import json

    pytest.importorskip("opentelemetry.sdk")
    import piagent
    from piagent.testing import faux_message
    from tests.test_otel import Telemetry

    telemetry = Telemetry()
    piagent.instrument(telemetry.tracer_provider, telemetry.meter_provider, capture_content=True)
    try:
        faux.set_responses([faux_message("ok")])
        agent = Agent(model=faux.get_model(), system_prompt="base", tools=[echo_tool()], system_messages=True)
        agent.prompt([SystemMessage("", {"s": "<s/>"}), user("go")])
    finally:
        piagent.uninstrument()
    (chat,) = [s for s in telemetry.spans if s.name.startswith("chat")]
    assert json.loads(chat.attributes["gen_ai.system_instructions"]) == [{"type": "text", "content": "base\n\n<s/>"}]
    assert [d["name"] for d in json.loads(chat.attributes["gen_ai.tool.definitions"])] == ["echo"]


def test_a_compaction_carries_the_replayed_system_message_ahead_of_its_summary(tmp_path: Path) -> None:
    session = JsonlSession(tmp_path / "s.jsonl")
    session.append_message(SystemMessage("base", {"s": "<s/>"}))
    session.append_message(user("old question"))
    kept = session.append_message(SystemMessage("", {"s": "<t/>"}))
    session.append_message(user("kept question"))
    head = SystemMessage("base", {"s": "<t/>"}, timestamp=7)
    session.append_entry(
        "compaction", summary="talked", firstKeptEntryId=kept, tokensBefore=10, systemMessage=head.to_dict()
    )
    messages = JsonlSession(tmp_path / "s.jsonl").messages()
    assert messages[0] == head  # the recorded system message leads, the kept one is left out
    assert [getattr(m, "role", None) for m in messages] == ["system", "compactionSummary", "user"]
    assert current_system_prompt(messages) == "base\n\n<t/>"


def test_an_application_message_with_role_system_is_not_a_system_message() -> None:
    from tests.support.loop import Custom

    note = Custom("system", "a note for the UI")
    stream_fn = ScriptedStream([assistant("ok")])
    agent = Agent(model=MODEL, system_prompt="base", tools=[echo_tool()], messages=[note], stream_fn=stream_fn)
    agent.prompt("go")
    request = stream_fn.requests[0].context
    assert request.system_prompt == "base" and names(request.tools) == ["echo"]  # as in 0.73.1
    assert roles(request.messages) == ["user"]  # the note stays out, as before
    assert agent.state.system_prompt == "base"
