"""A model the catalogue knows, declared by hand behind another URL (a proxy on this machine, a
gateway): its known capabilities come before the guesses piagent makes from the URL
(docs/models.md#custom-models). Driven through ``custom_model`` and an ``Agent`` against a real
HTTP server on 127.0.0.1, as a user in front of a local proxy does."""

from __future__ import annotations

import pytest

from piagent import Agent
from piagent.ai import custom_model, get_model
from piagent.ai.models import register_model, unregister_model
from tests.ai.providers.openai_wire import chat_text

pytestmark = pytest.mark.usefixtures("fresh_warnings")


def test_a_known_openai_reasoning_model_behind_a_local_proxy_gets_max_completion_tokens(server):
    server.reply(chat_text("ok"))
    model = custom_model("gpt-5.6-sol", api="openai-completions", base_url=server.url + "/v1", register=False)
    result = Agent(model=model).prompt("Hi")
    assert result.stop_reason == "stop", result.error_message
    body = server.requests[0].json
    assert "max_completion_tokens" in body and "max_tokens" not in body


def test_a_known_model_declared_by_hand_is_driven_by_its_catalogue_capabilities(server):
    server.reply(chat_text("ok"))
    known = get_model("openai", "gpt-5.6-sol")
    model = custom_model("gpt-5.6-sol", api="openai-completions", base_url=server.url + "/v1", register=False)
    assert model.capabilities == known.capabilities and model.reasoning
    Agent(model=model, temperature=0.5, thinking_level="high").prompt("Hi")
    body = server.requests[0].json
    assert body["reasoning_effort"] == "high"
    assert "temperature" not in body  # the model rejects sampling settings


def test_capabilities_given_by_hand_come_before_the_catalogues(server):
    model = custom_model(
        "gpt-5.6-sol", base_url=server.url + "/v1", capabilities={"max_tokens_field": "max_tokens"}, register=False
    )
    assert model.capabilities is not None and model.capabilities.max_tokens_field == "max_tokens"
    assert not model.reasoning


def test_an_unknown_id_behind_a_local_server_keeps_the_local_guess(server):
    server.reply(chat_text("ok"))
    model = custom_model("my-finetune", base_url=server.url + "/v1", register=False)
    assert model.capabilities is None
    Agent(model=model).prompt("Hi")
    body = server.requests[0].json
    assert "max_tokens" in body and "max_completion_tokens" not in body


def test_declared_effort_capabilities_come_before_the_hosts_guess(server):
    """x.ai's URL is guessed to refuse ``reasoning_effort``; a model declared with an effort
    control gets it all the same (the scripted server answers on a path holding that name)."""
    server.reply(chat_text("ok"))
    model = custom_model(
        "grok-3-mini",
        base_url=server.url + "/x.ai/v1",
        capabilities={"thinking": "effort", "efforts": ["low", "high"]},
        register=False,
    )
    result = Agent(model=model, thinking_level="high").prompt("Hi")
    assert result.stop_reason == "stop", result.error_message
    assert server.requests[0].json["reasoning_effort"] == "high"


def test_an_id_two_providers_drive_differently_is_not_guessed(server):
    for provider, field in (("proxy-a", "max_tokens"), ("proxy-b", "max_completion_tokens")):
        register_model(
            custom_model("twin-1", base_url=server.url, provider=provider, capabilities={"max_tokens_field": field})
        )
    try:
        assert custom_model("twin-1", base_url=server.url + "/v1", register=False).capabilities is None
    finally:
        unregister_model("proxy-a", "twin-1")
        unregister_model("proxy-b", "twin-1")
