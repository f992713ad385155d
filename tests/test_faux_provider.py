"""The faux provider (the cases of pi's faux-provider tests): the suite's main test double."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from piagent import AbortController, AssistantMessage, ProviderNotFoundError, TextContent, UserMessage
from piagent.ai import Context, Cost, StreamOptions, Tool, ToolCall, complete, get_model, stream, stream_simple
from piagent.ai.types import ThinkingContent
from piagent.exceptions import ModelNotFoundError
from piagent.testing import (
    FauxProvider,
    faux_message,
    faux_text,
    faux_thinking,
    faux_tool_call,
    register_faux_provider,
)
from tests.support.loop import WAIT


def hi() -> Context:
    return Context(messages=[UserMessage("hi", timestamp=1)])


def event_types(events: list[Any]) -> list[str]:
    return [event.type for event in events]


# =========================================================================== helpers and registration


def test_helpers_build_the_content_blocks() -> None:
    assert faux_text("t", "sig") == TextContent("t", "sig")
    assert faux_thinking("th", "tsig", True) == ThinkingContent("th", "tsig", True)
    call = faux_tool_call("echo", {"value": "x"}, id="tool-1")
    assert call == ToolCall("tool-1", "echo", {"value": "x"})
    generated = faux_tool_call("echo")
    assert generated.id and generated.id != faux_tool_call("echo").id and generated.arguments == {}


def test_faux_message_infers_its_stop_reason() -> None:
    assert faux_message("hello").stop_reason == "stop"
    assert faux_message("hello").content == [TextContent("hello")]
    assert faux_message([faux_text("a"), faux_tool_call("echo")]).stop_reason == "toolUse"
    failed = faux_message("x", stop_reason="error", error_message="broken")
    assert (failed.stop_reason, failed.error_message) == ("error", "broken")


def test_default_registration_has_one_model(faux: FauxProvider) -> None:
    [model] = faux.models
    assert (model.id, model.api, model.provider, model.reasoning) == ("faux-1", faux.api, "faux", False)
    assert (model.input, model.context_window, model.max_tokens) == (["text", "image"], 128000, 16384)
    assert faux.get_model() is model and faux.get_model("faux-1") is model


def test_each_registration_gets_its_own_api(faux: FauxProvider) -> None:
    other = register_faux_provider()
    try:
        assert other.api != faux.api
    finally:
        other.unregister()


def test_multiple_models_with_per_model_reasoning_and_model_aware_factories() -> None:
    faux = register_faux_provider(models=["fast", {"id": "deep", "reasoning": True}])
    try:
        assert (faux.get_model("fast").reasoning, faux.get_model("deep").reasoning) == (False, True)
        with pytest.raises(ModelNotFoundError, match="faux provider has no model 'missing'"):
            faux.get_model("missing")

        def by_model(context: Context, options: Any, state: Any, model: Any) -> AssistantMessage:
            return faux_message(f"answered by {model.id} (reasoning={model.reasoning})")

        faux.set_responses([by_model, by_model])
        deep = complete(faux.get_model("deep"), hi())
        fast = complete(faux.get_model("fast"), hi())
        assert (deep.text, deep.model) == ("answered by deep (reasoning=True)", "deep")
        assert (fast.text, fast.model) == ("answered by fast (reasoning=False)", "fast")
    finally:
        faux.unregister()


def test_the_models_are_in_the_catalogue_until_unregistered_and_what_they_replaced_comes_back() -> None:
    first = register_faux_provider(models=["faux-a"])
    stand_in = register_faux_provider(provider="openai", models=["faux-a", "gpt-4.1"])
    try:
        assert get_model("faux:faux-a") == first.get_model()  # "provider:id" finds it (a resumed session too)
        assert get_model("openai:gpt-4.1") == stand_in.get_model("gpt-4.1")
        second = register_faux_provider(models=["faux-a"])
        assert get_model("faux:faux-a") == second.get_model()  # the latest registered
        second.unregister()
        assert get_model("faux:faux-a") == first.get_model()
    finally:
        stand_in.unregister()
        first.unregister()
    assert get_model("openai:gpt-4.1").api == "openai-responses"  # the catalogue's own again
    with pytest.raises(ModelNotFoundError):
        get_model("faux:faux-a")


def test_a_model_of_a_faux_provider_unregistered_since_never_comes_back() -> None:
    """Unregistered out of order, the second provider put the first's model back, a model no provider served."""
    first = register_faux_provider(models=["faux-b"])
    second = register_faux_provider(models=["faux-b"])
    first.unregister()
    second.unregister()
    with pytest.raises(ModelNotFoundError):
        get_model("faux:faux-b")


