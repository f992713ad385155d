"""is_context_overflow() on what each API really answers when the prompt does not fit: a real
server on 127.0.0.1 sends the error shape, the provider turns it into the failed message."""

from __future__ import annotations

import json
from typing import Any

import pytest

from piagent.ai import Context, Model, StreamOptions, UserMessage, is_context_overflow, stream
from piagent.ai.overflow import context_window, learn_context_window
from piagent.ai.types import Cost
from tests.ai.providers.openai_wire import chat_text, usage
from tests.support.scripted_server import ScriptedServer

JSON = {"Content-Type": "application/json"}


def _model(server: ScriptedServer, api: str, path: str = "", window: int = 8192) -> Model:
    return Model("m", api=api, provider="p", base_url=server.url + path, cost=Cost(), context_window=window)


def _answer(server: ScriptedServer, model: Model) -> Any:
    options = StreamOptions(api_key="k", max_retries=0, max_retry_delay_ms=20)
    events = stream(model, Context("sys", [UserMessage("Hi")]), options)
    list(events)
    return events.result(timeout=10)


ERRORS = {
    "anthropic": (
        "anthropic-messages",
        "",
        400,
        {
            "type": "error",
            "error": {"type": "invalid_request_error", "message": "prompt is too long: 213462 tokens > 200000 maximum"},
        },
    ),
    "anthropic-413": (
        "anthropic-messages",
        "",
        413,
        {"type": "error", "error": {"type": "request_too_large", "message": "Request exceeds the maximum size"}},
    ),
    "openai-completions": (
        "openai-completions",
        "/v1",
        400,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens. However, your messages resulted "
                "in 131043 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        },
    ),
    "openai-responses": (
        "openai-responses",
        "/v1",
        400,
        {
            "error": {
                "message": "Your input exceeds the context window of this model. Please adjust your input and try "
                "again.",
                "type": "invalid_request_error",
                "param": "input",
                "code": "context_length_exceeded",
            }
        },
    ),
    "gemini": (
        "google-generative-ai",
        "/v1beta",
        400,
        {
            "error": {
                "code": 400,
                "message": "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
                "status": "INVALID_ARGUMENT",
            }
        },
    ),
    "llama.cpp": (
        "openai-completions",
        "/v1",
        400,
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 4242,
                "n_ctx": 4096,
            }
        },
    ),
    "llama-cpp-python": (
        "openai-completions",
        "/v1",
        400,
        {
            "error": {
                "message": "Requested tokens (2600) exceed context window of 2048",
                "type": "internal_server_error",
                "param": None,
                "code": None,
            }
        },
    ),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_each_apis_context_overflow_error_is_recognised(server: ScriptedServer, name: str) -> None:
    api, path, status, body = ERRORS[name]
    server.reply([json.dumps(body).encode()], status, headers=JSON)
    message = _answer(server, _model(server, api, path))
    assert message.stop_reason == "error"
    assert is_context_overflow(message)


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (429, "Rate limit reached: too many tokens per minute, context_length_exceeded would follow"),
        (400, "Invalid value for 'temperature'"),
        (500, "The server had an error"),
    ],
)
def test_other_failures_are_not_an_overflow(server: ScriptedServer, status: int, text: str) -> None:
    server.reply([json.dumps({"error": {"message": text}}).encode()], status, headers=JSON)
    message = _answer(server, _model(server, "openai-completions", "/v1"))
    assert message.stop_reason == "error" and not is_context_overflow(message, 8192, request_tokens=10)


def test_a_success_whose_reported_input_exceeds_the_window_is_a_silent_overflow(server: ScriptedServer) -> None:
    server.reply(chat_text("ok", usage_=usage(9000, 1)))
    server.reply(chat_text("ok", usage_=usage(8000, 1)))
    model = _model(server, "openai-completions", "/v1", window=8192)
    over, under = _answer(server, model), _answer(server, model)
    assert over.stop_reason == under.stop_reason == "stop"
    assert is_context_overflow(over, 8192) and not is_context_overflow(under, 8192)
    assert not is_context_overflow(over)  # the window unknown: nothing to compare with


def test_an_empty_http_200_stream_is_an_overflow_only_when_the_request_exceeded_the_window(
    server: ScriptedServer,
) -> None:
    """llama-cpp-python's server answers an overflowing streamed request with 200 and no body."""
    server.reply([], 200)
    message = _answer(server, _model(server, "openai-completions", "/v1", window=2048))
    assert message.stop_reason == "error" and "The stream ended before" in (message.error_message or "")
    assert is_context_overflow(message, 2048, request_tokens=2600)
    assert not is_context_overflow(message, 2048, request_tokens=1500)
    assert not is_context_overflow(message, 2048)  # no estimate: an ordinary broken stream


@pytest.mark.parametrize(
    ("name", "window"), [("anthropic", 200000), ("openai-completions", 128000), ("llama-cpp-python", 2048)]
)
def test_the_window_an_overflow_error_states_is_learned_when_smaller_than_the_declared_one(
    server: ScriptedServer, name: str, window: int
) -> None:
    api, path, status, body = ERRORS[name]
    server.reply([json.dumps(body).encode()], status, headers=JSON)
    model = _model(server, api, path, window=1_000_000)
    message = _answer(server, model)
    assert learn_context_window(model, message) and context_window(model) == window
    assert model.context_window == 1_000_000  # the model itself is left as declared
    smaller = _model(server, api, path + "/other", window=1024)
    assert not learn_context_window(smaller, message) and context_window(smaller) == 1024
