"""DeepSeek through Chat Completions: its thinking switch and effort per catalogue model and
level (checked against the openai SDK with ``extra_body``, as DeepSeek's docs show), and its
cache-hit and reasoning usage."""

from __future__ import annotations

import logging
from typing import Any, Optional

import pytest

from piagent.ai import Context, StreamOptions, UserMessage, get_model
from piagent.ai.providers.openai_completions import stream_openai_completions
from tests.ai.providers.openai_wire import chat_stream, chat_text, chunk
from tests.ai.providers.sdk_oracle import check_types, openai_client, replay_with_sdk
from tests.support.scripted_server import ScriptedServer

KEY = "sk-deepseek-test-0123456789"


@pytest.fixture(scope="module")
def server():
    with ScriptedServer() as s:
        yield s


pytestmark = pytest.mark.usefixtures("fresh_warnings")


def model_at(server: ScriptedServer, model_id: str) -> Any:
    model = get_model("deepseek", model_id)
    model.base_url = server.url
    return model


def request(server, model, **options) -> dict[str, Any]:
    server.reply(chat_text("ok"))
    context = Context(messages=[UserMessage("Hi", timestamp=1)])
    message = stream_openai_completions(model, context, StreamOptions(api_key=KEY, max_tokens=300, **options)).result(
        10
    )
    assert message.stop_reason == "stop", message.error_message
    return server.requests[-1].json


def sdk_body(server, body: dict[str, Any]) -> dict[str, Any]:
    pytest.importorskip("openai")
    from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

    check_types(CompletionCreateParamsStreaming, body)
    fields = {k: v for k, v in body.items() if k not in ("stream", "thinking")}
    extra = {"thinking": body["thinking"]} if "thinking" in body else None
    client = openai_client(server.url, KEY)
    return replay_with_sdk(server, lambda: client.chat.completions.create(**fields, stream=True, extra_body=extra))


EXPECTED: dict[str, dict[Optional[str], dict[str, Any]]] = {
    "deepseek-v4-pro": {
        None: {"thinking": {"type": "disabled"}},
        "minimal": {"thinking": {"type": "enabled"}, "reasoning_effort": "low"},
        "low": {"thinking": {"type": "enabled"}, "reasoning_effort": "low"},
        "medium": {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        "high": {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},
        "xhigh": {"thinking": {"type": "enabled"}, "reasoning_effort": "high"},  # DeepSeek: xhigh is high
        "max": {"thinking": {"type": "enabled"}, "reasoning_effort": "max"},
    },
    "deepseek-v4-flash": {None: {"thinking": {"type": "disabled"}}},
    "deepseek-reasoner": {None: {"thinking": {"type": "enabled"}, "reasoning_effort": "low"}},
    "deepseek-chat": {None: {}, "high": {}},
}
CASES = [(model_id, level) for model_id, levels in EXPECTED.items() for level in levels]


@pytest.mark.parametrize("model_id, level", CASES)
def test_thinking_switch_and_effort_per_model_and_level(server, model_id, level):
    body = request(server, model_at(server, model_id), reasoning=level)
    assert {k: body[k] for k in ("thinking", "reasoning_effort") if k in body} == EXPECTED[model_id][level]
    assert body["max_tokens"] == 300 and "max_completion_tokens" not in body
    assert sdk_body(server, body) == body


def test_temperature_is_left_out_while_thinking_and_kept_without(server, caplog):
    caplog.set_level(logging.WARNING, logger="piagent")
    model = model_at(server, "deepseek-v4-flash")
    assert "temperature" not in request(server, model, reasoning="high", temperature=0.5)
    assert "rejects temperature while thinking" in caplog.text
    assert request(server, model, temperature=0.5)["temperature"] == 0.5


def test_cache_hits_and_reasoning_tokens_are_read_and_costed(server):
    raw = {
        "prompt_tokens": 1000,
        "completion_tokens": 100,
        "total_tokens": 1100,
        "prompt_cache_hit_tokens": 800,
        "prompt_cache_miss_tokens": 200,
        "completion_tokens_details": {"reasoning_tokens": 60},
    }
    server.reply(chat_stream(chunk({"content": "ok"}, "stop", usage=raw)))
    model = model_at(server, "deepseek-v4-flash")
    context = Context(messages=[UserMessage("Hi")])
    usage = stream_openai_completions(model, context, StreamOptions(api_key=KEY)).result(10).usage
    assert (usage.input, usage.cache_read, usage.output, usage.reasoning) == (200, 800, 100, 60)
    prices = model.cost
    assert prices.cache_read < prices.input
    expected = (200 * prices.input + 800 * prices.cache_read + 100 * prices.output) / 1e6
    assert usage.cost.total == pytest.approx(expected)


def test_deepseek_v4_pro_gets_a_later_system_message_where_it_stands_and_flash_gets_it_folded(server) -> None:
    """pi-ai 1.6.0's catalogue marks deepseek-v4-pro (not flash) as taking system messages
    mid-conversation (system_messages_in_place); the registered provider renders it in place."""
    from piagent.ai import SystemMessage, stream

    transcript = [SystemMessage("base", timestamp=0), UserMessage("Hi", timestamp=1), SystemMessage("Be brief.")]
    bodies = {}
    for model_id in ("deepseek-v4-pro", "deepseek-v4-flash"):
        server.reply(chat_text("ok"))
        message = stream(model_at(server, model_id), Context(messages=transcript), api_key=KEY).result(10)
        assert message.stop_reason == "stop", message.error_message
        bodies[model_id] = server.requests[-1].json
    assert bodies["deepseek-v4-pro"]["messages"] == [
        {"role": "system", "content": "base"},
        {"role": "user", "content": "Hi"},
        {"role": "system", "content": "Be brief."},
    ]
    assert bodies["deepseek-v4-flash"]["messages"] == [
        {"role": "system", "content": "base\n\nBe brief."},
        {"role": "user", "content": "Hi"},
    ]
