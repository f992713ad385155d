"""Every Anthropic catalogue family at every thinking level: the exact request, checked against
the official ``anthropic`` SDK (it sends the same body; its types accept every value)."""

from __future__ import annotations

import functools
import json
import logging
from typing import Any, Optional

import pytest

from piagent.ai import Context, StreamOptions, Tool, UserMessage, get_model
from piagent.ai.providers.anthropic import (
    ANTHROPIC_VERSION,
    INTERLEAVED_THINKING_BETA,
    SAMPLING_VERSION,
    stream_anthropic,
)
from tests.ai.providers.sdk_oracle import check_types, replay_with_sdk
from tests.support.scripted_server import ScriptedServer

KEY = "sk-ant-test-key-0123456789abcdef"
LEVELS = [None, "minimal", "low", "medium", "high", "xhigh", "max"]
TOOL = Tool("lookup", "Look a word up.", {"type": "object", "properties": {"word": {"type": "string"}}})
STREAM = [
    {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 3, "output_tokens": 1}}},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    {"type": "message_stop"},
]


@pytest.fixture(scope="module")
def server():
    """One server for the module: each test reads the request it just made (the last one)."""
    with ScriptedServer() as s:
        yield s


pytestmark = pytest.mark.usefixtures("fresh_warnings")


def model_at(server: ScriptedServer, model_id: str) -> Any:
    model = get_model("anthropic", model_id)
    model.base_url = server.url
    return model


def send(server: ScriptedServer, model: Any, tools: bool = False, **options: Any) -> tuple[dict[str, Any], dict]:
    server.reply([f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in STREAM])
    context = Context(
        system_prompt="Be brief.", messages=[UserMessage("Hi", timestamp=1)], tools=[TOOL] if tools else None
    )
    stream = stream_anthropic(model, context, StreamOptions(api_key=KEY, max_tokens=4000, **options))
    message = stream.result(timeout=10)
    assert message.stop_reason == "stop", message.error_message
    request = server.requests[-1]
    return request.json, request.headers


def sdk_body(server: ScriptedServer, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
    pytest.importorskip("anthropic")
    from anthropic.types.message_create_params import MessageCreateParamsStreaming

    check_types(MessageCreateParamsStreaming, body)
    client = _client(server.url)
    extra = {"anthropic-beta": headers["anthropic-beta"]} if "anthropic-beta" in headers else None
    fields = {k: v for k, v in body.items() if k != "stream"}
    return replay_with_sdk(server, lambda: client.messages.create(**fields, stream=True, extra_headers=extra))


@functools.cache
def _client(url: str) -> Any:
    import anthropic

    return anthropic.Anthropic(api_key=KEY, base_url=url, max_retries=0)


EXPECTED: dict[str, dict[Optional[str], dict[str, Any]]] = {
    # adaptive, can be disabled, effort low..max
    "claude-opus-4-8": {
        None: {"thinking": {"type": "disabled"}},
        "minimal": {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "low"}},
        "low": {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "low"}},
        "medium": {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "medium"}},
        "high": {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "high"}},
        "xhigh": {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "xhigh"}},
        "max": {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "max"}},
    },
    # always thinks: off is its lowest effort
    "claude-fable-5-2": {
        None: {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "low"}},
        "max": {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "max"}},
    },
    # Claude 4.6: no xhigh (rounds up to max on Opus, down to high on Sonnet)
    "claude-opus-4-6": {
        "xhigh": {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "max"}},
    },
    # Sonnet 4.6 takes max (models/sonnet-4-6/overview)
    "claude-sonnet-4-6": {
        "max": {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "max"}},
        "xhigh": {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "max"}},
        None: {"thinking": {"type": "disabled"}},
    },
    # Opus 5.5 always thinks: off is its lowest effort, never "disabled"
    "claude-opus-5-5": {
        None: {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "low"}},
        "high": {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "high"}},
    },
    # Sonnet 5.5: off is between_tools (no effort sent with it: the default, high, is valid)
    "claude-sonnet-5-5": {
        None: {"thinking": {"type": "between_tools"}},
        "max": {"thinking": {"type": "adaptive", "display": "summarized"}, "output_config": {"effort": "max"}},
    },
    # budget thinking: off sends nothing; the budget grows with the level, max_tokens fits it
    "claude-haiku-4-5": {
        None: {},
        "minimal": {"thinking": {"type": "enabled", "budget_tokens": 1024}, "max_tokens": 5024},
        "medium": {"thinking": {"type": "enabled", "budget_tokens": 8192}, "max_tokens": 12192},
        "high": {"thinking": {"type": "enabled", "budget_tokens": 16384}, "max_tokens": 20384},
        "xhigh": {"thinking": {"type": "enabled", "budget_tokens": 32768}, "max_tokens": 36768},
        "max": {"thinking": {"type": "enabled", "budget_tokens": 62976}, "max_tokens": 64000},
    },
}
CASES = [(model_id, level) for model_id, levels in EXPECTED.items() for level in levels]


