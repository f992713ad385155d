from __future__ import annotations

import pytest

from piagent.ai.env import env_var_for, env_vars_for, get_env_api_key, needs_api_key


@pytest.mark.parametrize(
    "provider, var",
    [
        ("openai", "OPENAI_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("google", "GEMINI_API_KEY"),
        ("groq", "GROQ_API_KEY"),
        ("deepseek", "DEEPSEEK_API_KEY"),
        ("openrouter", "OPENROUTER_API_KEY"),
        ("mistral", "MISTRAL_API_KEY"),
        ("xai", "XAI_API_KEY"),
        ("together", "TOGETHER_API_KEY"),
        ("fireworks", "FIREWORKS_API_KEY"),
        ("cerebras", "CEREBRAS_API_KEY"),
    ],
)
def test_each_provider_reads_its_documented_variable(monkeypatch, provider, var):
    monkeypatch.setenv(var, "secret-value")
    assert env_var_for(provider) == var
    assert get_env_api_key(provider) == "secret-value"


def test_google_falls_back_to_google_api_key(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "g-key")
    assert get_env_api_key("google") == "g-key"
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key")
    assert get_env_api_key("google") == "gemini-key"


def test_unset_or_blank_variable_gives_none(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert get_env_api_key("openai") is None
    monkeypatch.setenv("OPENAI_API_KEY", "   ")
    assert get_env_api_key("openai") is None


@pytest.mark.parametrize("provider", ["local", "ollama", "lmstudio", "llama.cpp", "vllm"])
def test_local_servers_need_no_key(monkeypatch, provider):
    assert not needs_api_key(provider)
    assert env_vars_for(provider) == ()
    assert get_env_api_key(provider) is None


def test_unknown_provider_uses_an_upper_case_variable(monkeypatch):
    monkeypatch.setenv("MY_CLOUD_API_KEY", "k")
    assert env_var_for("my-cloud") == "MY_CLOUD_API_KEY"
    assert get_env_api_key("my-cloud") == "k"
