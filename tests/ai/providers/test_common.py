from __future__ import annotations

import json

import pytest
import requests

from piagent.abort import AbortController
from piagent.ai.providers._common import (
    ABORTED_MESSAGE,
    ProviderStreamError,
    apply_on_payload,
    default_max_tokens,
    make_usage,
    max_tokens_with_budget,
    merge_headers,
    parse_event_json,
    parse_event_object,
    reasoning_budget,
    resolve_api_key,
    stream_events,
    tool_choice_name,
    usage_with_cached_prompt,
)
from piagent.ai.providers._http import AbortedRequest, HttpStatusError
from piagent.ai.types import Cost, Model, StreamOptions
from piagent.exceptions import MissingApiKeyError
from tests.ai.providers.helpers import event_types

MODEL = Model(
    "m",
    api="openai-completions",
    provider="openai",
    base_url="https://api.openai.com/v1",
    cost=Cost(2.0, 8.0, 0.5, 1.0),
    max_tokens=100_000,
)


def test_explicit_key_wins_over_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    assert resolve_api_key(MODEL, StreamOptions(api_key="given")) == "given"
    assert resolve_api_key(MODEL, StreamOptions()) == "env-key"


def test_missing_key_names_the_variable_to_set(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingApiKeyError, match="No API key for provider openai: set OPENAI_API_KEY or pass api_key"):
        resolve_api_key(MODEL, StreamOptions())


def test_local_servers_need_no_key(monkeypatch):
    local = Model("llama", api="openai-completions", provider="ollama", base_url="http://localhost:11434/v1")
    assert resolve_api_key(local, StreamOptions()) == ""
    custom = Model("x", api="openai-completions", provider="mybox", base_url="http://127.0.0.1:8000/v1")
    assert resolve_api_key(custom, StreamOptions()) == ""


@pytest.mark.parametrize("base_url", ["http://[::1]/v1", "http://[::1]:8000/v1", "http://LOCALHOST/v1"])
def test_a_local_server_is_recognised_by_any_spelling_of_its_address(base_url):
    model = Model("x", api="openai-completions", provider="mybox", base_url=base_url)
    assert resolve_api_key(model, StreamOptions()) == ""


def test_a_remote_server_still_needs_a_key(monkeypatch):
    monkeypatch.delenv("MYBOX_API_KEY", raising=False)
    remote = Model("x", api="openai-completions", provider="mybox", base_url="http://localhost.example.com/v1")
    with pytest.raises(MissingApiKeyError):
        resolve_api_key(remote, StreamOptions())


def test_on_payload_may_replace_the_payload():
    seen = []
    assert apply_on_payload(StreamOptions(on_payload=lambda p, m: seen.append((p, m.id))), {"a": 1}, MODEL) == {"a": 1}
    assert seen == [({"a": 1}, "m")]
    assert apply_on_payload(StreamOptions(on_payload=lambda p, m: {"b": 2}), {"a": 1}, MODEL) == {"b": 2}
    assert apply_on_payload(StreamOptions(), {"a": 1}, MODEL) == {"a": 1}


def test_default_budgets_grow_with_every_level_up_to_max():
    options = StreamOptions()
    levels = ("minimal", "low", "medium", "high", "xhigh", "max")
    assert [reasoning_budget(level, options, MODEL) for level in levels] == [1024, 2048, 8192, 16384, 32768, 65536]


def test_thinking_budgets_override_defaults():
    options = StreamOptions(thinking_budgets={"low": 3000, "high": 20000})
    assert reasoning_budget("low", options, MODEL) == 3000
    assert reasoning_budget("xhigh", options, MODEL) == 32768
    assert reasoning_budget("medium", options, MODEL) == 8192
    with pytest.raises(ValueError, match="Unknown reasoning level"):
        reasoning_budget("huge", options, MODEL)


def test_default_max_tokens_is_capped_at_32000():
    assert default_max_tokens(MODEL) == 32000
    assert default_max_tokens(Model("s", max_tokens=4096)) == 4096


def test_budget_fits_inside_the_model_output_limit():
    assert max_tokens_with_budget(StreamOptions(), MODEL, 16384) == (48384, 16384)
    small = Model("s", max_tokens=8192)
    assert max_tokens_with_budget(StreamOptions(max_tokens=8192), small, 16384) == (8192, 7168)


def test_merge_headers_lets_options_override_and_remove():
    model = Model("m", headers={"X-A": "model", "X-B": "b"})
    merged = merge_headers(model, StreamOptions(headers={"x-a": "opt", "X-B": None}), {"Authorization": "k"})
    assert merged == {"Authorization": "k", "x-a": "opt"}


def test_tool_choice_validation():
    assert tool_choice_name(None) is None and tool_choice_name("required") is None
    assert tool_choice_name({"name": "search"}) == "search"
    with pytest.raises(ValueError, match="Invalid tool_choice"):
        tool_choice_name("any")


def test_usage_cost_uses_model_prices():
    usage = make_usage(MODEL, input=1000, output=500, cache_read=2000, cache_write=100)
    assert usage.total_tokens == 3600
    assert usage.cost.total == pytest.approx((2.0 * 1000 + 8.0 * 500 + 0.5 * 2000 + 1.0 * 100) / 1e6)


def test_invalid_json_event_is_a_stream_error():
    assert parse_event_json(b'{"a":1}') == {"a": 1}
    with pytest.raises(ProviderStreamError, match="Invalid JSON in stream event"):
        parse_event_json(b"{nope")


