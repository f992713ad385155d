"""Which OpenAI-compatible server a model talks to, and the request form that server accepts.

The one place where piagent knows local servers apart (see ``docs/servers.md``). A server is
recognised by the model's provider name (``custom_model(..., provider="ollama")``,
``piagent --model ollama:llama3.2``) or, failing that, by its usual local port. Unknown
servers get the form the most servers accept. ``model.compat`` overrides everything here.
"""

from __future__ import annotations

from typing import Any, Optional
from urllib.parse import urlsplit

from ..types import Model
from ._common import is_local_url

__all__ = ["KNOWN_SERVERS", "UNKNOWN_SERVER", "detect_server", "server_compat"]

#: What each known server needs, by name. ``supports_null_content``: an assistant message
#: that only calls tools may carry ``content: null`` (else ``content: ""`` is sent).
KNOWN_SERVERS: dict[str, dict[str, Any]] = {
    # api.openai.com and vLLM follow OpenAI's schema, where null is the documented form.
    "openai": {"supports_null_content": True},
    "vllm": {"supports_null_content": True},
    # llama-cpp-python's server validates content as a string (HTTP 500 on null); llama.cpp's
    # llama-server, Ollama ("invalid message content type: <nil>") and LM Studio rejected
    # null in releases still in use. All of them accept "".
    "llama.cpp": {"supports_null_content": False},
    "ollama": {"supports_null_content": False},
    "lmstudio": {"supports_null_content": False},
}
#: An unknown server gets ``""``: every server above accepts it, null is refused by several.
UNKNOWN_SERVER: dict[str, Any] = {"supports_null_content": False}

_PROVIDER_NAMES = {
    "vllm": "vllm",
    "llama.cpp": "llama.cpp",
    "llamacpp": "llama.cpp",
    "llama-cpp": "llama.cpp",
    "ollama": "ollama",
    "lmstudio": "lmstudio",
    "lm-studio": "lmstudio",
}
#: The ports the servers listen on by default, for a model declared without a provider name.
_DEFAULT_PORTS = {11434: "ollama", 1234: "lmstudio", 8000: "vllm"}


def detect_server(model: Model) -> Optional[str]:
    """The :data:`KNOWN_SERVERS` name of the server behind ``model``, or None if unknown."""
    url = model.base_url.lower()
    if "api.openai.com" in url:
        return "openai"
    by_name = _PROVIDER_NAMES.get(model.provider.lower())
    if by_name:
        return by_name
    if not is_local_url(url):
        return None
    try:
        port = urlsplit(url).port
    except ValueError:
        return None
    return _DEFAULT_PORTS.get(port) if port is not None else None


def server_compat(model: Model) -> dict[str, Any]:
    """The compat defaults of the server behind ``model`` (before ``model.compat``)."""
    server = detect_server(model)
    return dict(KNOWN_SERVERS[server] if server else UNKNOWN_SERVER)
