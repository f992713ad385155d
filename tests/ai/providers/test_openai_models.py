"""Every OpenAI catalogue family at every thinking level, on both APIs: the exact request,
checked against the official ``openai`` SDK; and what comes back (refusals, phase, usage)."""

from __future__ import annotations

import logging
from typing import Any, Optional

import pytest

from piagent.ai import AssistantMessage, Context, StreamOptions, TextContent, Tool, UserMessage, custom_model, get_model
from piagent.ai.providers.openai_completions import stream_openai_completions
from piagent.ai.providers.openai_responses import stream_openai_responses
from tests.ai.providers.openai_wire import ResponsesStream, chat_stream, chat_text, chunk, responses_text
from tests.ai.providers.sdk_oracle import check_types, openai_client, replay_with_sdk
from tests.support.scripted_server import ScriptedServer

KEY = "sk-test-openai-0123456789"
LEVELS = [None, "minimal", "low", "medium", "high", "xhigh", "max"]
TOOL = Tool("lookup", "Look a word up.", {"type": "object", "properties": {"word": {"type": "string"}}})


@pytest.fixture(scope="module")
def server():
    with ScriptedServer() as s:
        yield s


pytestmark = pytest.mark.usefixtures("fresh_warnings")


def model_at(server: ScriptedServer, model_id: str, api: str = "openai-responses") -> Any:
    model = get_model("openai", model_id)
    model.base_url, model.api = server.url + "/v1", api
    return model


def context(tools: bool = False, messages: Optional[list] = None) -> Context:
    return Context(
        system_prompt="Be brief.",
        messages=messages or [UserMessage("Hi", timestamp=1)],
        tools=[TOOL] if tools else None,
    )


def responses_request(server, model, tools=False, messages=None, **options) -> dict[str, Any]:
    server.reply(responses_text("ok"))
    message = stream_openai_responses(model, context(tools, messages), StreamOptions(api_key=KEY, **options)).result(10)
    assert message.stop_reason == "stop", message.error_message
    return server.requests[-1].json


def chat_request(server, model, tools=False, **options) -> dict[str, Any]:
    server.reply(chat_text("ok"))
    message = stream_openai_completions(model, context(tools), StreamOptions(api_key=KEY, **options)).result(10)
    assert message.stop_reason == "stop", message.error_message
    return server.requests[-1].json


def sdk_responses(server, body: dict[str, Any]) -> dict[str, Any]:
    pytest.importorskip("openai")
    from openai.types.responses.response_create_params import ResponseCreateParamsStreaming

    check_types(ResponseCreateParamsStreaming, body)
    fields = {k: v for k, v in body.items() if k != "stream"}
    return replay_with_sdk(
        server, lambda: openai_client(server.url + "/v1", KEY).responses.create(**fields, stream=True)
    )


def sdk_chat(server, body: dict[str, Any]) -> dict[str, Any]:
    pytest.importorskip("openai")
    from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming

    check_types(CompletionCreateParamsStreaming, body)
    fields = {k: v for k, v in body.items() if k != "stream"}
    return replay_with_sdk(
        server, lambda: openai_client(server.url + "/v1", KEY).chat.completions.create(**fields, stream=True)
    )


# The effort each family gets for each level (None: no effort sent).
EFFORTS: dict[str, dict[Optional[str], Optional[str]]] = {
    "gpt-5.6-sol": {
        None: "none",
        "minimal": "low",
        "low": "low",
        "medium": "medium",
        "high": "high",
        "xhigh": "xhigh",
        "max": "max",
    },
    "gpt-5.5": {None: "none", "minimal": "low", "xhigh": "xhigh", "max": "xhigh"},
    "gpt-5.1": {None: "none", "minimal": "low", "xhigh": "high", "max": "high"},
    "gpt-5": {None: "minimal", "minimal": "minimal", "high": "high", "max": "high"},
    "o3": {None: "low", "minimal": "low", "xhigh": "high"},
    "gpt-4.1": {None: None, "high": None},
    # reject effort "none" (developers.openai.com/api/docs/models/gpt-6.2-sol): off is low
    "gpt-6-astra": {None: "low", "minimal": "low", "max": "max"},
    "gpt-6.1-sol": {None: "low", "xhigh": "xhigh"},
    "gpt-6.2-astra": {None: "low", "medium": "medium"},
    "gpt-6.2-sol": {None: "low", "max": "max"},
}
CASES = [(model_id, level) for model_id, levels in EFFORTS.items() for level in levels]