def test_api_provider_and_model_are_rewritten_on_returned_messages() -> None:
    faux = register_faux_provider(api="faux:test", provider="faux-provider", models=["faux-model"])
    try:
        scripted = faux_message("hello")
        scripted.api, scripted.provider, scripted.model = "other-api", "other-provider", "other-model"
        faux.set_responses([scripted])
        response = complete(faux.get_model(), hi())
        assert (response.api, response.provider, response.model) == ("faux:test", "faux-provider", "faux-model")
        assert response is not scripted and scripted.api == "other-api"  # the script is not mutated
    finally:
        faux.unregister()


def test_unregister_removes_the_provider(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("hello")])
    faux.unregister()
    with pytest.raises(ProviderNotFoundError, match=f"^No API provider registered for api: {faux.api}$"):
        stream_simple(faux.get_model(), hi())


# =========================================================================== the response queue


def test_queue_is_consumed_in_order_and_errors_when_exhausted(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("first"), faux_message("second")])
    assert complete(faux.get_model(), hi()).text == "first"
    assert complete(faux.get_model(), hi()).text == "second"
    exhausted = complete(faux.get_model(), hi())
    assert (exhausted.stop_reason, exhausted.error_message) == ("error", "No more faux responses queued")
    assert faux.get_pending_response_count() == 0
    assert faux.state.call_count == 3


def test_an_exhausted_queue_is_a_single_error_event(faux: FauxProvider) -> None:
    events = list(stream(faux.get_model(), hi()))
    assert event_types(events) == ["error"]
    assert events[0].reason == "error"


def test_set_responses_replaces_and_append_responses_appends(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("first")])
    assert complete(faux.get_model(), hi()).text == "first"
    faux.set_responses([faux_message("second"), faux_message("dropped")])
    faux.set_responses([faux_message("second")])
    assert faux.get_pending_response_count() == 1
    assert complete(faux.get_model(), hi()).text == "second"
    faux.append_responses([faux_message("third"), faux_message("fourth")])
    assert faux.get_pending_response_count() == 2
    assert [complete(faux.get_model(), hi()).text for _ in range(2)] == ["third", "fourth"]


def test_call_count_increments_at_call_time_and_requests_are_recorded(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("ok")])
    options = StreamOptions(session_id="s-1")
    events = stream(faux.get_model(), hi(), options)
    assert faux.state.call_count == 1  # before anything was consumed
    [request] = faux.state.requests
    assert request.model is faux.get_model() and request.context.messages[0].content == "hi"
    assert request.options.session_id == "s-1"
    assert events.result().text == "ok"


def test_on_response_is_called_with_status_200(faux: FauxProvider) -> None:
    seen: list[Any] = []
    faux.set_responses([faux_message("ok")])
    complete(faux.get_model(), hi(), on_response=lambda response, model: seen.append((response["status"], model.id)))
    assert seen == [(200, "faux-1")]


def test_a_slow_factory_is_waited_for(faux: FauxProvider) -> None:
    released = threading.Event()
    entered = threading.Event()

    def slow(context: Context, options: Any, state: Any, model: Any) -> AssistantMessage:
        entered.set()
        assert released.wait(WAIT)
        return faux_message(f"after {state.call_count} call(s), {len(context.messages)} message(s)")

    faux.set_responses([slow])
    threading.Thread(target=lambda: (entered.wait(WAIT), released.set())).start()
    assert complete(faux.get_model(), hi()).text == "after 1 call(s), 1 message(s)"


