from __future__ import annotations

import pytest

from piagent.ai.models import custom_model, get_model, get_models, get_providers, register_model, unregister_model
from piagent.ai.types import Model, Usage
from piagent.exceptions import ModelNotFoundError


def test_reference_and_two_argument_forms_find_the_same_model():
    a = get_model("openai:gpt-4.1")
    b = get_model("openai", "gpt-4.1")
    assert a == b
    assert (a.api, a.provider, a.base_url) == ("openai-responses", "openai", "https://api.openai.com/v1")
    assert a.input == ["text", "image"] and a.context_window > 0 and a.max_tokens > 0


@pytest.mark.parametrize(
    "ref, api",
    [
        ("openai:gpt-4.1-mini", "openai-responses"),
        ("openai:gpt-5.5", "openai-responses"),
        ("openai:gpt-5.6-sol", "openai-responses"),
        ("openai:gpt-6-luna", "openai-responses"),
        ("anthropic:claude-opus-4-8", "anthropic-messages"),
        ("anthropic:claude-sonnet-5", "anthropic-messages"),
        ("anthropic:claude-haiku-4-5", "anthropic-messages"),
        ("anthropic:claude-fable-5", "anthropic-messages"),
        ("google:gemini-3.5-flash", "google-generative-ai"),
        ("google:gemini-3.1-pro-preview", "google-generative-ai"),
        ("google:gemini-2.5-flash-lite", "google-generative-ai"),
        ("groq:llama-3.3-70b-versatile", "openai-completions"),
        ("deepseek:deepseek-v4-flash", "openai-completions"),
        ("openrouter:openai/gpt-4o-mini", "openai-completions"),
        ("xai:grok-4", "openai-completions"),
        ("mistral:mistral-large-latest", "openai-completions"),
    ],
)
def test_catalogue_covers_the_main_models_of_each_provider(ref, api):
    model = get_model(ref)
    assert model.api == api
    assert model.base_url.startswith("https://")
    assert model.cost.input > 0 and model.cost.output > 0


def test_reasoning_models_are_marked():
    assert get_model("openai:gpt-5.5").reasoning and get_model("anthropic:claude-opus-4-8").reasoning
    assert not get_model("openai:gpt-4.1").reasoning
    assert get_model("deepseek:deepseek-v4-pro").reasoning


def test_dated_id_resolves_to_the_catalogue_model():
    assert get_model("anthropic:claude-opus-4-5-20251101").id == "claude-opus-4-5"
    assert get_model("openai:gpt-5.5-2026-04-23").id == "gpt-5.5"


def test_unknown_model_without_a_family_lists_close_matches():
    with pytest.raises(ModelNotFoundError) as info:
        get_model("groq:llama-3.3-70b-versatil")
    assert "groq:llama-3.3-70b-versatile" in str(info.value)
    assert "custom_model" in str(info.value)


def test_unknown_provider_lists_known_providers():
    with pytest.raises(ModelNotFoundError, match="Known providers: .*openai"):
        get_model("nope:model")


def test_reference_without_provider_is_rejected_clearly():
    with pytest.raises(ModelNotFoundError, match="provider:model-id"):
        get_model("gpt-4.1")


def test_returned_models_are_copies():
    model = get_model("openai:gpt-4o")
    model.cost.input = 999.0
    model.input.append("audio")
    fresh = get_model("openai:gpt-4o")
    assert fresh.cost.input != 999.0 and fresh.input == ["text", "image"]


def test_get_models_and_get_providers():
    assert {"openai", "anthropic", "google", "groq", "deepseek", "openrouter", "xai", "mistral"} <= set(get_providers())
    ids = [m.id for m in get_models("openai")]
    assert "gpt-4.1" in ids and "gpt-5.6-sol" in ids
    assert get_models("does-not-exist") == []


def test_custom_model_for_a_local_server_in_one_line():
    try:
        model = custom_model("llama3.1:8b", provider="ollama")
        assert model.base_url == "http://localhost:11434/v1"
        assert model.api == "openai-completions"
        assert get_model("ollama:llama3.1:8b") == model
    finally:
        unregister_model("ollama", "llama3.1:8b")
    with pytest.raises(ModelNotFoundError):
        get_model("ollama:llama3.1:8b")