@pytest.mark.parametrize("model_id, level", CASES)
def test_responses_effort_per_family_and_level(server, model_id, level):
    body = responses_request(server, model_at(server, model_id), reasoning=level)
    expected = EFFORTS[model_id][level]
    if expected is None:
        assert "reasoning" not in body and "include" not in body
    elif expected == "none":
        assert body["reasoning"] == {"effort": "none"}
    else:
        assert body["reasoning"] == {"effort": expected, "summary": "auto"}
    assert sdk_responses(server, body) == body


@pytest.mark.parametrize("model_id, level", CASES)
def test_chat_completions_effort_per_family_and_level(server, model_id, level):
    body = chat_request(server, model_at(server, model_id, "openai-completions"), reasoning=level, max_tokens=500)
    assert body.get("reasoning_effort") == EFFORTS[model_id][level]
    assert body["max_completion_tokens"] == 500 and "max_tokens" not in body
    assert sdk_chat(server, body) == body


@pytest.mark.parametrize("model_id", ["gpt-6-luna", "gpt-5.4", "gpt-5", "o3"])
@pytest.mark.parametrize("api", ["openai-responses", "openai-completions"])
def test_reasoning_models_never_get_a_temperature(server, model_id, api, caplog):
    caplog.set_level(logging.WARNING, logger="piagent")
    send = responses_request if api == "openai-responses" else chat_request
    body = send(server, model_at(server, model_id, api), temperature=0.3, reasoning="low")
    assert "temperature" not in body and "rejects temperature" in caplog.text


def test_a_model_without_reasoning_keeps_its_temperature(server):
    assert responses_request(server, model_at(server, "gpt-4.1"), temperature=0.3)["temperature"] == 0.3


def test_chat_completions_drops_reasoning_with_tools_on_models_that_refuse_both(server, caplog):
    caplog.set_level(logging.WARNING, logger="piagent")
    body = chat_request(server, model_at(server, "gpt-5.6-sol", "openai-completions"), tools=True, reasoning="high")
    assert body["reasoning_effort"] == "none" and "openai-responses" in caplog.text
    assert sdk_chat(server, body) == body
    body = chat_request(server, model_at(server, "gpt-5.5", "openai-completions"), tools=True, reasoning="high")
    assert body["reasoning_effort"] == "high"


@pytest.mark.parametrize("model_id", ["gpt-6-astra", "gpt-6.1-sol", "gpt-6.2-astra", "gpt-6.2-sol"])
def test_tools_on_chat_completions_fail_before_sending_for_models_that_always_reason(server, model_id):
    """Chat Completions refuses their function tools (they cannot stop reasoning): the request is
    not sent, the error says to use the Responses API, which the catalogue routes them to."""
    model = model_at(server, model_id, "openai-completions")
    sent = len(server.requests)
    message = stream_openai_completions(model, context(tools=True), StreamOptions(api_key=KEY)).result(10)
    assert message.stop_reason == "error" and "openai-responses" in (message.error_message or "")
    assert len(server.requests) == sent
    assert get_model("openai", model_id).api == "openai-responses"
    body = responses_request(server, model_at(server, model_id), tools=True)
    assert body["tools"][0]["name"] == TOOL.name and body["reasoning"]["effort"] == "low"
    assert sdk_responses(server, body) == body


# cache_retention -> (Responses fields, Chat Completions fields), per model generation
CACHE_FIELDS = {
    "gpt-6.1-sol": {
        "long": ({"prompt_cache_options": {"ttl": "12h"}}, {"prompt_cache_retention": "24h"}),
        "none": ({"prompt_cache_options": {"mode": "explicit"}}, {"prompt_cache_options": {"mode": "explicit"}}),
        "short": ({}, {}),
    },
    "gpt-5.5": {
        "long": ({"prompt_cache_retention": "24h"}, {"prompt_cache_retention": "24h"}),
        "none": ({}, {}),
        "short": ({}, {}),
    },
}
CACHE_CASES = [(m, r) for m, by_retention in CACHE_FIELDS.items() for r in by_retention]