def test_a_raising_factory_ends_the_stream_with_its_message(faux: FauxProvider) -> None:
    def broken(*args: Any) -> AssistantMessage:
        raise RuntimeError("boom")

    faux.set_responses([broken])
    events = list(stream(faux.get_model(), hi()))
    assert event_types(events) == ["error"]
    assert (events[0].error.stop_reason, events[0].error.error_message) == ("error", "boom")


# =========================================================================== usage


def test_usage_is_estimated_without_a_session(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("a reasonably long answer")])
    usage = complete(faux.get_model(), hi()).usage
    assert usage.input > 0 and usage.output > 0
    assert (usage.cache_read, usage.cache_write) == (0, 0)
    assert usage.total_tokens == usage.input + usage.output


def test_token_estimates_follow_the_serialised_context_and_output(faux: FauxProvider) -> None:
    tool = Tool("echo", "Echo back text", {"type": "object", "properties": {"value": {"type": "string"}}})
    small = Context("sys", [UserMessage("hello", timestamp=1)])
    large = Context("sys" + "x" * 4000, [UserMessage("hello", timestamp=1)])
    with_tools = Context("sys", [UserMessage("hello", timestamp=1)], [tool])
    faux.set_responses([faux_message("done"), faux_message("done"), faux_message("done"), faux_message("d" * 400)])
    small_usage = complete(faux.get_model(), small).usage
    large_usage = complete(faux.get_model(), large).usage
    tools_usage = complete(faux.get_model(), with_tools).usage
    long_output = complete(faux.get_model(), small).usage
    assert large_usage.input - small_usage.input == 1000  # one token per 4 characters
    assert tools_usage.input > small_usage.input
    assert long_output.input == small_usage.input
    assert long_output.output - small_usage.output == 99  # 396 more characters


def test_cost_follows_the_model_prices() -> None:
    faux = register_faux_provider(models=[{"id": "priced", "cost": Cost(input=1_000_000.0, output=2_000_000.0)}])
    try:
        faux.set_responses([faux_message("answer")])
        usage = complete(faux.get_model(), hi()).usage
        assert usage.cost.input == pytest.approx(usage.input * 1.0)
        assert usage.cost.output == pytest.approx(usage.output * 2.0)
        assert usage.cost.total == pytest.approx(usage.cost.input + usage.cost.output)
    finally:
        faux.unregister()


def test_prompt_caching_is_simulated_per_session(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("first"), faux_message("second")])
    context = Context("Be concise.", [UserMessage("hello", timestamp=1)])
    first = complete(faux.get_model(), context, session_id="session-1", cache_retention="short")
    assert first.usage.cache_read == 0 and first.usage.cache_write > 0
    context.messages.append(first)
    context.messages.append(UserMessage("follow up", timestamp=2))
    second = complete(faux.get_model(), context, session_id="session-1", cache_retention="short")
    assert second.usage.cache_read > 0
    assert second.usage.cache_read + second.usage.cache_write >= first.usage.cache_write
    assert (
        second.usage.total_tokens
        == second.usage.input + second.usage.output + second.usage.cache_read + second.usage.cache_write
    )


def test_no_cache_is_shared_across_sessions_or_without_a_session_id(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("first"), faux_message("second"), faux_message("third")])
    context = Context(messages=[UserMessage("hello", timestamp=1)])
    first = complete(faux.get_model(), context, session_id="session-1", cache_retention="short")
    assert first.usage.cache_write > 0
    context.messages.append(first)
    context.messages.append(UserMessage("follow up", timestamp=2))
    second = complete(faux.get_model(), context, session_id="session-2", cache_retention="short")
    assert second.usage.cache_read == 0 and second.usage.cache_write > 0
    third = complete(faux.get_model(), context)
    assert (third.usage.cache_read, third.usage.cache_write) == (0, 0)


def test_no_caching_with_cache_retention_none(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("first"), faux_message("second")])
    context = Context(messages=[UserMessage("hello", timestamp=1)])
    complete(faux.get_model(), context, session_id="session-1", cache_retention="none")
    context.messages.append(faux_message("first"))
    context.messages.append(UserMessage("follow up", timestamp=2))
    second = complete(faux.get_model(), context, session_id="session-1", cache_retention="none")
    assert (second.usage.cache_read, second.usage.cache_write) == (0, 0)
    assert second.usage.input > 0


