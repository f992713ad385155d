"""The built-in model catalogue, as data (read by :mod:`piagent.ai.models`).

Prices are USD per million tokens (input, output, cache read, cache write) copied by hand
from each provider's public price page as known in late 2025. They are indicative and dated:
providers change them, so check the price page before relying on ``usage.cost``.

Each row: ``(id, name, context_window, max_tokens, (input, output, cache_read, cache_write),
reasoning, vision)``. Provider-wide settings (api, base URL, compat) are in ``PROVIDERS``.
"""

from __future__ import annotations

from typing import Any

Row = tuple[str, str, int, int, tuple[float, float, float, float], bool, bool]

PROVIDERS: dict[str, dict[str, Any]] = {
    "openai": {"api": "openai-responses", "base_url": "https://api.openai.com/v1"},
    "anthropic": {"api": "anthropic-messages", "base_url": "https://api.anthropic.com"},
    "google": {"api": "google-generative-ai", "base_url": "https://generativelanguage.googleapis.com/v1beta"},
    "groq": {"api": "openai-completions", "base_url": "https://api.groq.com/openai/v1"},
    "deepseek": {"api": "openai-completions", "base_url": "https://api.deepseek.com/v1"},
    "openrouter": {"api": "openai-completions", "base_url": "https://openrouter.ai/api/v1"},
    "xai": {"api": "openai-completions", "base_url": "https://api.x.ai/v1"},
    "mistral": {"api": "openai-completions", "base_url": "https://api.mistral.ai/v1"},
    "cerebras": {"api": "openai-completions", "base_url": "https://api.cerebras.ai/v1"},
    # In process, through llama-cpp-python (the "local" extra); the GGUF is found by model id.
    "local": {"api": "llama-cpp", "base_url": ""},
}