@pytest.mark.parametrize("model_id, level", CASES)
def test_each_family_and_level_sends_the_documented_thinking_fields(server, model_id, level):
    body, headers = send(server, model_at(server, model_id), reasoning=level)
    thinking_fields = {k: body[k] for k in ("thinking", "output_config") if k in body}
    expected = dict(EXPECTED[model_id][level])
    expected_max = expected.pop("max_tokens", 4000)
    assert thinking_fields == expected and body["max_tokens"] == expected_max
    assert body["model"] == model_id and "temperature" not in body
    assert sdk_body(server, body, headers) == body


@pytest.mark.parametrize("model_id", ["claude-opus-4-8", "claude-sonnet-5-5", "claude-fable-5", "claude-opus-4-6"])
@pytest.mark.parametrize("level", LEVELS)
def test_no_current_model_is_sent_budget_tokens_or_an_effort_it_lacks(server, model_id, level):
    model = model_at(server, model_id)
    body, headers = send(server, model, reasoning=level)
    assert body.get("thinking", {}).get("type") != "enabled"
    effort = body.get("output_config", {}).get("effort")
    assert effort is None or effort in model.capabilities.efforts
    assert sdk_body(server, body, headers) == body


def test_requests_use_the_api_version_the_sdk_sends():
    anthropic_constants = pytest.importorskip("anthropic._constants")
    assert ANTHROPIC_VERSION == anthropic_constants.ANTHROPIC_API_VERSION == "2026-10-21"


@pytest.mark.parametrize(
    "model_id, level, temperature, version",
    [
        ("claude-opus-4-8", None, None, "2026-10-21"),
        ("claude-opus-4-8", None, 0.2, "2026-10-21"),  # sampling never: temperature left out
        ("claude-haiku-4-5", None, 0.2, "2023-06-01"),  # takes temperature with thinking off
        ("claude-haiku-4-5", "low", 0.2, "2026-10-21"),  # ... not while thinking
        ("claude-sonnet-4-6", None, 0.2, "2023-06-01"),
        ("claude-sonnet-4-6", None, None, "2026-10-21"),
    ],
)
def test_a_request_carrying_temperature_is_sent_as_the_last_version_that_accepts_it(
    server, model_id, level, temperature, version
):
    """2026-10-21 refuses temperature/top_p/top_k on every model (400 even at default values);
    a model whose capabilities take a temperature gets it under 2023-06-01, the rest the new version."""
    body, headers = send(server, model_at(server, model_id), reasoning=level, temperature=temperature)
    assert headers["anthropic-version"] == version
    assert ("temperature" in body) == (version == SAMPLING_VERSION)


def test_temperature_is_left_out_for_a_model_that_rejects_sampling_with_one_warning(server, caplog):
    caplog.set_level(logging.WARNING, logger="piagent")
    model = model_at(server, "claude-opus-4-8")
    for _ in range(2):
        body, _ = send(server, model, temperature=0.2)
        assert "temperature" not in body
    warnings = [r for r in caplog.records if "rejects temperature" in r.getMessage()]
    assert len(warnings) == 1 and "claude-opus-4-8" in warnings[0].getMessage()


