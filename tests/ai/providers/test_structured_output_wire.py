"""Structured output over HTTP (docs/structured-output.md#providers): for each of the four APIs,
an agent with ``output_type`` against the loopback server: the exact field each request carries,
checked against the official SDK (its types accept the body and it sends the same one), and the
value assembled from the streamed answer; then a retry after invalid output, and tool mode."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Optional

import pytest

from piagent import Agent, AgentEvent
from piagent.ai import get_model
from piagent.ai.output import anthropic_schema, drop_absent_nulls, openai_strict_schema
from tests.ai.providers.openai_wire import chat_text, responses_text
from tests.ai.providers.test_agent_conversations import anthropic_text
from tests.ai.providers.test_anthropic_models import sdk_body as anthropic_sdk_body
from tests.ai.providers.test_google_models import camel, chunks, text_chunk
from tests.ai.providers.test_google_models import sdk_body as google_sdk_body
from tests.ai.providers.test_openai_models import sdk_chat, sdk_responses
from tests.support.scripted_server import ScriptedServer
from tests.test_structured_output import LineItem

KEY = "sk-test-structured-0123456789"


@dataclass
class Invoice:
    """An invoice read from a document."""

    number: str
    total: float
    lines: list[LineItem]
    note: Optional[str] = None


ANSWER = ['{"number": "A-17", "to', 'tal": 12.5, "lines": [{"name": "tea", "amo', 'unt": 12.5}], "note": null}']
EXPECTED = Invoice("A-17", 12.5, [LineItem("tea", 12.5)])
SCHEMA = {
    "type": "object",
    "description": "An invoice read from a document.",
    "properties": {
        "number": {"type": "string"},
        "total": {"type": "number"},
        "lines": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "amount": {"type": "number"}},
                "required": ["name", "amount"],
                "additionalProperties": False,
            },
        },
        "note": {"type": ["string", "null"], "default": None},
    },
    "required": ["number", "total", "lines"],
    "additionalProperties": False,
}
# Anthropic: a list of types becomes anyOf, annotations such as "default" are left out
ANTHROPIC_SCHEMA = {
    **SCHEMA,
    "properties": {**SCHEMA["properties"], "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
}
STRICT_SCHEMA = {
    "type": "object",
    "description": "An invoice read from a document.",
    "properties": {
        "number": {"type": "string"},
        "total": {"type": "number"},
        "lines": SCHEMA["properties"]["lines"],
        "note": {"type": ["string", "null"]},
    },
    "required": ["number", "total", "lines", "note"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def server():
    with ScriptedServer() as s:
        yield s


pytestmark = pytest.mark.usefixtures("fresh_warnings")


def agent_on(model: Any, **options: Any) -> tuple[Agent, list[Any]]:
    agent = Agent(model=model, get_api_key=lambda provider: KEY, output_type=Invoice, **options)
    partials: list[Any] = []

    def listener(event: AgentEvent) -> None:
        if event.type == "message_update" and event.partial_output is not None:
            partials.append(copy.deepcopy(event.partial_output))

    agent.subscribe(listener)
    return agent, partials


def run(agent: Agent, server: ScriptedServer, replies: list[list[bytes]]) -> tuple[Any, list[dict[str, Any]]]:
    before = len(server.requests)
    for reply in replies:
        server.reply(reply)
    result = agent.prompt("Read the invoice: A-17, tea 12.50.")
    return result, [r.json for r in server.requests[before:]]


def test_the_schema_agrees_with_what_the_tests_expect() -> None:
    from piagent.output import output_spec

    assert output_spec(Invoice).format.schema == SCHEMA


# --------------------------------------------------------------------------- the four APIs


def test_chat_completions_sends_a_strict_json_schema_response_format_and_assembles_the_value(server) -> None:
    model = get_model("openai", "gpt-5.4-mini")
    model.base_url, model.api = server.url + "/v1", "openai-completions"
    agent, partials = agent_on(model)
    result, (body,) = run(agent, server, [chat_text(*ANSWER)])
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "Invoice",
            "schema": STRICT_SCHEMA,
            "strict": True,
            "description": "An invoice read from a document.",
        },
    }
    assert result.output == EXPECTED and result.text == "".join(ANSWER)
    assert partials[0] == {"number": "A-17"} and partials[-1]["lines"] == [{"name": "tea", "amount": 12.5}]
    assert sdk_chat(server, body) == body


def test_responses_sends_text_format_json_schema_and_assembles_the_value(server) -> None:
    model = get_model("openai", "gpt-5.4-mini")
    model.base_url = server.url + "/v1"
    agent, _ = agent_on(model)
    result, (body,) = run(agent, server, [responses_text(*ANSWER)])
    assert body["text"] == {
        "format": {
            "type": "json_schema",
            "name": "Invoice",
            "schema": STRICT_SCHEMA,
            "strict": True,
            "description": "An invoice read from a document.",
        }
    }
    assert result.output == EXPECTED
    assert sdk_responses(server, body) == body


def test_anthropic_sends_output_config_format_merged_with_the_effort_and_assembles_the_value(server) -> None:
    model = get_model("anthropic", "claude-opus-4-8")
    model.base_url = server.url
    agent, partials = agent_on(model, thinking_level="high")
    stream = anthropic_text("".join(ANSWER))
    result, (body,) = run(agent, server, [stream])
    assert body["output_config"] == {
        "effort": "high",
        "format": {"type": "json_schema", "schema": ANTHROPIC_SCHEMA},
    }
    assert "tool_choice" not in body and "tools" not in body  # native: no final-answer tool
    assert result.output == EXPECTED and partials[-1]["number"] == "A-17"
    assert anthropic_sdk_body(server, body, {}) == body


def test_gemini_sends_response_json_schema_and_assembles_the_value(server) -> None:
    model = get_model("google", "gemini-3.5-flash")
    model.base_url = server.url + "/v1beta"
    agent, _ = agent_on(model)
    replies = [chunks(text_chunk(ANSWER[0], finish=None), text_chunk(ANSWER[1], finish=None), text_chunk(ANSWER[2]))]
    result, (body,) = run(agent, server, replies)
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert body["generationConfig"]["responseJsonSchema"] == SCHEMA
    assert result.output == EXPECTED
    assert google_sdk_body(server, "gemini-3.5-flash", body) == camel(body)


# --------------------------------------------------------------------------- retries and tool mode


def test_an_invalid_answer_over_http_is_sent_back_with_the_frame_and_the_retry_succeeds(server) -> None:
    model = get_model("openai", "gpt-5.4-mini")
    model.base_url, model.api = server.url + "/v1", "openai-completions"
    agent, _ = agent_on(model)
    result, (first, second) = run(agent, server, [chat_text('{"number": "A-17"}'), chat_text(*ANSWER)])
    assert result.output == EXPECTED
    assert second["response_format"] == first["response_format"]
    assert second["messages"][-2] == {"role": "assistant", "content": '{"number": "A-17"}'}
    feedback = second["messages"][-1]
    assert feedback["role"] == "user"
    assert feedback["content"].startswith(
        'Validation failed for output "Invoice":\n'
        "  - lines: 'lines' is a required property\n"
        "  - total: 'total' is a required property\n\n"
        'Received output:\n{"number": "A-17"}'
    )


def test_tool_mode_on_anthropic_forces_the_final_answer_tool(server) -> None:
    model = get_model("anthropic", "claude-sonnet-5")
    model.base_url = server.url
    agent, partials = agent_on(model, output_mode="tool")
    arguments = "".join(ANSWER)
    stream = [
        {"type": "tool_use", "id": "toolu_1", "name": "final_answer", "input": {}},
        *({"type": "input_json_delta", "partial_json": part} for part in ANSWER),
    ]
    from tests.ai.providers.test_agent_conversations import anthropic_reply

    result, (body,) = run(agent, server, [anthropic_reply([stream], "tool_use")])
    assert body["tool_choice"] == {"type": "tool", "name": "final_answer"}
    (output_tool,) = body["tools"]
    assert output_tool["name"] == "final_answer" and output_tool["input_schema"] == SCHEMA
    assert "format" not in body.get("output_config", {})
    assert result.output == EXPECTED and json.loads(arguments)["number"] == "A-17"
    assert partials[-1]["total"] == 12.5


@pytest.mark.parametrize("model_id", ["claude-fable-5-2", "claude-opus-5-5", "claude-sonnet-5-5"])
def test_tool_mode_falls_back_to_native_on_a_model_that_refuses_forced_tools(server, model_id) -> None:
    model = get_model("anthropic", model_id)  # forced tool use is a 400 on these
    model.base_url = server.url
    agent, _ = agent_on(model, output_mode="tool")
    result, (body,) = run(agent, server, [anthropic_text("".join(ANSWER))])
    assert body["output_config"]["format"]["type"] == "json_schema" and "tools" not in body
    assert result.output == EXPECTED


# --------------------------------------------------------------------------- schema rewriting


def test_openai_strict_mode_cannot_express_open_objects_or_untyped_values() -> None:
    assert openai_strict_schema({"type": "object", "additionalProperties": {"type": "integer"}}) is None
    assert openai_strict_schema({"type": "object", "properties": {"x": {}}, "required": ["x"]}) is None
    optional_enum = {"type": "object", "properties": {"c": {"type": "string", "enum": ["a", "b"]}}}
    assert openai_strict_schema(optional_enum) == {
        "type": "object",
        "properties": {"c": {"type": ["string", "null"], "enum": ["a", "b", None]}},
        "required": ["c"],
        "additionalProperties": False,
    }


def test_openai_strict_mode_closes_the_nested_models_of_a_pydantic_schema() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Line(pydantic.BaseModel):
        name: str
        amount: float = 0.0

    class Order(pydantic.BaseModel):
        lines: list[Line]

    strict = openai_strict_schema(Order.model_json_schema())
    assert strict is not None
    line = strict["$defs"]["Line"]
    assert line["additionalProperties"] is False and line["required"] == ["name", "amount"]
    assert line["properties"]["amount"] == {"type": ["number", "null"]}  # optional: nullable, default dropped
    assert strict["properties"]["lines"]["items"] == {"$ref": "#/$defs/Line"}


def test_anthropic_schema_moves_unconstrained_keywords_into_the_description() -> None:
    schema = {"type": "integer", "minimum": 1, "description": "Count."}
    assert anthropic_schema(schema) == {"type": "integer", "description": "Count.\n\n{minimum: 1}"}
    assert anthropic_schema({"type": "array", "items": {"type": "string"}, "uniqueItems": True, "minItems": 1}) == {
        "type": "array",
        "items": {"type": "string"},
        "minItems": 1,
        "description": "{uniqueItems: True}",
    }


def test_nulls_of_optional_properties_are_dropped_but_nullable_ones_kept() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": ["string", "null"]}, "c": {"type": "string"}},
        "required": ["c"],
    }
    assert drop_absent_nulls({"a": None, "b": None, "c": None}, schema) == {"b": None, "c": None}