@pytest.mark.parametrize(
    "data",
    [b'{"a":1}', b' {"a": [1, 2.5]}\r', b'{"t":"\xc3\xa9\\u00e9"}', '{"a":1}'.encode("utf-16"), b'"x"', b"null"],
)
def test_parse_event_json_reads_exactly_what_json_loads_reads(data):
    assert parse_event_json(data) == json.loads(data)


@pytest.mark.parametrize("data", [b'{"a":1} x', b'{"a":', b"\xff{}", b""])
def test_parse_event_json_rejects_what_json_loads_rejects(data):
    with pytest.raises(ProviderStreamError, match="Invalid JSON in stream event"):
        parse_event_json(data)


@pytest.mark.parametrize("data", [b"[1]", b'"x"', b"null"])
def test_an_event_that_is_not_an_object_is_a_stream_error_where_objects_are_required(data):
    assert parse_event_object(b'{"a":1}') == {"a": 1}
    with pytest.raises(ProviderStreamError, match="Unexpected stream event"):
        parse_event_object(data)


def test_cached_prompt_tokens_are_split_out_of_input():
    usage = usage_with_cached_prompt(MODEL, 1200, 1000, 40)
    assert (usage.input, usage.cache_read, usage.output, usage.total_tokens) == (200, 1000, 40, 1240)
    assert usage_with_cached_prompt(MODEL, None, None, None).total_tokens == 0


def test_failure_before_start_is_a_single_error_event():
    def body(builder):
        raise MissingApiKeyError("No API key for provider openai: set OPENAI_API_KEY or pass api_key")
        yield  # pragma: no cover

    stream = stream_events(MODEL, StreamOptions(), body)
    events = list(stream)
    assert [e.type for e in events] == ["error"]
    assert events[0].reason == "error"
    assert stream.result().error_message.startswith("No API key for provider openai")


def test_failure_mid_stream_keeps_partial_content_and_usage():
    def body(builder):
        yield builder.start()
        started = builder.text_start()
        yield started
        yield builder.text_delta(started.content_index, "Hello")
        builder.message.usage = make_usage(MODEL, input=10)
        raise requests.exceptions.ChunkedEncodingError("Connection broken")

    stream = stream_events(MODEL, StreamOptions(), body)
    assert event_types(stream) == ["start", "text_start", "text_delta", "error"]
    message = stream.result()
    assert message.stop_reason == "error" and "Connection broken" in message.error_message
    assert message.text == "Hello" and message.usage.input == 10


def test_failure_after_abort_is_reported_as_aborted():
    controller = AbortController()

    def body(builder):
        yield builder.start()
        controller.abort()
        raise requests.exceptions.ConnectionError("socket closed")

    message = stream_events(MODEL, StreamOptions(signal=controller.signal), body).result()
    assert (message.stop_reason, message.error_message) == ("aborted", ABORTED_MESSAGE)


def test_a_response_completed_after_the_signal_fired_is_reported_as_aborted():
    controller = AbortController()

    def body(builder):
        yield builder.start()
        started = builder.text_start()
        yield started
        yield builder.text_delta(started.content_index, "Hello")
        controller.abort()
        yield from builder.end_all()
        yield builder.done("stop")

    stream = stream_events(MODEL, StreamOptions(signal=controller.signal), body)
    assert event_types(stream) == ["start", "text_start", "text_delta", "text_end", "error"]
    message = stream.result()
    assert (message.stop_reason, message.error_message, message.text) == ("aborted", ABORTED_MESSAGE, "Hello")


def test_aborted_request_is_aborted_even_without_signal():
    def body(builder):
        raise AbortedRequest()
        yield  # pragma: no cover

    assert stream_events(MODEL, StreamOptions(), body).result().stop_reason == "aborted"


def test_body_ending_without_terminal_event_ends_with_error():
    def body(builder):
        yield builder.start()

    stream = stream_events(MODEL, StreamOptions(), body)
    assert event_types(stream) == ["start", "error"]
    assert "without a terminal event" in stream.result().error_message


def test_secrets_are_scrubbed_from_error_messages(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-secret-123")

    def body(builder):
        raise HttpStatusError(401, "bad key sk-given-secret-456 and sk-env-secret-123 and tok-header-789")
        yield  # pragma: no cover

    options = StreamOptions(api_key="sk-given-secret-456", headers={"X-Api-Key": "tok-header-789"})
    message = stream_events(MODEL, options, body).result()
    assert "secret" not in message.error_message and "tok-header" not in message.error_message
    assert message.error_message.count("[REDACTED]") == 3


def test_stream_function_never_raises_even_for_programming_errors():
    def body(builder):
        yield builder.start()
        {}["missing"]

    message = stream_events(MODEL, StreamOptions(), body).result()
    assert message.stop_reason == "error" and "missing" in message.error_message


@pytest.mark.parametrize("bad", ["nan", "cycle"])
def test_a_body_that_is_not_json_fails_before_anything_is_sent(server, bad):
    from piagent.ai import Context, UserMessage, complete

    def on_payload(payload: dict, model: Model) -> dict:
        if bad == "nan":
            payload["temperature"] = float("nan")
        else:
            payload["messages"].append(payload)
        return payload

    model = Model("m", api="openai-completions", provider="openai", base_url=server.url)
    message = complete(model, Context(messages=[UserMessage("hi")]), StreamOptions(api_key="k", on_payload=on_payload))
    expected = "not JSON compliant" if bad == "nan" else "recursion depth exceeded while encoding"
    assert message.stop_reason == "error" and expected in message.error_message
    assert server.requests == []