# =========================================================================== streaming


def test_streams_thinking_text_and_tool_call_deltas(faux: FauxProvider) -> None:
    arguments = {"text": "hi there, a longer argument", "count": 12}
    faux.set_responses(
        [
            faux_message(
                [
                    faux_thinking("thinking text"),
                    faux_text("answer text"),
                    faux_tool_call("echo", arguments, id="tool-1"),
                ]
            )
        ]
    )
    events = list(stream(faux.get_model(), hi()))
    types = event_types(events)
    for kind in (
        "thinking_start",
        "thinking_delta",
        "thinking_end",
        "text_start",
        "text_delta",
        "text_end",
        "toolcall_start",
        "toolcall_delta",
        "toolcall_end",
    ):
        assert kind in types
    deltas = [e.delta for e in events if e.type == "toolcall_delta"]
    assert len(deltas) > 1
    assert json.loads("".join(deltas)) == arguments
    assert "".join(e.delta for e in events if e.type == "text_delta") == "answer text"
    assert "".join(e.delta for e in events if e.type == "thinking_delta") == "thinking text"
    [text_end] = [e for e in events if e.type == "text_end"]
    assert text_end.content == "answer text"
    [tool_end] = [e for e in events if e.type == "toolcall_end"]
    assert tool_end.tool_call == ToolCall("tool-1", "echo", arguments)
    done = events[-1]
    assert (done.type, done.reason) == ("done", "toolUse")
    assert [type(b) for b in done.message.content] == [ThinkingContent, TextContent, ToolCall]  # no streaming scratch
    assert done.message.content[2].arguments == arguments


def test_partial_tool_call_arguments_are_parsed_as_they_stream() -> None:
    faux = register_faux_provider(chunk_tokens=(1, 1))
    try:
        arguments = {"path": "/tmp/some/file.txt", "content": "hello world"}
        faux.set_responses([faux_message([faux_tool_call("write", arguments, id="tool-1")])])
        seen = []
        for event in stream(faux.get_model(), hi()):
            if event.type == "toolcall_delta":
                partial_args = event.partial.content[event.content_index].arguments
                assert isinstance(partial_args, dict)
                seen.append(dict(partial_args))
        assert seen[0] == {}  # '{"pa' holds no complete key yet
        # Not {} until the end (piagent parses as it goes): a cut-off string already shows.
        assert any(0 < len(s.get("path", "")) < len(arguments["path"]) for s in seen)
        assert seen[-1] == arguments
        for s in seen:  # each partial is a prefix-consistent view of the final arguments
            for key, value in s.items():
                assert arguments[key].startswith(value)
    finally:
        faux.unregister()


def test_exact_event_order_with_one_token_chunks() -> None:
    faux = register_faux_provider(chunk_tokens=(1, 1))
    try:
        faux.set_responses(
            [faux_message([faux_thinking("go"), faux_text("ok"), faux_tool_call("echo", {}, id="tool-1")])]
        )
        assert event_types(list(stream(faux.get_model(), hi()))) == [
            "start",
            "thinking_start",
            "thinking_delta",
            "thinking_end",
            "text_start",
            "text_delta",
            "text_end",
            "toolcall_start",
            "toolcall_delta",
            "toolcall_end",
            "done",
        ]
    finally:
        faux.unregister()


def test_each_event_names_the_block_it_grows_in_the_partial(faux: FauxProvider) -> None:
    faux.set_responses(
        [faux_message([faux_text("one two three four five"), faux_tool_call("echo", {"value": "x"}, id="t")])]
    )
    checked = 0
    for event in stream(faux.get_model(), hi()):  # checked as it arrives: the partial may be live
        if event.type in ("start", "done"):
            continue
        assert event.content_index == (0 if event.type.startswith("text") else 1)
        assert len(event.partial.content) == event.content_index + 1
        checked += 1
    assert checked >= 6


