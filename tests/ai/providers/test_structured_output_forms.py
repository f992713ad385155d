"""Which ``response_format`` a Chat Completions server gets for structured output, against a
real HTTP server on 127.0.0.1 (docs/servers.md#structured-output): OpenAI's json_schema form
by default, the llama.cpp family's ``{type: "json_object", schema}`` for that family, and, for
an unknown local server that refuses json_schema as llama-cpp-python's server does, one
fallback within the same call, remembered for that server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from piagent import Agent
from piagent.ai.models import custom_model
from piagent.ai.providers._servers import forget_learned_compat
from tests.ai.providers.openai_wire import chat_text

#: What llama-cpp-python's server (0.3) answers to ``response_format.type == "json_schema"``:
#: HTTP 500, its pydantic validation error as the message.
LLAMA_CPP_PYTHON_REFUSAL = json.dumps(
    {
        "error": {
            "message": "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n"
            "  Input should be 'text' or 'json_object' [type=literal_error, input_value='json_schema', "
            "input_type=str]",
            "type": "internal_server_error",
            "param": None,
            "code": None,
        }
    }
).encode()
ANSWER = '{"name": "Paris", "country": "France"}'


@dataclass
class City:
    name: str
    country: str


@pytest.fixture(autouse=True)
def _forget_learned_forms() -> Iterator[None]:
    yield
    forget_learned_compat()  # the next test's server may get this port


def refuse_json_schema(server, status: int = 500) -> None:
    """llama-cpp-python's refusal; a 500 comes for the request and each of its two retries."""
    for _ in range(3 if status == 500 else 1):
        server.reply(LLAMA_CPP_PYTHON_REFUSAL, status=status, headers={"Content-Type": "application/json"})


def formats(server) -> list:
    return [r.json.get("response_format") for r in server.requests]


def test_a_server_that_accepts_json_schema_gets_openais_form_once(server):
    server.reply(chat_text(ANSWER))
    model = custom_model("m", base_url=server.url + "/v1", register=False)
    result = Agent(model=model, output_retries=0).prompt("Paris?", output_type=City)
    assert result.output == City("Paris", "France")
    [sent] = formats(server)
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] and sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["schema"]["required"] == ["name", "country"]


def test_an_unknown_local_server_refusing_json_schema_gets_json_object_in_the_same_call(server):
    refuse_json_schema(server)
    server.reply(chat_text(ANSWER))
    server.reply(chat_text(ANSWER))
    model = custom_model("m", base_url=server.url + "/v1", register=False)
    agent = Agent(model=model, output_retries=0)
    first = agent.prompt("Paris?", output_type=City)
    assert first.stop_reason == "stop", first.error_message
    assert first.output == City("Paris", "France")
    refused, *_, fallback = formats(server)
    assert refused["type"] == "json_schema"
    assert fallback == {"type": "json_object", "schema": server.requests[-1].json["response_format"]["schema"]}
    assert fallback["schema"]["properties"].keys() == {"name", "country"}
    assert len(server.requests) == 4  # three refused (the request and its retries), one answered

    second = Agent(model=model, output_retries=0).prompt("Paris again?", output_type=City)  # remembered
    assert second.output == City("Paris", "France")
    assert len(server.requests) == 5 and formats(server)[-1]["type"] == "json_object"


def test_the_llama_cpp_family_gets_json_object_with_the_schema_directly(server):
    server.reply(chat_text(ANSWER))
    model = custom_model("m", base_url=server.url + "/v1", provider="llama.cpp", register=False)
    result = Agent(model=model, output_retries=0).prompt("Paris?", output_type=City)
    assert result.output == City("Paris", "France")
    [sent] = formats(server)
    assert sent["type"] == "json_object" and sent["schema"]["required"] == ["name", "country"]


@pytest.mark.parametrize("provider", ["vllm", "ollama", "lmstudio"])
def test_a_known_server_that_accepts_json_schema_gets_no_fallback(server, provider):
    refuse_json_schema(server, status=400)
    model = custom_model("m", base_url=server.url + "/v1", provider=provider, register=False)
    result = Agent(model=model, output_retries=0).prompt("Paris?", output_type=City)
    assert result.stop_reason == "error" and "Input should be 'text' or 'json_object'" in (result.error_message or "")
    assert {f["type"] for f in formats(server)} == {"json_schema"}


def test_a_declared_form_gets_no_fallback(server):
    refuse_json_schema(server, status=400)
    model = custom_model(
        "m", base_url=server.url + "/v1", compat={"structured_output_form": "json_schema"}, register=False
    )
    result = Agent(model=model, output_retries=0).prompt("Paris?", output_type=City)
    assert result.stop_reason == "error"
    assert len(server.requests) == 1


def test_an_error_that_does_not_name_response_format_is_not_retried_in_another_form(server):
    server.reply(
        b'{"error": {"message": "model not loaded"}}', status=400, headers={"Content-Type": "application/json"}
    )
    model = custom_model("m", base_url=server.url + "/v1", register=False)
    result = Agent(model=model, output_retries=0).prompt("Paris?", output_type=City)
    assert result.stop_reason == "error" and "model not loaded" in (result.error_message or "")
    assert len(server.requests) == 1
