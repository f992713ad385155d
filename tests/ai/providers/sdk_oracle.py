"""The official SDKs as oracles: the request piagent builds must be one the SDK builds too.

For a body piagent sent to the loopback server, :func:`replay_with_sdk` passes each of its
fields by name to the SDK's own method (an unknown field raises ``TypeError`` there), points the
SDK at the same server and returns the body the SDK sent; :func:`check_types` validates the body
against the SDK's request ``TypedDict`` (Literal values such as effort levels included). The
SDKs are test-only dependencies (the ``test`` extra); tests skip where they are not installed.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import pytest

from tests.support.scripted_server import ScriptedServer


def replay_with_sdk(server: ScriptedServer, send: Callable[[], Any]) -> Any:
    """Run ``send()`` (an SDK call aimed at ``server``) and return the JSON body it sent."""
    before = len(server.requests)
    server.reply(b'{"error": {"type": "invalid_request_error", "message": "oracle"}}', status=400)
    try:
        result = send()
        for _ in result if hasattr(result, "__iter__") else ():
            pass
    except Exception:  # the 400 above: only the request matters
        pass
    assert len(server.requests) == before + 1, "the SDK sent no request"
    return server.requests[-1].json


def check_types(params_type: Any, body: dict[str, Any]) -> None:
    """Validate ``body`` against an SDK request TypedDict; fails the test naming the field."""
    pydantic = pytest.importorskip("pydantic")
    try:
        _adapter(params_type).validate_python(body)
    except pydantic.ValidationError as exc:
        pytest.fail(f"the SDK's {getattr(params_type, '__name__', params_type)} rejects the body: {exc.errors()[:3]}")


@functools.cache
def _adapter(params_type: Any) -> Any:
    """Building a TypeAdapter for an SDK's request type takes ~0.1 s: once per type."""
    import pydantic

    return pydantic.TypeAdapter(params_type)


@functools.cache
def openai_client(url: str, key: str) -> Any:
    """One ``openai.OpenAI`` per server (creating one takes a while)."""
    import openai

    return openai.OpenAI(api_key=key, base_url=url, max_retries=0)
