"""A model that refuses an optional field costs one warning and one extra round trip, not an
outage (docs/providers.md#rejected-fields): against a real HTTP server on 127.0.0.1 answering
each API's own error shape, the request is sent once more without the field (or with the value
the error lists), the warning names the model, the field and the provider's words, and the
next request goes out corrected at once. Required fields, a second refusal, an error after
the stream began and errors naming no optional field are never retried.

The models are declared here ("released tomorrow"), so the catalogue's rules do not matter.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from piagent import Agent
from piagent.ai import (
    Context,
    StreamOptions,
    Tool,
    UserMessage,
    complete,
    custom_model,
    forget_learned,
    get_model,
    remember_rejections,
)
from piagent.ai.capabilities import THINKING_LEVELS, learned
from tests.ai.providers.openai_wire import chat_text, responses_text
from tests.support.scripted_server import ScriptedServer

KEY = "sk-test-key-0123456789abcdef"
JSON = {"Content-Type": "application/json"}
TOOL = Tool("lookup", "Look a word up.", {"type": "object", "properties": {"word": {"type": "string"}}})
ANTHROPIC_STREAM = [
    {"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 3, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    {"type": "message_stop"},
]
ADAPTIVE = {
    "thinking": "adaptive",
    "efforts": ["low", "medium", "high", "max"],
    "thinking_off": "disabled",
    "sampling": "never",
    "thinking_display": True,
}
EFFORT = {
    "thinking": "effort",
    "efforts": ["none", "low", "medium", "high"],
    "thinking_off": "none",
    "sampling": "never",
}


@pytest.fixture(autouse=True)
def _fresh(fresh_warnings: None, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("PIAGENT_HOME", str(tmp_path / "home"))
    yield
    forget_learned()
    remember_rejections(False)


def anthropic_sse(events: list[dict[str, Any]] = ANTHROPIC_STREAM) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def anthropic_error(message: str, kind: str = "invalid_request_error") -> bytes:
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_1"}).encode()


def openai_error(message: str, param: Any, code: Any) -> bytes:
    return json.dumps(
        {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
    ).encode()


def gemini_error(message: str, **more: Any) -> bytes:
    return json.dumps({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT", **more}}).encode()


def gemini_sse() -> list[bytes]:
    answer = {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}]}
    return [f"data: {json.dumps(answer)}\n\n".encode()]


ZERO_BUDGET_OFF = {"thinking": "budget", "efforts": ["minimal", "low", "high"], "thinking_off": "zero_budget"}


def gemini(server: ScriptedServer, model_id: str, capabilities: dict[str, Any] = ZERO_BUDGET_OFF) -> Any:
    return custom_model(
        model_id, server.url, api="google-generative-ai", provider="google", capabilities=capabilities, register=False
    )


def claude(server: ScriptedServer, **capabilities: Any) -> Any:
    caps = {**ADAPTIVE, **capabilities}
    return custom_model(
        "claude-new-6", server.url, api="anthropic-messages", provider="anthropic", capabilities=caps, register=False
    )


def gpt(server: ScriptedServer, api: str = "openai-responses") -> Any:
    return custom_model("gpt-new-7", server.url, api=api, provider="openai", capabilities=EFFORT, register=False)


def ask(model: Any, tools: bool = False, **options: Any) -> Any:
    context = Context(messages=[UserMessage("Hi", timestamp=1)], tools=[TOOL] if tools else None)
    return complete(model, context, StreamOptions(api_key=KEY, max_tokens=1000, max_retry_delay_ms=20, **options))


def bodies(server: ScriptedServer) -> list[dict[str, Any]]:
    return [r.json for r in server.requests]


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


# --------------------------------------------------------------------------- learned, retried once


def test_anthropic_refusing_thinking_off_is_retried_at_the_lowest_effort_and_remembered(server, caplog):
    words = '"thinking.type.disabled" is not supported for this model.'
    server.reply(anthropic_error(words), status=400, headers=JSON)
    server.reply(anthropic_sse())
    server.reply(anthropic_sse())
    model = claude(server)

    first = ask(model)
    assert first.stop_reason == "stop", first.error_message
    refused, retried = bodies(server)
    assert refused["thinking"] == {"type": "disabled"}
    assert retried == {
        **{k: v for k, v in refused.items() if k != "thinking"},
        "thinking": {"type": "adaptive", "display": "summarized"},
        "output_config": {"effort": "low"},
    }
    [warning] = warnings(caplog)
    assert "anthropic:claude-new-6" in warning and 'thinking.type="disabled"' in warning and words in warning

    assert ask(model).stop_reason == "stop"
    assert len(server.requests) == 3 and bodies(server)[2] == retried  # corrected at once, no warning again
    assert len(warnings(caplog)) == 1


def test_anthropic_refusing_budget_thinking_is_retried_adaptive_at_the_same_effort(server, caplog):
    words = (
        '"thinking.type.enabled" is not supported for this model. '
        'Use "thinking.type.adaptive" and "output_config.effort" to control thinking behavior.'
    )
    server.reply(anthropic_error(words), status=400, headers=JSON)
    server.reply(anthropic_sse())
    budget = {"thinking": "budget", "efforts": list(THINKING_LEVELS), "thinking_off": "disabled"}
    model = claude(server, **budget, sampling="without_thinking", thinking_display=False)

    assert ask(model, reasoning="high").stop_reason == "stop"
    refused, retried = bodies(server)
    assert refused["thinking"]["type"] == "enabled" and "output_config" not in refused
    assert retried["thinking"] == {"type": "adaptive"} and retried["output_config"] == {"effort": "high"}
    [warning] = warnings(caplog)
    assert 'thinking.type="enabled"' in warning and 'thinking "adaptive"' in warning


def test_openai_refusing_effort_none_gets_the_lowest_listed_effort(server, caplog):
    words = (
        "Unsupported value: 'reasoning.effort' does not support 'none' with this model. "
        "Supported values are: 'medium' and 'high'."
    )
    server.reply(openai_error(words, "reasoning.effort", "unsupported_value"), status=400, headers=JSON)
    server.reply(responses_text("ok"))
    server.reply(responses_text("ok"))
    model = gpt(server)

    assert ask(model).stop_reason == "stop"
    refused, retried = bodies(server)
    assert refused["reasoning"] == {"effort": "none"}
    assert retried == {**refused, "reasoning": {"effort": "medium", "summary": "auto"}}
    [warning] = warnings(caplog)
    assert "openai:gpt-new-7" in warning and 'reasoning.effort="none"' in warning and words in warning

    assert ask(model).stop_reason == "stop"
    assert len(server.requests) == 3 and bodies(server)[2] == retried


def test_chat_completions_refusing_a_forced_tool_choice_sends_auto(server, caplog):
    words = "Unsupported value: 'tool_choice' does not support 'required' with this model."
    server.reply(openai_error(words, "tool_choice", "unsupported_value"), status=400, headers=JSON)
    server.reply(chat_text("ok"))
    server.reply(chat_text("ok"))
    model = gpt(server, api="openai-completions")

    assert ask(model, tools=True, tool_choice="required").stop_reason == "stop"
    refused, retried = bodies(server)
    assert refused["tool_choice"] == "required"
    assert retried == {**refused, "tool_choice": "auto"}
    [warning] = warnings(caplog)  # once: not again as "refuses a forced tool choice"
    assert 'tool_choice="required"' in warning and words in warning

    assert ask(model, tools=True, tool_choice="required").stop_reason == "stop"
    assert len(server.requests) == 3 and bodies(server)[2]["tool_choice"] == "auto"
    assert len(warnings(caplog)) == 1


def test_openai_refusing_temperature_leaves_it_out(server, caplog):
    words = "Unsupported parameter: 'temperature' is not supported with this model."
    server.reply(openai_error(words, "temperature", "unsupported_parameter"), status=400, headers=JSON)
    server.reply(chat_text("ok"))
    model = custom_model("small-new-1", server.url, provider="openai", register=False)

    assert ask(model, temperature=0.2).stop_reason == "stop"
    refused, retried = bodies(server)
    assert refused["temperature"] == 0.2
    assert retried == {k: v for k, v in refused.items() if k != "temperature"}
    [warning] = warnings(caplog)  # once: not again as "rejects temperature"
    assert "openai:small-new-1 refused temperature=0.2" in warning and words in warning


def test_anthropic_deprecating_temperature_leaves_it_out(server):
    server.reply(anthropic_error("`temperature` is deprecated for this model."), status=400, headers=JSON)
    server.reply(anthropic_sse())
    model = claude(server, sampling="always")
    assert ask(model, temperature=0.5).stop_reason == "stop"
    refused, retried = bodies(server)
    assert refused["temperature"] == 0.5 and retried == {k: v for k, v in refused.items() if k != "temperature"}


def test_gemini_refusing_a_zero_budget_thinks_at_the_lowest_budget(server, caplog):
    words = "Budget 0 is invalid. This model only works in thinking mode."
    server.reply(gemini_error(words), status=400, headers=JSON)
    server.reply(gemini_sse())
    model = gemini(server, "gemini-new-5")

    assert ask(model).stop_reason == "stop"
    refused, retried = bodies(server)
    assert refused["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}
    assert retried["generationConfig"] == {
        **refused["generationConfig"],
        "thinkingConfig": {"thinkingBudget": 1024, "includeThoughts": True},
    }
    assert any("google:gemini-new-5" in w and words in w for w in warnings(caplog))


def test_gemini_naming_the_field_only_in_its_field_violations_is_recognised(server):
    violation = {"field": "generation_config.thinking_config.thinking_budget", "description": "Invalid value."}
    details = [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [violation]}]
    server.reply(gemini_error("Request contains an invalid argument.", details=details), status=400, headers=JSON)
    server.reply(gemini_sse())
    model = gemini(server, "gemini-new-7")

    assert ask(model).stop_reason == "stop"
    refused, retried = bodies(server)
    assert refused["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}
    assert retried["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 1024, "includeThoughts": True}


def test_gemini_refusing_a_thinking_level_gets_the_next_higher_one(server, caplog):
    words = "Thinking level MINIMAL is not supported for this model."
    server.reply(gemini_error(words), status=400, headers=JSON)
    server.reply(gemini_sse())
    model = gemini(
        server, "gemini-new-6", {"thinking": "level", "efforts": ["minimal", "low", "high"], "thinking_off": None}
    )

    assert ask(model, reasoning="minimal").stop_reason == "stop"
    refused, retried = bodies(server)
    assert refused["generationConfig"]["thinkingConfig"]["thinkingLevel"] == "MINIMAL"
    assert retried["generationConfig"]["thinkingConfig"] == {"thinkingLevel": "LOW", "includeThoughts": True}
    assert any('thinkingConfig.thinkingLevel="MINIMAL"' in w and words in w for w in warnings(caplog))


@pytest.mark.parametrize(
    "words",
    [
        'level "max" not supported, valid levels: low, medium, high',  # Anthropic's words for Sonnet 4.6
        "output_config.effort: 'max' is not supported for this model; expected 'low', 'medium' or 'high'",
    ],
)
def test_anthropic_refusing_an_effort_value_it_names_gets_the_highest_it_lists(server, words):
    server.reply(anthropic_error(words), status=400, headers=JSON)
    server.reply(anthropic_sse())
    assert ask(claude(server), reasoning="max").stop_reason == "stop"
    refused, retried = bodies(server)
    assert refused["output_config"] == {"effort": "max"} and retried["output_config"] == {"effort": "high"}
    assert learned() == {("anthropic", "claude-new-6"): {"efforts": ("low", "medium", "high")}}


def deepseek(server: ScriptedServer) -> Any:
    """The catalogue's DeepSeek V4 Pro (its effort_map sends xhigh as high), served by ``server``."""
    model = get_model("deepseek:deepseek-v4-pro")
    model.base_url = server.url
    return model