def test_two_tool_calls_give_two_starts_and_two_ends(faux: FauxProvider) -> None:
    faux.set_responses(
        [
            faux_message(
                [
                    faux_tool_call("echo", {"text": "one"}, id="tool-1"),
                    faux_tool_call("echo", {"text": "two"}, id="tool-2"),
                ]
            )
        ]
    )
    events = list(stream(faux.get_model(), hi()))
    assert event_types(events).count("toolcall_start") == 2
    assert [e.tool_call.id for e in events if e.type == "toolcall_end"] == ["tool-1", "tool-2"]


@pytest.mark.parametrize("reason, message", [("error", "upstream failed"), ("aborted", "Request was aborted")])
def test_a_scripted_error_or_aborted_message_streams_then_ends_with_error(reason: str, message: str) -> None:
    faux = register_faux_provider(chunk_tokens=(2, 2))
    try:
        faux.set_responses([faux_message("partial", stop_reason=reason, error_message=message)])
        events = list(stream(faux.get_model(), hi()))
        assert event_types(events) == ["start", "text_start", "text_delta", "text_end", "error"]
        terminal = events[-1]
        assert (terminal.reason, terminal.error.stop_reason, terminal.error.error_message) == (reason, reason, message)
        assert terminal.error.text == "partial"
    finally:
        faux.unregister()


# =========================================================================== pacing and abort


def test_abort_before_the_first_chunk_gives_exactly_one_aborted_event() -> None:
    faux = register_faux_provider(tokens_per_second=1000, chunk_tokens=(3, 3))
    try:
        faux.set_responses([faux_message("abcdefghijklmnopqrstuvwxyz")])
        controller = AbortController()
        controller.abort()
        events = list(stream(faux.get_model(), hi(), signal=controller.signal))
        assert event_types(events) == ["error"]
        assert (events[0].reason, events[0].error.stop_reason, events[0].error.error_message) == (
            "aborted",
            "aborted",
            "Request was aborted",
        )
    finally:
        faux.unregister()


@pytest.mark.parametrize(
    "block, kind",
    [
        (faux_text("abcdefghijklmnopqrstuvwxyz"), "text"),
        (faux_thinking("abcdefghijklmnopqrstuvwxyz"), "thinking"),
        (faux_tool_call("echo", {"text": "abcdefghijklmnopqrstuvwxyz", "count": 123456789}, id="tool-1"), "toolcall"),
    ],
)
def test_abort_after_the_first_delta_when_paced_stops_at_once(block: Any, kind: str) -> None:
    faux = register_faux_provider(tokens_per_second=1000, chunk_tokens=(3, 3))
    try:
        faux.set_responses([faux_message([block])])
        controller = AbortController()
        types: list[str] = []
        for event in stream(faux.get_model(), hi(), signal=controller.signal):
            types.append(event.type)
            if event.type == f"{kind}_delta":
                controller.abort()
        assert types.count(f"{kind}_delta") == 1
        assert f"{kind}_start" in types and types[-1] == "error"
        assert not any(t.endswith("_end") for t in types)
    finally:
        faux.unregister()


def test_an_aborted_stream_keeps_the_partial_content(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("a long answer that will be cut short by the abort")])
    controller = AbortController()
    events = []
    for event in stream(faux.get_model(), hi(), signal=controller.signal):
        events.append(event)
        if event.type == "text_delta":
            controller.abort()
    final = events[-1].error
    assert final.stop_reason == "aborted"
    assert final.text == events[-2].delta and final.text
    assert type(final.content[0]) is TextContent


def test_pacing_waits_on_the_signal_so_an_abort_from_another_thread_ends_it(faux: FauxProvider) -> None:
    slow = register_faux_provider(tokens_per_second=0.001, chunk_tokens=(1, 1))  # one chunk per ~17 minutes
    try:
        slow.set_responses([faux_message("abcdefgh")])
        controller = AbortController()
        first_delta = threading.Event()
        types: list[str] = []

        def consume() -> None:
            for event in stream(slow.get_model(), hi(), signal=controller.signal):
                types.append(event.type)
                if event.type == "text_delta":
                    first_delta.set()

        consumer = threading.Thread(target=consume)
        consumer.start()
        assert first_delta.wait(WAIT)
        controller.abort()
        consumer.join(WAIT)
        assert not consumer.is_alive()
        assert types == ["start", "text_start", "text_delta", "error"]
    finally:
        slow.unregister()