def test_temperature_is_kept_where_the_model_accepts_it_and_thinking_is_off(server):
    body, _ = send(server, model_at(server, "claude-haiku-4-5"), temperature=0.2)
    assert body["temperature"] == 0.2
    body, _ = send(server, model_at(server, "claude-haiku-4-5"), temperature=0.2, reasoning="low")
    assert "temperature" not in body


def test_a_forced_tool_choice_turns_thinking_off_where_the_model_allows_it(server, caplog):
    caplog.set_level(logging.WARNING, logger="piagent")
    body, headers = send(
        server, model_at(server, "claude-opus-4-8"), tools=True, reasoning="high", tool_choice="required"
    )
    assert body["tool_choice"] == {"type": "any"} and body["thinking"] == {"type": "disabled"}
    assert "output_config" not in body and "thinking is off" in caplog.text
    assert sdk_body(server, body, headers) == body


def test_a_forced_tool_choice_becomes_auto_on_a_model_that_always_thinks(server, caplog):
    caplog.set_level(logging.WARNING, logger="piagent")
    body, _ = send(server, model_at(server, "claude-fable-5"), tools=True, tool_choice={"name": "lookup"})
    assert body["tool_choice"] == {"type": "auto"} and body["thinking"]["type"] == "adaptive"
    assert 'sent as "auto"' in caplog.text


@pytest.mark.parametrize("model_id", ["claude-opus-5-5", "claude-sonnet-5-5"])
@pytest.mark.parametrize("level", [None, "high"])
def test_a_forced_tool_choice_is_sent_as_auto_on_the_5_5_models_that_refuse_forced_tool_use(
    server, caplog, model_id, level
):
    caplog.set_level(logging.WARNING, logger="piagent")
    body, headers = send(server, model_at(server, model_id), tools=True, reasoning=level, tool_choice="required")
    assert body["tool_choice"] == {"type": "auto"} and body["thinking"]["type"] != "disabled"
    assert 'sent as "auto"' in caplog.text
    assert sdk_body(server, body, headers) == body


def test_an_unforced_tool_choice_keeps_thinking(server):
    body, _ = send(server, model_at(server, "claude-opus-4-8"), tools=True, reasoning="high", tool_choice="auto")
    assert body["tool_choice"] == {"type": "auto"} and body["output_config"] == {"effort": "high"}


def test_budget_thinking_with_tools_sends_the_interleaved_thinking_beta(server):
    body, headers = send(server, model_at(server, "claude-haiku-4-5"), tools=True, reasoning="low")
    assert headers["anthropic-beta"] == INTERLEAVED_THINKING_BETA
    assert sdk_body(server, body, headers) == body
    _, headers = send(server, model_at(server, "claude-haiku-4-5"), tools=True)
    assert "anthropic-beta" not in headers
    _, headers = send(server, model_at(server, "claude-opus-4-8"), tools=True, reasoning="low")
    assert "anthropic-beta" not in headers  # adaptive thinking interleaves by itself


def test_an_unknown_claude_id_is_driven_like_its_family(server):
    body, _ = send(server, model_at(server, "claude-opus-6"), reasoning="xhigh")
    assert body["thinking"]["type"] == "adaptive" and body["output_config"] == {"effort": "xhigh"}


def test_one_hour_cache_writes_are_priced_apart_and_thinking_tokens_recorded(server):
    usage = {
        "input_tokens": 10,
        "output_tokens": 1,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 3000,
        "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000},
    }
    events = [
        {"type": "message_start", "message": {"id": "msg_c", "usage": usage}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 50, "output_tokens_details": {"thinking_tokens": 30}},
        },
        {"type": "message_stop"},
    ]
    server.reply([f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events])
    model = model_at(server, "claude-opus-4-8")
    context = Context(messages=[UserMessage("Hi")])
    result = stream_anthropic(model, context, StreamOptions(api_key=KEY, cache_retention="long")).result(10).usage
    assert (result.cache_write, result.cache_write_1h, result.reasoning) == (3000, 2000, 30)
    prices = model.cost
    assert prices.cache_write_1h > prices.cache_write > 0
    assert result.cost.cache_write == pytest.approx((1000 * prices.cache_write + 2000 * prices.cache_write_1h) / 1e6)
    assert result.to_dict()["cacheWrite1h"] == 2000