def test_a_refused_effort_an_effort_map_points_to_drops_that_mapping(server, caplog):
    words = (
        "Unsupported value: 'reasoning_effort' does not support 'high' with this model. "
        "Supported values are: 'low' and 'max'."
    )
    server.reply(openai_error(words, "reasoning_effort", "unsupported_value"), status=400, headers=JSON)
    server.reply(chat_text("ok"))
    server.reply(chat_text("ok"))
    model = deepseek(server)
    assert dict(model.capabilities.effort_map) == {"xhigh": "high"}

    first = ask(model, reasoning="xhigh")
    assert first.stop_reason == "stop", first.error_message
    refused, retried = bodies(server)
    assert refused["reasoning_effort"] == "high" and retried["reasoning_effort"] == "max"
    assert learned() == {("deepseek", "deepseek-v4-pro"): {"efforts": ("low", "max")}}

    assert ask(model, reasoning="xhigh").stop_reason == "stop"  # xhigh now rounds up as any level does
    assert len(server.requests) == 3 and bodies(server)[2]["reasoning_effort"] == "max"


def test_a_remembered_effort_list_without_a_mapped_value_keeps_the_model_usable(server, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    lessons = {"format": 1, "models": {"deepseek:deepseek-v4-pro": {"efforts": ["low", "max"]}}}
    (home / "learned-rules.json").write_text(json.dumps(lessons))
    remember_rejections()
    server.reply(chat_text("ok"))
    model = deepseek(server)

    assert ask(model, reasoning="xhigh").stop_reason == "stop"
    assert bodies(server)[0]["reasoning_effort"] == "max"


@dataclass
class City:
    name: str
    country: str


def test_a_structured_output_run_refused_its_forced_tool_goes_native_from_then_on(server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    server.reply(
        anthropic_error("tool_choice: forced tool use is not supported for this model."), status=400, headers=JSON
    )
    call = [
        ANTHROPIC_STREAM[0],
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "final_answer", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"name": "Paris", "country": "France"}'},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 2}},
        {"type": "message_stop"},
    ]
    server.reply(anthropic_sse(call))
    text = [dict(e) for e in ANTHROPIC_STREAM]
    text[2] = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": '{"name": "Paris", "country": "France"}'},
    }
    server.reply(anthropic_sse(text))
    model = claude(server)
    agent = Agent(model=model, output_mode="tool", output_retries=0)

    first = agent.prompt("Paris?", output_type=City)
    assert first.output == City("Paris", "France"), first.error_message
    refused, retried = bodies(server)
    assert refused["tool_choice"] == {"type": "tool", "name": "final_answer"}
    assert retried["tool_choice"] == {"type": "auto"}

    second = Agent(model=model, output_mode="tool", output_retries=0).prompt("Again?", output_type=City)
    assert second.output == City("Paris", "France"), second.error_message
    native = bodies(server)[2]
    assert "tools" not in native and native["output_config"]["format"]["type"] == "json_schema"