MODELS: dict[str, list[Row]] = {
    "openai": [
        ("gpt-4.1", "GPT-4.1", 1047576, 32768, (2.0, 8.0, 0.5, 0.0), False, True),
        ("gpt-4.1-mini", "GPT-4.1 mini", 1047576, 32768, (0.4, 1.6, 0.1, 0.0), False, True),
        ("gpt-4.1-nano", "GPT-4.1 nano", 1047576, 32768, (0.1, 0.4, 0.025, 0.0), False, True),
        ("gpt-4o", "GPT-4o", 128000, 16384, (2.5, 10.0, 1.25, 0.0), False, True),
        ("gpt-4o-mini", "GPT-4o mini", 128000, 16384, (0.15, 0.6, 0.075, 0.0), False, True),
        ("o3", "o3", 200000, 100000, (2.0, 8.0, 0.5, 0.0), True, True),
        ("o4-mini", "o4-mini", 200000, 100000, (1.1, 4.4, 0.275, 0.0), True, True),
        ("gpt-5", "GPT-5", 400000, 128000, (1.25, 10.0, 0.125, 0.0), True, True),
        ("gpt-5-mini", "GPT-5 mini", 400000, 128000, (0.25, 2.0, 0.025, 0.0), True, True),
        ("gpt-5-nano", "GPT-5 nano", 400000, 128000, (0.05, 0.4, 0.005, 0.0), True, True),
    ],
    "anthropic": [
        ("claude-opus-4-1-20250805", "Claude Opus 4.1", 200000, 32000, (15.0, 75.0, 1.5, 18.75), True, True),
        ("claude-opus-4-20250514", "Claude Opus 4", 200000, 32000, (15.0, 75.0, 1.5, 18.75), True, True),
        ("claude-sonnet-4-5-20250929", "Claude Sonnet 4.5", 200000, 64000, (3.0, 15.0, 0.3, 3.75), True, True),
        ("claude-sonnet-4-20250514", "Claude Sonnet 4", 200000, 64000, (3.0, 15.0, 0.3, 3.75), True, True),
        ("claude-3-7-sonnet-20250219", "Claude Sonnet 3.7", 200000, 64000, (3.0, 15.0, 0.3, 3.75), True, True),
        ("claude-haiku-4-5-20251001", "Claude Haiku 4.5", 200000, 64000, (1.0, 5.0, 0.1, 1.25), True, True),
        ("claude-3-5-haiku-20241022", "Claude Haiku 3.5", 200000, 8192, (0.8, 4.0, 0.08, 1.0), False, True),
    ],
    "google": [
        ("gemini-2.5-pro", "Gemini 2.5 Pro", 1048576, 65536, (1.25, 10.0, 0.31, 0.0), True, True),
        ("gemini-2.5-flash", "Gemini 2.5 Flash", 1048576, 65536, (0.3, 2.5, 0.075, 0.0), True, True),
        ("gemini-2.5-flash-lite", "Gemini 2.5 Flash-Lite", 1048576, 65536, (0.1, 0.4, 0.025, 0.0), True, True),
        ("gemini-2.0-flash", "Gemini 2.0 Flash", 1048576, 8192, (0.1, 0.4, 0.025, 0.0), False, True),
    ],
    "groq": [
        ("llama-3.3-70b-versatile", "Llama 3.3 70B Versatile", 131072, 32768, (0.59, 0.79, 0.0, 0.0), False, False),
        ("llama-3.1-8b-instant", "Llama 3.1 8B Instant", 131072, 8192, (0.05, 0.08, 0.0, 0.0), False, False),
        ("openai/gpt-oss-120b", "GPT OSS 120B", 131072, 65536, (0.15, 0.75, 0.0, 0.0), True, False),
        ("openai/gpt-oss-20b", "GPT OSS 20B", 131072, 65536, (0.1, 0.5, 0.0, 0.0), True, False),
        ("qwen/qwen3-32b", "Qwen3 32B", 131072, 40960, (0.29, 0.59, 0.0, 0.0), True, False),
        ("moonshotai/kimi-k2-instruct", "Kimi K2 Instruct", 131072, 16384, (1.0, 3.0, 0.0, 0.0), False, False),
    ],
    "deepseek": [
        ("deepseek-chat", "DeepSeek Chat", 128000, 8192, (0.28, 0.42, 0.028, 0.0), False, False),
        ("deepseek-reasoner", "DeepSeek Reasoner", 128000, 64000, (0.28, 0.42, 0.028, 0.0), True, False),
    ],
    "openrouter": [
        ("openai/gpt-4o-mini", "OpenAI: GPT-4o mini", 128000, 16384, (0.15, 0.6, 0.075, 0.0), False, True),
        ("openai/gpt-4.1", "OpenAI: GPT-4.1", 1047576, 32768, (2.0, 8.0, 0.5, 0.0), False, True),
        ("anthropic/claude-sonnet-4", "Anthropic: Claude Sonnet 4", 200000, 64000, (3.0, 15.0, 0.3, 3.75), True, True),
        ("google/gemini-2.5-flash", "Google: Gemini 2.5 Flash", 1048576, 65536, (0.3, 2.5, 0.075, 0.0), True, True),
        ("google/gemini-2.5-pro", "Google: Gemini 2.5 Pro", 1048576, 65536, (1.25, 10.0, 0.31, 0.0), True, True),
        ("deepseek/deepseek-chat", "DeepSeek: DeepSeek V3", 128000, 8192, (0.3, 0.85, 0.0, 0.0), False, False),
        (
            "meta-llama/llama-3.3-70b-instruct",
            "Meta: Llama 3.3 70B Instruct",
            131072,
            16384,
            (0.13, 0.4, 0.0, 0.0),
            False,
            False,
        ),
    ],
    "xai": [
        ("grok-4", "Grok 4", 256000, 64000, (3.0, 15.0, 0.75, 0.0), True, True),
        ("grok-code-fast-1", "Grok Code Fast 1", 256000, 10000, (0.2, 1.5, 0.02, 0.0), True, False),
        ("grok-3", "Grok 3", 131072, 8192, (3.0, 15.0, 0.75, 0.0), False, False),
        ("grok-3-mini", "Grok 3 Mini", 131072, 8192, (0.3, 0.5, 0.075, 0.0), True, False),
    ],
    "mistral": [
        ("mistral-large-latest", "Mistral Large", 131072, 16384, (2.0, 6.0, 0.0, 0.0), False, False),
        ("mistral-medium-latest", "Mistral Medium", 131072, 16384, (0.4, 2.0, 0.0, 0.0), False, True),
        ("mistral-small-latest", "Mistral Small", 131072, 16384, (0.1, 0.3, 0.0, 0.0), False, True),
        ("codestral-latest", "Codestral", 256000, 16384, (0.3, 0.9, 0.0, 0.0), False, False),
        ("magistral-medium-latest", "Magistral Medium", 40000, 16384, (2.0, 5.0, 0.0, 0.0), True, False),
    ],
    "cerebras": [
        ("gpt-oss-120b", "GPT OSS 120B", 131072, 32768, (0.25, 0.69, 0.0, 0.0), True, False),
        ("llama-3.3-70b", "Llama 3.3 70B", 128000, 8192, (0.85, 1.2, 0.0, 0.0), False, False),
    ],
    "local": [
        ("smollm2-135m", "SmolLM2 135M Instruct (embedded)", 8192, 512, (0.0, 0.0, 0.0, 0.0), False, False),
    ],
}

#: Short names accepted by ``get_model`` for dated ids.
ALIASES: dict[str, dict[str, str]] = {
    "anthropic": {
        "claude-opus-4-1": "claude-opus-4-1-20250805",
        "claude-opus-4": "claude-opus-4-20250514",
        "claude-opus-4-0": "claude-opus-4-20250514",
        "claude-sonnet-4-5": "claude-sonnet-4-5-20250929",
        "claude-sonnet-4": "claude-sonnet-4-20250514",
        "claude-sonnet-4-0": "claude-sonnet-4-20250514",
        "claude-3-7-sonnet": "claude-3-7-sonnet-20250219",
        "claude-3-7-sonnet-latest": "claude-3-7-sonnet-20250219",
        "claude-haiku-4-5": "claude-haiku-4-5-20251001",
        "claude-3-5-haiku": "claude-3-5-haiku-20241022",
        "claude-3-5-haiku-latest": "claude-3-5-haiku-20241022",
    },
}