@pytest.mark.parametrize("model_id, retention", CACHE_CASES)
def test_cache_retention_is_sent_as_each_openai_api_defines_it(server, model_id, retention):
    fields = ("prompt_cache_options", "prompt_cache_retention", "prompt_cache_key")
    responses_fields, chat_fields = CACHE_FIELDS[model_id][retention]
    key = {} if retention == "none" else {"prompt_cache_key": "s-1"}
    for api, send, sdk, expected in (
        ("openai-responses", responses_request, sdk_responses, responses_fields),
        ("openai-completions", chat_request, sdk_chat, chat_fields),
    ):
        model = model_at(server, model_id, api)
        model.compat = {"supports_prompt_cache_retention": True, "supports_prompt_cache_key": True}  # as on OpenAI
        body = send(server, model, cache_retention=retention, session_id="s-1", reasoning="low")
        assert {k: body[k] for k in fields if k in body} == {**expected, **key}, api
        assert sdk(server, body) == body


def test_cache_retention_fields_go_to_openai_only(server):
    """Sent to api.openai.com with the catalogue's defaults (no compat set by hand); a server
    that only copies OpenAI's API gets none of them."""
    from piagent.ai.providers import openai_completions, openai_responses

    at_openai = get_model("openai", "gpt-6.1-sol")
    options = StreamOptions(cache_retention="long", reasoning="low")
    assert openai_responses.build_payload(at_openai, context(), options)["prompt_cache_options"] == {"ttl": "12h"}
    assert openai_completions.build_payload(at_openai, context(), options)["prompt_cache_retention"] == "24h"
    body = responses_request(server, model_at(server, "gpt-6.1-sol"), cache_retention="long")
    assert "prompt_cache_options" not in body and "prompt_cache_retention" not in body


def test_a_proxy_in_front_of_openai_gets_max_completion_tokens_and_a_local_server_max_tokens(server):
    model = model_at(server, "gpt-5.5", "openai-completions")
    model.capabilities = None  # as a model declared by hand for a proxy: the default is the current field
    model.base_url = "http://proxy.example:8080/v1"
    from piagent.ai.providers.openai_completions import resolve_compat

    assert resolve_compat(model)["max_tokens_field"] == "max_completion_tokens"
    model.base_url = "http://localhost:8080/v1"
    assert resolve_compat(model)["max_tokens_field"] == "max_tokens"
    model.compat = {"max_tokens_field": "max_completion_tokens"}
    assert resolve_compat(model)["max_tokens_field"] == "max_completion_tokens"


def test_mistral_declared_by_hand_gets_max_tokens_which_is_the_only_field_it_accepts():
    from piagent.ai.providers.openai_completions import resolve_compat

    model = custom_model("devstral-small", provider="my-mistral", base_url="https://api.mistral.ai/v1", register=False)
    assert resolve_compat(model)["max_tokens_field"] == "max_tokens"


# --------------------------------------------------------------------------- the way back


def test_a_chat_completions_refusal_is_a_refusal_not_an_empty_answer(server):
    server.reply(chat_stream(chunk({"role": "assistant", "refusal": "I can't "}), chunk({"refusal": "help."}, "stop")))
    model = model_at(server, "gpt-5.5", "openai-completions")
    message = stream_openai_completions(model, context(), StreamOptions(api_key=KEY)).result(10)
    assert message.stop_reason == "refusal" and message.text == "I can't help."
    assert message.refusal == {"category": None, "explanation": None}