def test_remembered_in_the_user_level_file_when_asked(server, caplog, tmp_path):
    path = remember_rejections()
    assert path == tmp_path / "home" / "learned-rules.json"
    server.reply(anthropic_error('"thinking.type.disabled" is not supported for this model.'), status=400, headers=JSON)
    server.reply(anthropic_sse())
    server.reply(anthropic_sse())
    model = claude(server)
    assert ask(model).stop_reason == "stop"
    saved = json.loads(path.read_text())
    assert saved["models"]["anthropic:claude-new-6"] == {
        "thinking_off": None,
        "efforts": ["low", "medium", "high", "max"],
    }
    assert any(str(path) in w for w in warnings(caplog))

    forget_learned()  # a new process: nothing learned until the file is read
    remember_rejections()
    assert ask(model).stop_reason == "stop"
    assert len(server.requests) == 3 and bodies(server)[2]["thinking"]["type"] == "adaptive"


def test_a_damaged_user_level_file_costs_a_warning_per_bad_entry_and_keeps_the_rest(tmp_path, caplog):
    home = tmp_path / "home"
    home.mkdir()
    models = {
        "openai:gpt-a": {"efforts": 5},
        "openai:gpt-b": {"no_such_field": True},
        "openai:gpt-c": {"sampling": "never"},
    }
    (home / "learned-rules.json").write_text(json.dumps({"format": 1, "models": models}))
    remember_rejections()
    assert learned() == {("openai", "gpt-c"): {"sampling": "never"}}
    bad = warnings(caplog)
    assert len(bad) == 2 and "openai:gpt-a" in bad[0] and "openai:gpt-b" in bad[1]

    (home / "learned-rules.json").write_text("{not json")
    forget_learned()
    remember_rejections()
    assert learned() == {} and "could not be read" in warnings(caplog)[-1]


