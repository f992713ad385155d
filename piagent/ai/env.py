"""API keys from the environment.

Each provider reads one environment variable (Google accepts two). Providers that run on
the user's machine (``local``, ``ollama``, ``lmstudio``, ``llama.cpp``, ``vllm``) need no key:
:func:`needs_api_key` is False for them and :func:`get_env_api_key` returns None.

    >>> env_var_for("openai")
    'OPENAI_API_KEY'
"""

from __future__ import annotations

import os
from typing import Optional

__all__ = ["KEYLESS_PROVIDERS", "env_var_for", "env_vars_for", "get_env_api_key", "needs_api_key"]

_ENV_VARS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "azure-openai": ("AZURE_OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "google": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "groq": ("GROQ_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "together": ("TOGETHER_API_KEY",),
    "fireworks": ("FIREWORKS_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "perplexity": ("PERPLEXITY_API_KEY",),
    "huggingface": ("HF_TOKEN",),
}

#: Providers served from the user's own machine; they are called without a key.
KEYLESS_PROVIDERS = frozenset({"local", "ollama", "lmstudio", "llama.cpp", "llamacpp", "vllm"})


def env_vars_for(provider: str) -> tuple[str, ...]:
    """Every environment variable read for ``provider``, in priority order (empty if keyless)."""
    if provider in KEYLESS_PROVIDERS:
        return ()
    known = _ENV_VARS.get(provider)
    if known:
        return known
    return (provider.upper().replace("-", "_").replace(".", "_") + "_API_KEY",)


def env_var_for(provider: str) -> str:
    """The main environment variable for ``provider`` (``<PROVIDER>_API_KEY`` if unknown)."""
    names = env_vars_for(provider)
    return names[0] if names else ""


def needs_api_key(provider: str) -> bool:
    """False for local servers (Ollama, LM Studio, llama.cpp, vLLM), True otherwise."""
    return provider not in KEYLESS_PROVIDERS


def get_env_api_key(provider: str) -> Optional[str]:
    """The key for ``provider`` from the environment, or None (always None for local servers)."""
    for name in env_vars_for(provider):
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return None
