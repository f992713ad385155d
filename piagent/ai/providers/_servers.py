"""Which OpenAI-compatible server a model talks to, and the request form that server accepts.

The one place where piagent knows local servers apart (see ``docs/servers.md``). A server is
recognised by the model's provider name (``custom_model(..., provider="ollama")``,
``piagent --model ollama:llama3.2``) or, failing that, by its usual local port. Unknown
servers get the form the most servers accept; what an unknown local server is seen to refuse
is remembered per ``base_url`` (:func:`learn_compat`). ``model.compat`` overrides everything here.
"""

from __future__ import annotations

import threading
from typing import Any, Optional
from urllib.parse import urlsplit

from ...exceptions import HttpStatusError
from ..types import Model
from ._common import is_local_url

__all__ = [
    "KNOWN_SERVERS",
    "UNKNOWN_SERVER",
    "detect_server",
    "forget_learned_compat",
    "is_streamed_auto_tool_choice",
    "learn_compat",
    "may_fail_streams_silently",
    "refuses_json_schema_output",
    "refuses_streamed_tool_choice",
    "server_compat",
]

#: What each known server needs, by name (docs/servers.md).
#: ``supports_null_content``: an assistant message that only calls tools may carry
#: ``content: null`` (else ``content: ""`` is sent).
#: ``structured_output_form``: how ``response_format`` asks for a schema: ``"json_schema"``
#: (OpenAI's ``{type: "json_schema", json_schema: {name, schema, strict}}``) or
#: ``"json_object"`` (the llama.cpp family's ``{type: "json_object", schema}``).
#: ``streams_tool_choice_auto``: a request offering tools with ``tool_choice: "auto"`` may be
#: streamed (else it goes out with ``stream: false``, its answer turned into the same events).
KNOWN_SERVERS: dict[str, dict[str, Any]] = {
    # api.openai.com and vLLM follow OpenAI's schema, where null is the documented form.
    "openai": {
        "supports_null_content": True,
        "structured_output_form": "json_schema",
        "streams_tool_choice_auto": True,
    },
    "vllm": {
        "supports_null_content": True,
        "structured_output_form": "json_schema",
        "streams_tool_choice_auto": True,
    },
    # llama-cpp-python's server validates content as a string (HTTP 500 on null); llama.cpp's
    # llama-server, Ollama ("invalid message content type: <nil>") and LM Studio rejected
    # null in releases still in use. All of them accept "".
    # llama-cpp-python's server accepts only "text"/"json_object" (with an optional schema
    # turned into a grammar); llama-server accepts that form as well as json_schema.
    # llama-server streams an automatic tool choice; llama-cpp-python's chatml-function-calling
    # answers it with an empty HTTP 200 stream ("Automatic streaming tool choice is not
    # supported"), which tells the two apart: see refuses_streamed_tool_choice.
    "llama.cpp": {
        "supports_null_content": False,
        "structured_output_form": "json_object",
        "streams_tool_choice_auto": True,
    },
    # Ollama (0.5+) and LM Studio constrain json_schema; LM Studio refuses json_object.
    "ollama": {
        "supports_null_content": False,
        "structured_output_form": "json_schema",
        "streams_tool_choice_auto": True,
    },
    "lmstudio": {
        "supports_null_content": False,
        "structured_output_form": "json_schema",
        "streams_tool_choice_auto": True,
    },
}
#: An unknown server gets ``""``: every server above accepts it, null is refused by several;
#: and OpenAI's json_schema form, which all but llama-cpp-python's server accept (that one is
#: recognised by its refusal, see :func:`refuses_json_schema_output`); streamed tool calls, which
#: all but llama-cpp-python's server stream (see :func:`refuses_streamed_tool_choice`).
UNKNOWN_SERVER: dict[str, Any] = {
    "supports_null_content": False,
    "structured_output_form": "json_schema",
    "streams_tool_choice_auto": True,
}

#: Compat values learned from an unknown local server's refusals, by ``base_url``. Bounded:
#: one entry per server a process talks to; cleared by :func:`forget_learned_compat`.
_learned: dict[str, dict[str, Any]] = {}
_learned_lock = threading.Lock()

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
    """The compat defaults of the server behind ``model`` (before ``model.compat``): the known
    server's, else the unknown server's, with what was learned from this ``base_url``."""
    server = detect_server(model)
    defaults = KNOWN_SERVERS[server] if server else UNKNOWN_SERVER
    with _learned_lock:
        return {**defaults, **_learned.get(model.base_url, {})}


def learn_compat(model: Model, key: str, value: Any) -> None:
    """Remember ``key=value`` for every later request to ``model.base_url`` in this process."""
    with _learned_lock:
        _learned.setdefault(model.base_url, {})[key] = value


def forget_learned_compat() -> None:
    """Forget every learned compat value (tests; a server replaced on the same URL)."""
    with _learned_lock:
        _learned.clear()


def _may_learn(model: Model, compat: dict[str, Any], key: str, default: Any) -> bool:
    """True when ``key`` still has the unknown server's ``default`` and may be learned: the
    server is unknown and on this machine, and ``model.compat`` does not set ``key``."""
    return (
        compat.get(key) == default
        and key not in (model.compat or {})
        and detect_server(model) is None
        and is_local_url(model.base_url)
    )


def refuses_json_schema_output(model: Model, compat: dict[str, Any], error: BaseException) -> bool:
    """True when ``error`` is an unknown local server refusing the ``json_schema`` form of
    ``response_format`` that piagent chose by default: an HTTP 4xx/5xx whose text names
    ``response_format`` (llama-cpp-python's server: HTTP 500, "Input should be 'text' or
    'json_object'"). The caller then retries once with the ``json_object`` form."""
    return (
        isinstance(error, HttpStatusError)
        and 400 <= error.status < 600
        and "response_format" in error.message
        and _may_learn(model, compat, "structured_output_form", "json_schema")
    )


def is_streamed_auto_tool_choice(payload: dict[str, Any]) -> bool:
    """True for a streamed ``payload`` offering tools with ``tool_choice: "auto"``: the request
    llama-cpp-python's ``chatml-function-calling`` answers with an empty HTTP 200 stream
    ("Automatic streaming tool choice is not supported")."""
    return bool(payload.get("tools")) and payload.get("tool_choice") == "auto" and payload.get("stream") is True


def may_fail_streams_silently(model: Model) -> bool:
    """True when the server behind ``model`` may be llama-cpp-python's, which answers a streamed
    request it fails before the first chunk (an automatic tool choice it cannot stream, a prompt
    over its context window) with HTTP 200 and an empty stream: a server of the llama.cpp family
    wherever it runs, or an unknown server on this machine. The caller sends such a request once
    more unstreamed, whose answer or error says what happened."""
    server = detect_server(model)
    return server == "llama.cpp" or (server is None and is_local_url(model.base_url))


def refuses_streamed_tool_choice(model: Model, compat: dict[str, Any], payload: dict[str, Any]) -> bool:
    """True when an unknown local server, or one of the llama.cpp family wherever it runs (whose
    two servers differ here), answered such a ``payload`` (above) with a stream holding no event
    at all, and may be taught otherwise: the request, sent once more unstreamed
    (:func:`may_fail_streams_silently`), was answered, so ``streams_tool_choice_auto=False`` is learned."""
    key = "streams_tool_choice_auto"
    return is_streamed_auto_tool_choice(payload) and (
        _may_learn(model, compat, key, True)
        or (detect_server(model) == "llama.cpp" and compat.get(key) is True and key not in (model.compat or {}))
    )