# --------------------------------------------------------------------------- never retried


def test_an_error_naming_a_required_field_is_not_retried(server):
    words = "messages.0.content.0: When thinking is disabled, an `assistant` message cannot contain `thinking`."
    server.reply(anthropic_error(words), status=400, headers=JSON)
    result = ask(claude(server))
    assert result.stop_reason == "error" and words in (result.error_message or "")
    assert len(server.requests) == 1


def test_an_openai_error_on_a_required_parameter_is_not_retried(server):
    server.reply(
        openai_error("Unsupported parameter: 'input'.", "input", "unsupported_parameter"), status=400, headers=JSON
    )
    assert ask(gpt(server)).stop_reason == "error"
    assert len(server.requests) == 1


def test_a_400_that_names_no_optional_field_is_not_retried(server):
    server.reply(
        openai_error("Invalid 'max_output_tokens': too large.", "max_output_tokens", "invalid_value"),
        status=400,
        headers=JSON,
    )
    violation = {"field": "contents[0].parts", "description": "Unknown name \"role\" at 'contents[0].parts'."}
    details = [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [violation]}]
    server.reply(gemini_error("Request contains an invalid argument.", details=details), status=400, headers=JSON)
    assert ask(gpt(server)).stop_reason == "error"
    assert ask(gemini(server, "g")).stop_reason == "error"  # a zero budget was sent, but not named
    assert len(server.requests) == 2


