"""Tool calls against servers that cannot stream an automatic tool choice
(docs/servers.md#tool-calls), against a real HTTP server on 127.0.0.1 replaying what
llama-cpp-python's server (0.3, ``--chat_format chatml-function-calling``) answers.

That server offers no tool unless ``tool_choice`` is given, and answers a streamed request
with ``tool_choice: "auto"`` with HTTP 200 and an empty stream ("Automatic streaming tool
choice is not supported"). piagent says ``"auto"`` explicitly and sends such a request
unstreamed to a server of the llama.cpp family or an unknown local server once it has
answered so (within the same call, then for its ``base_url``); the events are those of a
streamed answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from piagent import Agent, AgentEvent, tool
from piagent.ai import Context, Tool, UserMessage, custom_model, is_context_overflow, stream
from piagent.ai.overflow import context_window, learn_context_window
from piagent.ai.providers._servers import forget_learned_compat
from tests.ai.providers.helpers import drain, event_types
from tests.ai.providers.openai_wire import chat_stream, chat_text, chunk, tool_delta

JSON = {"Content-Type": "application/json"}
NOTE = Tool("read_note", "Read a note.", {"type": "object", "properties": {"name": {"type": "string"}}})
ARGUMENTS = '{"name": "notes.txt"}'


def completion(message: dict[str, Any], finish_reason: str) -> bytes:
    """An unstreamed ``chat.completion`` as llama-cpp-python's server writes it."""
    return json.dumps(
        {
            "id": "chatcmpl-7c1",
            "object": "chat.completion",
            "created": 1764000000,
            "model": "smollm2",
            "choices": [{"finish_reason": finish_reason, "index": 0, "logprobs": None, "message": message}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49},
        }
    ).encode()


def tool_call_completion() -> bytes:
    call = {
        "id": "call__0_read_note_cmpl-7c1",
        "type": "function",
        "function": {"name": "read_note", "arguments": ARGUMENTS},
    }
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [call],
        "function_call": {"name": "read_note", "arguments": ARGUMENTS},
    }
    return completion(message, "tool_calls")


def text_completion(text: str) -> bytes:
    return completion({"role": "assistant", "content": text}, "stop")


def refuse_streaming(server) -> None:
    """What the server sends for a streamed automatic tool choice: headers, then nothing."""
    server.reply([])


@pytest.fixture(autouse=True)
def _forget_learned_forms() -> Iterator[None]:
    yield
    forget_learned_compat()  # the next test's server may get this port


def ask(model, **options: Any) -> tuple[list[Any], Any]:
    context = Context("Be brief.", [UserMessage("Read notes.txt")], [NOTE])
    return drain(stream(model, context, **options))


def streamed(server) -> list[Any]:
    return [r.json.get("stream") for r in server.requests]


def test_tools_offered_without_a_choice_say_auto(server):
    server.reply(chat_text("ok"))
    _, message = ask(custom_model("m", base_url=server.url + "/v1", register=False))
    assert message.stop_reason == "stop", message.error_message
    body = server.requests[0].json
    assert body["tool_choice"] == "auto" and body["stream"] is True and body["tools"]


def test_a_request_without_tools_gets_no_tool_choice(server):
    server.reply(chat_text("ok"))
    model = custom_model("m", base_url=server.url + "/v1", register=False)
    drain(stream(model, Context("Be brief.", [UserMessage("Hi")])))
    assert "tool_choice" not in server.requests[0].json


UNSTREAMED = {"streams_tool_choice_auto": False}


def test_a_server_declared_unable_to_stream_it_gets_an_automatic_tool_choice_unstreamed(server):
    server.reply(tool_call_completion(), headers=JSON)
    model = custom_model("m", base_url=server.url + "/v1", compat=UNSTREAMED, register=False)
    events, message = ask(model)
    assert message.stop_reason == "toolUse", message.error_message
    body = server.requests[0].json
    assert body["stream"] is False and "stream_options" not in body and body["tool_choice"] == "auto"
    assert event_types(events) == ["start", "toolcall_start", "toolcall_delta", "toolcall_end", "done"]
    [call] = message.tool_calls
    assert (call.id, call.name, call.arguments) == ("call__0_read_note_cmpl-7c1", "read_note", {"name": "notes.txt"})
    assert (message.usage.input, message.usage.output, message.response_id) == (40, 9, "chatcmpl-7c1")