def test_custom_model_needs_a_base_url_for_an_unknown_server():
    with pytest.raises(ValueError, match="base_url"):
        custom_model("m", provider="somewhere", register=False)


def test_custom_model_without_register_leaves_the_catalogue_alone():
    model = custom_model("qwen", "http://127.0.0.1:9/v1/", provider="vllm", register=False)
    assert model.base_url == "http://127.0.0.1:9/v1"
    with pytest.raises(ModelNotFoundError):
        get_model("vllm:qwen")


def test_register_model_replaces_by_provider_and_id():
    try:
        register_model(Model("m1", api="openai-completions", provider="acme", base_url="https://acme/v1"))
        register_model(Model("m1", api="openai-completions", provider="acme", base_url="https://acme/v2"))
        assert get_model("acme:m1").base_url == "https://acme/v2"
    finally:
        unregister_model("acme", "m1")


def test_cost_is_computed_from_catalogue_prices():
    model = get_model("openai:gpt-4.1")
    usage = Usage(input=1_000_000, output=500_000, cache_read=200_000)
    usage.compute_cost(model)
    assert usage.cost.input == pytest.approx(2.0)
    assert usage.cost.output == pytest.approx(4.0)
    assert usage.cost.cache_read == pytest.approx(0.1)
    assert usage.cost.total == pytest.approx(6.1)


@pytest.mark.parametrize(
    "ref, threshold, base, above",
    [
        # (input, output) USD per million tokens below / above the threshold (genai-prices 0.2.5)
        ("anthropic:claude-haiku-5-5", 100000, (0.1, 0.5), (0.5, 2.5)),
        ("openai:gpt-5.4", 272000, (2.5, 15.0), (5.0, 22.5)),
        ("google:gemini-3.1-pro-preview", 200000, (2.0, 12.0), (4.0, 18.0)),
    ],
)
def test_a_request_above_a_price_tier_costs_all_of_its_tokens_at_the_tier_price(ref, threshold, base, above):
    model = get_model(ref)
    at, over = Usage(input=threshold - 1000, output=1000, cache_read=1000), Usage(input=threshold + 1, output=1000)
    at.compute_cost(model)
    over.compute_cost(model)
    assert at.cost.input == pytest.approx(base[0] * (threshold - 1000) / 1e6)
    assert at.cost.output == pytest.approx(base[1] * 1000 / 1e6)
    assert over.cost.input == pytest.approx(above[0] * (threshold + 1) / 1e6)
    assert over.cost.output == pytest.approx(above[1] * 1000 / 1e6)


@pytest.mark.parametrize(
    "ref, window, prices",
    [
        # genai-prices lacks them: Anthropic's pricing page (Mythos shares Fable's prices and window)
        ("anthropic:claude-mythos-5-1", 1_000_000, (10.0, 50.0, 0.25, 12.5, 20.0)),
        ("anthropic:claude-mythos-5", 1_000_000, (10.0, 50.0, 1.0, 12.5, 20.0)),
        ("openai:gpt-6.2-astra", 1_050_000, (8.0, 40.0, 0.4, 10.0, 0.0)),
        ("openai:gpt-6.2-sol", 1_050_000, (2.0, 10.0, 0.1, 2.5, 0.0)),
        ("google:gemini-4-hydrogen", 1_048_576, (1.5, 7.5, 0.075, 0.0, 0.0)),
    ],
)
def test_models_once_priced_zero_carry_the_providers_published_prices_and_window(ref, window, prices):
    model = get_model(ref)
    cost = model.cost
    assert (cost.input, cost.output, cost.cache_read, cost.cache_write, cost.cache_write_1h) == prices
    assert model.context_window == window


def test_a_model_genai_prices_gives_no_window_takes_the_providers_published_one():
    """Not the generator's 200K placeholder: ai.google.dev's model page gives 1,048,576 input tokens."""
    assert get_model("google:gemini-3.1-pro-preview").context_window == 1_048_576