def test_a_responses_refusal_part_is_a_refusal(server):
    s = ResponsesStream().created()
    item = {"id": "msg_r", "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
    s.add("response.output_item.added", output_index=0, item=item)
    s.add("response.refusal.delta", item_id="msg_r", output_index=0, content_index=0, delta="No, sorry.")
    done = dict(item, status="completed", content=[{"type": "refusal", "refusal": "No, sorry."}])
    s.add("response.output_item.done", output_index=0, item=done)
    server.reply(s.completed().frames())
    message = stream_openai_responses(model_at(server, "gpt-5.5"), context(), StreamOptions(api_key=KEY)).result(10)
    assert message.stop_reason == "refusal" and message.text == "No, sorry."


def test_the_phase_of_an_assistant_message_is_kept_and_replayed(server):
    s = ResponsesStream().created()
    item = {"id": "msg_p", "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
    s.add("response.output_item.added", output_index=0, item=dict(item, phase="commentary"))
    s.add("response.output_text.delta", item_id="msg_p", output_index=0, content_index=0, delta="Looking.", logprobs=[])
    done = dict(item, status="completed", phase="commentary")
    done["content"] = [{"type": "output_text", "text": "Looking.", "annotations": []}]
    s.add("response.output_item.done", output_index=0, item=done)
    server.reply(s.completed().frames())
    model = model_at(server, "gpt-5.5")
    first = stream_openai_responses(model, context(), StreamOptions(api_key=KEY)).result(10)
    history = [UserMessage("Hi", timestamp=1), first, UserMessage("Go on", timestamp=2)]
    body = responses_request(server, model, messages=history)
    replayed = [i for i in body["input"] if i.get("type") == "message"]
    assert replayed[0]["phase"] == "commentary" and replayed[0]["id"] == "msg_p"
    assert sdk_responses(server, body) == body


def test_a_foreign_message_is_replayed_without_phase_or_id(server):
    foreign = AssistantMessage([TextContent("Earlier.", '{"id":"msg_x","phase":"final_answer"}')], provider="other")
    body = responses_request(
        server, model_at(server, "gpt-5.5"), messages=[UserMessage("a"), foreign, UserMessage("b")]
    )
    assert {"role": "assistant", "content": "Earlier."} in body["input"]


def test_responses_usage_reads_cache_writes_and_reasoning_tokens(server):
    s = ResponsesStream().created().message(0, "msg_u", "ok")
    usage = {
        "input_tokens": 1000,
        "input_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 300},
        "output_tokens": 50,
        "output_tokens_details": {"reasoning_tokens": 40},
        "total_tokens": 1050,
    }
    s.add("response.completed", response=s.response("completed", usage=usage))
    server.reply(s.frames())
    model = model_at(server, "gpt-5.5")
    usage_out = stream_openai_responses(model, context(), StreamOptions(api_key=KEY)).result(10).usage
    assert (usage_out.input, usage_out.cache_read, usage_out.cache_write) == (100, 600, 300)
    assert usage_out.output == 50 and usage_out.reasoning == 40
    price = model.cost
    expected = (100 * price.input + 600 * price.cache_read + 300 * price.input + 50 * price.output) / 1e6
    assert usage_out.cost.total == pytest.approx(expected)


def test_chat_usage_reads_cache_writes_and_reasoning_tokens(server):
    raw = {
        "prompt_tokens": 500,
        "completion_tokens": 30,
        "total_tokens": 530,
        "prompt_tokens_details": {"cached_tokens": 200, "cache_write_tokens": 100},
        "completion_tokens_details": {"reasoning_tokens": 20},
    }
    server.reply(chat_stream(chunk({"content": "ok"}, "stop", usage=raw)))
    model = model_at(server, "gpt-5.5", "openai-completions")
    usage = stream_openai_completions(model, context(), StreamOptions(api_key=KEY)).result(10).usage
    assert (usage.input, usage.cache_read, usage.cache_write, usage.reasoning) == (200, 200, 100, 20)


def test_a_thinking_level_asked_of_a_model_that_cannot_think_warns_once_per_model(fresh_warnings, caplog):
    from piagent import Agent

    caplog.set_level(logging.WARNING, logger="piagent")
    with ScriptedServer() as server:
        server.reply(chat_text("One."))
        server.reply(chat_text("Two."))
        model = custom_model("plain-8b", api="openai-completions", base_url=server.url + "/v1")
        agent = Agent(model=model, thinking_level="high")
        assert [agent.prompt(q).text for q in ("1?", "2?")] == ["One.", "Two."]
    assert all("reasoning_effort" not in request.json for request in server.requests)
    warnings = [r.getMessage() for r in caplog.records if "does not think" in r.getMessage()]
    assert warnings == ["local:plain-8b does not think: thinking level 'high' is ignored"]