def test_the_llama_cpp_family_streams_it_until_a_server_of_it_sends_nothing(server):
    """llama-server streams an automatic choice, llama-cpp-python's server does not: both are
    ``provider="llama.cpp"``, so llama-server keeps its stream and the other is learned."""
    server.reply(chat_stream(tool_delta(0, "call_1", "read_note", ARGUMENTS), chunk({}, "tool_calls")))
    llama_server = custom_model("m", base_url=server.url + "/v1", provider="llama.cpp", register=False)
    assert ask(llama_server)[1].stop_reason == "toolUse"
    refuse_streaming(server)
    server.reply(tool_call_completion(), headers=JSON)
    server.reply(text_completion("ok"), headers=JSON)
    python_server = custom_model("m", base_url=server.url + "/python/v1", provider="llama.cpp", register=False)
    for _ in range(2):
        _, message = ask(python_server)
        assert message.stop_reason in ("toolUse", "stop"), message.error_message
    assert streamed(server) == [True, True, False, False]


def test_an_unstreamed_answer_gives_the_events_of_the_same_answer_streamed(server):
    """The same tool call and the same text, streamed by a server that streams and sent whole
    to one that does not: one event sequence and one message."""
    call = tool_delta(0, "call__0_read_note_cmpl-7c1", "read_note", ARGUMENTS)
    server.reply(chat_stream(call, chunk({}, "tool_calls")))
    server.reply(tool_call_completion(), headers=JSON)
    server.reply(chat_text("It says hello."))
    server.reply(text_completion("It says hello."), headers=JSON)
    results = []
    for _ in range(2):
        for compat in (None, UNSTREAMED):
            model = custom_model("m", base_url=server.url + "/v1", compat=compat, register=False)
            results.append(ask(model))
    assert streamed(server) == [True, False, True, False]
    for (streamed_events, streamed_message), (whole_events, whole_message) in (results[:2], results[2:]):
        assert event_types(whole_events) == event_types(streamed_events)
        assert whole_message.content == streamed_message.content
        assert whole_message.stop_reason == streamed_message.stop_reason


def test_a_forced_tool_choice_stays_streamed_where_an_automatic_one_is_not(server):
    server.reply(chat_stream(tool_delta(0, "call_1", "read_note", ARGUMENTS), chunk({}, "tool_calls")))
    model = custom_model("m", base_url=server.url + "/v1", compat=UNSTREAMED, register=False)
    _, message = ask(model, tool_choice={"name": "read_note"})
    assert message.stop_reason == "toolUse", message.error_message
    assert streamed(server) == [True]


@tool
def read_note(name: str) -> str:
    """Read a note.

    Args:
        name: The note's file name.
    """
    return "hello from " + name


