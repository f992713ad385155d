"""A pydantic model as ``output_type``: the answer reaches ``model_validate`` as the model gave
it wherever the model's schema accepts it as it is (docs/structured-output.md#validation-and-retries).

pydantic writes ``Optional[X]`` and ``Union[X, Y]`` as ``anyOf``; coercion must not turn a
``null`` into ``""``, ``0`` or ``False``, nor ``42`` into ``"42"``, when an alternative already
accepts the value. Each path is driven through an ``Agent`` on the ``openai-completions``
provider against a real HTTP server on 127.0.0.1; the expected output is what pydantic itself
makes of the same answer (``model_validate_json``).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Optional, Union

import pytest
from typing_extensions import Literal

from piagent import Agent
from piagent.ai import custom_model
from tests.ai.providers.openai_wire import chat_stream, chat_text, chunk, tool_delta
from tests.support.scripted_server import ScriptedServer

pydantic = pytest.importorskip("pydantic")


class Note(pydantic.BaseModel):
    text: Optional[str] = None


class RequiredNote(pydantic.BaseModel):
    text: Optional[str]


class Counts(pydantic.BaseModel):
    count: Optional[int] = None
    ratio: Optional[float] = None
    flag: Optional[bool] = None


class IntOrText(pydantic.BaseModel):
    value: Union[int, str]


class TextOrInt(pydantic.BaseModel):
    value: Union[str, int]


class Lists(pydantic.BaseModel):
    items: list[Optional[str]]
    scores: dict[str, Optional[int]]


class Address(pydantic.BaseModel):
    city: str
    street: Optional[str] = None


class Person(pydantic.BaseModel):
    name: str
    address: Optional[Address] = None
    home: Address
    size: Optional[Literal["s", "m", "l"]] = None
    born: Optional[datetime.date] = None


CASES = [
    (Note, {"text": None}),
    (Note, {}),
    (Note, {"text": "hi"}),
    (RequiredNote, {"text": None}),
    (Counts, {"count": None, "ratio": None, "flag": None}),
    (Counts, {"count": "3", "ratio": "0.5", "flag": "true"}),  # wrong types are still coerced
    (IntOrText, {"value": "42"}),
    (IntOrText, {"value": 42}),
    (TextOrInt, {"value": 42}),
    (TextOrInt, {"value": "42"}),
    (Lists, {"items": [None, "a"], "scores": {"a": None, "b": 2}}),
    (Person, {"name": "Ann", "address": None, "home": {"city": "Oslo", "street": None}, "size": None, "born": None}),
    (Person, {"name": "Ann", "home": {"city": "Oslo"}, "size": "m", "born": "2000-01-02"}),
]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


@pytest.mark.parametrize("output_type, answer", CASES, ids=[f"{t.__name__}-{json.dumps(a)}" for t, a in CASES])
def test_a_pydantic_output_is_what_pydantic_makes_of_the_answer(server, output_type, answer) -> None:
    server.reply(chat_text(json.dumps(answer)))
    model = custom_model("m", base_url=server.url + "/v1", register=False)
    result = Agent(model=model, output_retries=0).prompt("Answer.", output_type=output_type)
    assert result.stop_reason == "stop", result.error_message
    expected = output_type.model_validate_json(json.dumps(answer))
    assert result.output == expected
    assert result.output.model_dump() == expected.model_dump()  # no None became "", 0 or False


@pytest.mark.parametrize(
    "output_type, answer", [(Counts, {"count": None, "ratio": None, "flag": None}), (TextOrInt, {"value": 42})]
)
def test_a_pydantic_output_given_through_the_output_tool_is_read_alike(server, output_type, answer) -> None:
    """Tool mode: the answer arrives as the arguments of the forced ``final_answer`` call."""
    call = tool_delta(0, "call_1", "final_answer", json.dumps(answer))
    server.reply(chat_stream(call, chunk({}, "tool_calls")))
    model = custom_model("m", base_url=server.url + "/v1", register=False)
    result = Agent(model=model, output_mode="tool", output_retries=0).prompt("Answer.", output_type=output_type)
    assert server.requests[0].json["tool_choice"] == {"type": "function", "function": {"name": "final_answer"}}
    assert result.output == output_type.model_validate_json(json.dumps(answer))


@dataclass
class DataclassNote:
    text: Optional[str] = None


def test_a_dataclass_and_a_pydantic_model_read_null_alike(server) -> None:
    model = custom_model("m", base_url=server.url + "/v1", register=False)
    outputs: list[Any] = []
    for output_type in (DataclassNote, Note):
        server.reply(chat_text('{"text": null}'))
        outputs.append(Agent(model=model, output_retries=0).prompt("Answer.", output_type=output_type).output)
    assert [o.text for o in outputs] == [None, None]