def test_a_temperature_out_of_range_is_the_callers_error_not_a_lesson(server):
    server.reply(anthropic_error("temperature: Input should be less than or equal to 1"), status=400, headers=JSON)
    server.reply(gemini_error("* GenerateContentRequest.generation_config.temperature: must be between 0 and 2"),
                 status=400, headers=JSON)  # fmt: skip
    assert ask(claude(server, sampling="always"), temperature=1.5).stop_reason == "error"
    assert ask(gemini(server, "gemini-new-8"), temperature=3.0).stop_reason == "error"
    assert len(server.requests) == 2 and learned() == {}


def test_a_forced_choice_of_a_tool_not_sent_is_the_callers_error_not_a_lesson(server):
    server.reply(anthropic_error("tool_choice.name: Tool 'lookup' not found in tools"), status=400, headers=JSON)
    assert ask(claude(server), tools=True, tool_choice={"name": "lookup"}).stop_reason == "error"
    assert len(server.requests) == 1 and learned() == {}


def test_a_field_the_request_did_not_send_that_way_is_not_retried(server):
    server.reply(anthropic_error('"thinking.type.disabled" is not supported for this model.'), status=400, headers=JSON)
    assert ask(claude(server), reasoning="high").stop_reason == "error"  # thinking was adaptive
    assert len(server.requests) == 1


def test_a_second_refusal_is_the_calls_error_without_a_third_request(server):
    server.reply(
        openai_error("Unsupported value: 'none'.", "reasoning.effort", "unsupported_value"), status=400, headers=JSON
    )
    second = "Unsupported value: 'tool_choice' does not support 'required' with this model."
    server.reply(openai_error(second, "tool_choice", "unsupported_value"), status=400, headers=JSON)
    result = ask(gpt(server), tools=True, tool_choice="required")
    assert result.stop_reason == "error" and second in (result.error_message or "")
    assert len(server.requests) == 2


def test_an_error_after_the_stream_began_is_not_retried(server):
    error = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": '"thinking.type.disabled" is not supported'},
    }
    server.reply(anthropic_sse([ANTHROPIC_STREAM[0], error]))
    result = ask(claude(server))
    assert result.stop_reason == "error" and "thinking.type.disabled" in (result.error_message or "")
    assert len(server.requests) == 1