def test_an_unknown_local_server_that_sends_nothing_is_asked_unstreamed_and_remembered(server):
    """The agent's round trip as ``piagent --base-url ... --tools read_file`` makes it: the
    refused stream is retried unstreamed within the same model call, the next call (after the
    tool result) goes unstreamed at once, and the agent sees the events of streamed answers."""
    refuse_streaming(server)
    server.reply(tool_call_completion(), headers=JSON)
    server.reply(text_completion("The note says hello."), headers=JSON)
    model = custom_model("smollm2", base_url=server.url + "/v1", register=False)
    agent = Agent(model=model, tools=[read_note])
    seen: list[AgentEvent] = []
    agent.subscribe(seen.append)
    result = agent.prompt("Read notes.txt")
    assert result.stop_reason == "stop", result.error_message
    assert result.text == "The note says hello."
    assert [m.role for m in result.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert result.messages[2].text == "hello from notes.txt"
    assert streamed(server) == [True, False, False]
    assert all(r.json["tool_choice"] == "auto" for r in server.requests)
    updates = [e.assistant_message_event.type for e in seen if e.type == "message_update"]
    assert updates == ["toolcall_start", "toolcall_delta", "toolcall_end", "text_start", "text_delta", "text_end"]

    server.reply(text_completion("Again."), headers=JSON)
    again = Agent(model=model, tools=[read_note]).prompt("Once more")  # remembered for this base_url
    assert again.text == "Again." and streamed(server)[-1] is False


def test_what_is_learned_stays_with_its_base_url(server):
    refuse_streaming(server)
    server.reply(text_completion("ok"), headers=JSON)
    ask(custom_model("m", base_url=server.url + "/v1", register=False))
    server.reply(chat_text("ok"))
    _, message = ask(custom_model("m", base_url=server.url + "/other/v1", register=False))
    assert message.stop_reason == "stop", message.error_message
    assert streamed(server) == [True, False, True]


def test_an_empty_stream_from_a_known_server_is_an_error_naming_the_compat_key(server):
    refuse_streaming(server)
    _, message = ask(custom_model("m", base_url=server.url + "/v1", register=False, provider="vllm"))
    assert message.stop_reason == "error"
    assert "The stream ended before the response was complete" in (message.error_message or "")
    assert "streams_tool_choice_auto=false" in message.error_message  # what to declare, named
    assert streamed(server) == [True]


def test_a_declared_compat_is_asked_again_unstreamed_but_never_changed(server):
    refuse_streaming(server)
    server.reply(text_completion("ok"), headers=JSON)
    model = custom_model("m", base_url=server.url + "/v1", register=False, compat={"streams_tool_choice_auto": True})
    _, message = ask(model)
    assert message.stop_reason == "stop", message.error_message
    server.reply(chat_text("ok"))
    ask(model)
    assert streamed(server) == [True, False, True]


def test_a_stream_cut_after_some_chunks_is_an_error_not_a_refusal(server):
    server.reply(chat_stream(chunk({"role": "assistant", "content": "Hel"}), done=False))
    _, message = ask(custom_model("m", base_url=server.url + "/v1", register=False))
    assert message.stop_reason == "error" and "ended before the response was complete" in message.error_message
    assert len(server.requests) == 1


def test_an_empty_stream_without_an_automatic_tool_choice_is_asked_again_and_nothing_is_learned(server):
    refuse_streaming(server)
    server.reply(text_completion("Hello."), headers=JSON)
    model = custom_model("m", base_url=server.url + "/v1", register=False)
    _, message = drain(stream(model, Context("Be brief.", [UserMessage("Hi")])))
    assert (message.stop_reason, message.text) == ("stop", "Hello.")
    server.reply(chat_text("ok"))
    drain(stream(model, Context("Be brief.", [UserMessage("Hi")])))
    assert streamed(server) == [True, False, True]


#: What llama-cpp-python's server (0.3, ``--n_ctx 2048``) answers an unstreamed request over its
#: window; its streamed answer to the same request is HTTP 200 with an empty body.
SERVER_OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 2048 tokens. However, you requested 3635 tokens "
        "(3615 in the messages, 20 in the completion). Please reduce the length of the messages or completion.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


def test_a_prompt_over_the_servers_window_is_an_overflow_stating_the_window(server):
    """The empty stream says nothing; the same request unstreamed gets the server's own error."""
    refuse_streaming(server)
    server.reply(json.dumps(SERVER_OVERFLOW).encode(), status=400, headers=JSON)
    model = custom_model("m", base_url=server.url + "/v1", register=False)  # the window guessed: 128,000
    _, message = ask(model)
    assert message.stop_reason == "error" and is_context_overflow(message)
    assert "maximum context length is 2048 tokens" in message.error_message
    assert learn_context_window(model, message) and context_window(model) == 2048
    assert streamed(server) == [True, False]


def test_an_unstreamed_retry_that_fails_too_is_reported_and_nothing_is_learned(server):
    """An empty stream from a server that is merely failing: the unstreamed request fails as
    well, both are named, and the next request is streamed as before."""
    refuse_streaming(server)
    server.reply(b'{"error": {"message": "model not loaded"}}', status=400, headers=JSON)
    model = custom_model("m", base_url=server.url + "/v1", register=False)
    _, message = ask(model)
    assert message.stop_reason == "error"
    assert message.error_message.startswith("The stream ended before the response was complete")
    assert "sent again unstreamed: HTTP 400: model not loaded" in message.error_message
    server.reply(chat_text("ok"))
    _, again = ask(model)
    assert again.stop_reason == "stop", again.error_message
    assert streamed(server) == [True, False, True]


def test_the_unstreamed_request_goes_on_a_new_connection(server):
    """llama-cpp-python's server closes the connection of the refused stream moments after its
    end: reusing it would fail the retry (and cost a backoff), so it is not reused."""
    refuse_streaming(server)
    server.reply(text_completion("ok"), headers=JSON)
    _, message = ask(custom_model("m", base_url=server.url + "/v1", register=False))
    assert message.stop_reason == "stop", message.error_message
    refused, retried = server.requests
    assert refused.peer != retried.peer
