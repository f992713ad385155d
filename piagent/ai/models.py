"""The model catalogue: built-in models of the main providers, plus the ones you register.

    get_model("openai:gpt-4.1")          # or get_model("openai", "gpt-4.1")
    get_models("anthropic"); get_providers()
    custom_model("llama3.1:8b", provider="ollama")   # a local OpenAI-compatible server

Built-in prices are indicative and dated (see :mod:`piagent.ai._model_data`). Every call
returns a fresh copy, so changing a returned :class:`Model` never changes the catalogue.
Unknown ids raise :class:`ModelNotFoundError` with the closest matches; :func:`custom_model`
declares any other model in one line. Thread-safe.
"""

from __future__ import annotations

import copy
import difflib
import threading
from collections.abc import Sequence
from typing import Any, Optional

from ..exceptions import ModelNotFoundError
from ._model_data import ALIASES, MODELS, PROVIDERS
from .types import Cost, Model

__all__ = [
    "LOCAL_SERVERS",
    "custom_model",
    "get_model",
    "get_models",
    "get_providers",
    "register_model",
    "unregister_model",
]

#: Default OpenAI-compatible endpoints of common local servers (keyless providers).
LOCAL_SERVERS: dict[str, str] = {
    "ollama": "http://localhost:11434/v1",
    "lmstudio": "http://localhost:1234/v1",
    "llama.cpp": "http://localhost:8080/v1",
    "vllm": "http://localhost:8000/v1",
}

_lock = threading.Lock()
_catalogue: dict[str, dict[str, Model]] = {}


def _load_builtins() -> None:
    for provider, rows in MODELS.items():
        settings = PROVIDERS[provider]
        models = _catalogue.setdefault(provider, {})
        for model_id, name, context_window, max_tokens, prices, reasoning, vision in rows:
            models[model_id] = Model(
                id=model_id,
                name=name,
                api=settings["api"],
                provider=provider,
                base_url=settings["base_url"],
                reasoning=reasoning,
                input=["text", "image"] if vision else ["text"],
                cost=Cost(*prices),
                context_window=context_window,
                max_tokens=max_tokens,
                compat=copy.deepcopy(settings.get("compat")),
            )


_load_builtins()


def get_model(provider_or_ref: str, model_id: Optional[str] = None) -> Model:
    """A copy of the model ``"provider:model-id"`` (or ``provider``, ``model_id``).

    Raises :class:`ModelNotFoundError` naming the closest known models.
    """
    if model_id is None:
        provider, sep, model_id = provider_or_ref.partition(":")
        if not sep or not provider or not model_id:
            raise ModelNotFoundError(
                f"Invalid model reference {provider_or_ref!r}: use 'provider:model-id' (e.g. 'openai:gpt-4.1')"
            )
    else:
        provider = provider_or_ref
    with _lock:
        models = _catalogue.get(provider)
        if models is None:
            known = ", ".join(sorted(_catalogue))
            raise ModelNotFoundError(f"Unknown provider {provider!r}. Known providers: {known}")
        resolved = ALIASES.get(provider, {}).get(model_id, model_id)
        model = models.get(resolved)
        if model is not None:
            return copy.deepcopy(model)
        candidates = list(models) + list(ALIASES.get(provider, {}))
    close = difflib.get_close_matches(model_id, candidates, n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(provider + ':' + c for c in close)}?" if close else ""
    raise ModelNotFoundError(
        f"Unknown model {provider}:{model_id}.{hint} "
        f"Use custom_model({model_id!r}, base_url=..., provider={provider!r}) for a model not in the catalogue."
    )


def get_models(provider: str) -> list[Model]:
    """Copies of every model of ``provider`` (empty list for an unknown provider)."""
    with _lock:
        return [copy.deepcopy(m) for m in _catalogue.get(provider, {}).values()]


def get_providers() -> list[str]:
    """Every provider with at least one model, sorted."""
    with _lock:
        return sorted(p for p, models in _catalogue.items() if models)


def register_model(model: Model) -> Model:
    """Add ``model`` to the catalogue (replacing one with the same provider and id); returns it."""
    if not model.id or not model.provider:
        raise ValueError("register_model needs a model with an id and a provider")
    with _lock:
        _catalogue.setdefault(model.provider, {})[model.id] = copy.deepcopy(model)
    return model


def unregister_model(provider: str, model_id: str) -> None:
    """Remove a model from the catalogue (no-op if absent)."""
    with _lock:
        _catalogue.get(provider, {}).pop(model_id, None)


def custom_model(
    id: str,
    base_url: Optional[str] = None,
    api: str = "openai-completions",
    provider: str = "local",
    *,
    name: str = "",
    reasoning: bool = False,
    input: Sequence[str] = ("text",),
    context_window: int = 128000,
    max_tokens: int = 16384,
    cost: Optional[Cost] = None,
    headers: Optional[dict[str, str]] = None,
    compat: Optional[dict[str, Any]] = None,
    register: bool = True,
) -> Model:
    """Declare a model the catalogue lacks, e.g. one served by Ollama, vLLM or llama.cpp.

    ``base_url`` defaults to the local server's usual address when ``provider`` is one of
    :data:`LOCAL_SERVERS`. With ``register`` (the default) the model is also added to the
    catalogue, so ``"provider:id"`` strings find it.
    """
    if base_url is None:
        base_url = LOCAL_SERVERS.get(provider)
        if base_url is None:
            raise ValueError(f"custom_model({id!r}) needs a base_url for provider {provider!r}")
    model = Model(
        id=id,
        name=name or id,
        api=api,
        provider=provider,
        base_url=base_url.rstrip("/"),
        reasoning=reasoning,
        input=list(input),
        cost=cost or Cost(),
        context_window=context_window,
        max_tokens=max_tokens,
        headers=dict(headers) if headers else None,
        compat=dict(compat) if compat else None,
    )
    return register_model(model) if register else model
