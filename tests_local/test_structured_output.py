"""Structured output on the embedded model (SmolLM2-135M): the grammar built from the output's
schema means even a 135M model can only produce a valid value (docs/structured-output.md)."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass

from typing_extensions import Literal

from piagent import Agent


@dataclass
class City:
    """A city and the country it is in."""

    name: str
    country: str
    capital: bool


def test_the_embedded_model_answers_with_a_valid_dataclass_under_a_grammar(local_model, capsys):
    agent = Agent(model=local_model, max_tokens=120, output_retries=0)  # no retry: the first answer must be valid
    partials: list = []
    agent.subscribe(lambda e: partials.append(copy.deepcopy(e.partial_output)) if e.type == "message_update" else None)
    result = agent.prompt("Paris is the capital of France. Describe Paris.", output_type=City)
    assert result.stop_reason == "stop", result.error_message
    city = result.output
    assert isinstance(city, City)
    assert isinstance(city.name, str) and isinstance(city.country, str) and isinstance(city.capital, bool)
    assert json.loads(result.text) == result.structured.data  # the text is the JSON, nothing around it
    assert [p for p in partials if p][-1] == result.structured.data  # the partial output grew into it
    with capsys.disabled():
        print(f"\nembedded model's structured answer: {result.text!r} -> {city!r}")


def test_the_embedded_model_answers_a_literal_in_tool_mode(local_model):
    agent = Agent(model=local_model, max_tokens=60, output_retries=0, output_mode="tool")
    result = agent.prompt("Is Paris in France? Answer yes or no.", output_type=Literal["yes", "no"])
    assert result.output in ("yes", "no")
    assert [m.role for m in result.messages] == ["user", "assistant", "toolResult"]


def test_llama_cpp_pythons_server_answers_a_valid_value_with_the_default_settings(served_model):
    """Declared as a user would (no provider name, no compat): the server refuses OpenAI's
    json_schema form (HTTP 500 naming ``response_format``), piagent falls back within the same
    call to ``{type: "json_object", schema}``, which the server constrains with a grammar, and
    keeps that form for the server (docs/servers.md#structured-output)."""
    agent = Agent(model=served_model, output_retries=0)  # no retry: the first answer must be valid
    first = agent.prompt("Is Paris in France?", output_type=Answer)
    assert first.stop_reason == "stop", first.error_message
    assert isinstance(first.output, Answer) and first.output.answer in ("yes", "no")
    assert json.loads(first.text) == first.structured.data
    second = Agent(model=served_model, output_retries=0).prompt("Describe Paris.", output_type=City)
    assert second.stop_reason == "stop", second.error_message
    assert isinstance(second.output, City) and isinstance(second.output.capital, bool)


def test_llama_cpp_pythons_server_answers_in_tool_mode(served_model):
    result = Agent(model=served_model, output_retries=0, output_mode="tool").prompt(
        "Is Paris in France?", output_type=Answer
    )
    assert result.stop_reason == "toolUse", result.error_message
    assert isinstance(result.output, Answer) and result.output.answer in ("yes", "no")


@dataclass
class Answer:
    answer: Literal["yes", "no"]
