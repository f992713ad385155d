"""Structured output through the Agent on the faux provider (docs/structured-output.md,
docs/loop.md#rule-29): asking, validating, converting, retrying, tools first, tool mode,
streaming the partial output, and the typed ``RunResult.output``."""

from __future__ import annotations

import copy
import enum
import json
import pickle
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Optional, Union

import pytest
from typing_extensions import Literal, TypedDict

from piagent import Agent, AgentEvent, OutputError, tool
from piagent._output_turns import MAX_QUOTED_CHARS
from piagent.ai import OutputFormat
from piagent.ai.json_stream import parse_streaming_json
from piagent.testing import FauxProvider, faux_message, faux_text, faux_tool_call


@dataclass
class LineItem:
    name: str
    amount: float


@dataclass
class Invoice:
    """An invoice read from a document."""

    number: str
    total: float
    paid: bool = False
    lines: Optional[list[LineItem]] = None


class Verdict(TypedDict):
    ok: bool
    reason: str


class Colour(enum.Enum):
    RED = "red"
    GREEN = "green"


INVOICE = {"number": "A-17", "total": 12.5, "lines": [{"name": "tea", "amount": 12.5}]}


def output_events(agent: Agent) -> list[Any]:
    seen: list[Any] = []

    def listener(event: AgentEvent) -> None:
        if event.type == "message_update" and event.partial_output is not None:
            seen.append(copy.deepcopy(event.partial_output))  # the live value: copied to keep it

    agent.subscribe(listener)
    return seen


# --------------------------------------------------------------------------- native mode


def test_a_dataclass_output_is_asked_for_natively_validated_and_converted(faux: FauxProvider) -> None:
    faux.set_responses([faux_message(json.dumps({**INVOICE, "total": "12.5"}))])  # "12.5": coerced like tool args
    agent = Agent(model=faux.get_model(), output_type=Invoice)
    result = agent.prompt("Read the invoice.")
    assert result.output == Invoice("A-17", 12.5, False, [LineItem("tea", 12.5)])
    assert result.structured is not None and result.structured.data["total"] == 12.5
    asked = faux.state.requests[0].options.output_format
    assert isinstance(asked, OutputFormat)
    assert asked.name == "Invoice" and asked.description == "An invoice read from a document."
    assert asked.schema["required"] == ["number", "total"] and asked.schema["additionalProperties"] is False
    assert faux.state.requests[0].options.tool_choice is None  # nothing forced in native mode


@pytest.mark.parametrize(
    ("output_type", "answer", "expected"),
    [
        (Verdict, {"ok": True, "reason": "fine"}, {"ok": True, "reason": "fine"}),
        (Literal["yes", "no"], {"value": "no"}, "no"),
        (Colour, {"value": "green"}, Colour.GREEN),
        (list[LineItem], {"value": [{"name": "a", "amount": 1}]}, [LineItem("a", 1.0)]),
        (Optional[int], {"value": None}, None),
        (Union[int, str], {"value": "x"}, "x"),
        (dict[str, int], {"a": 1}, {"a": 1}),  # an object already: not wrapped
        (float, {"value": 2}, 2.0),
        (bool, {"value": True}, True),
    ],
)
def test_every_hint_a_tool_parameter_accepts_is_an_output_type(
    faux: FauxProvider, output_type: Any, answer: Any, expected: Any
) -> None:
    faux.set_responses([faux_message(json.dumps(answer))])
    result = Agent(model=faux.get_model()).prompt("?", output_type=output_type)
    assert result.output == expected
    assert type(result.output) is type(expected)
    schema = faux.state.requests[0].options.output_format.schema
    assert schema["type"] == "object"  # a non-object type is asked for as {"value": ...}


def test_a_json_schema_dict_is_an_output_type_whose_output_is_the_validated_json(faux: FauxProvider) -> None:
    schema = {"title": "city", "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    faux.set_responses([faux_message('{"name": "Paris"}')])
    result = Agent(model=faux.get_model(), output_type=schema).prompt("?")
    assert result.output == {"name": "Paris"}
    assert faux.state.requests[0].options.output_format.name == "city"


def test_an_answer_in_a_json_code_fence_is_read(faux: FauxProvider) -> None:
    faux.set_responses([faux_message('```json\n{"ok": false, "reason": "late"}\n```')])
    assert Agent(model=faux.get_model(), output_type=Verdict).prompt("?").output == {"ok": False, "reason": "late"}


def test_a_null_for_an_optional_field_as_strict_mode_sends_it_keeps_the_default(faux: FauxProvider) -> None:
    faux.set_responses([faux_message('{"number": "A", "total": 1, "paid": null, "lines": null}')])
    assert Agent(model=faux.get_model(), output_type=Invoice).prompt("?").output == Invoice("A", 1.0)


def test_a_run_without_output_type_has_no_output_and_asks_for_none(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("hello")])
    result = Agent(model=faux.get_model()).prompt("hi")
    assert result.output is None and result.structured is None
    assert faux.state.requests[0].options.output_format is None


def test_prompt_output_type_replaces_the_agents_for_that_run_only(faux: FauxProvider) -> None:
    faux.set_responses([faux_message('{"value": "yes"}'), faux_message(json.dumps(INVOICE))])
    agent = Agent(model=faux.get_model(), output_type=Invoice)
    assert agent.prompt("?", output_type=Literal["yes", "no"]).output == "yes"
    assert isinstance(agent.prompt("?").output, Invoice)


# --------------------------------------------------------------------------- validation and retries


def test_an_invalid_output_is_answered_with_the_validation_frame_and_the_model_retries(faux: FauxProvider) -> None:
    faux.set_responses(
        [faux_message("Sure! Here it is."), faux_message('{"number": [17]}'), faux_message(json.dumps(INVOICE))]
    )
    agent = Agent(model=faux.get_model(), output_type=Invoice)
    result = agent.prompt("Read the invoice.")
    assert isinstance(result.output, Invoice)
    assert [m.role for m in result.messages] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    not_json, wrong_shape = result.messages[2].content[0].text, result.messages[4].content[0].text
    assert not_json.startswith('Validation failed for output "Invoice":\n  - root: the answer is not JSON')
    assert "Received output:\nSure! Here it is." in not_json
    assert wrong_shape.startswith('Validation failed for output "Invoice":\n  - number: [17] is not of type')
    assert "  - total: 'total' is a required property" in wrong_shape
    assert '\n\nReceived output:\n{"number": [17]}\n\nAnswer again' in wrong_shape  # the raw text
    assert len(faux.state.requests) == 3
    assert faux.state.requests[2].context.messages[-1].content[0].text == wrong_shape  # what the model saw


def test_retries_are_bounded_then_the_run_ends_with_an_error_keeping_the_raw_text(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("no JSON here"), faux_message('{"number": "A"}'), faux_message("unused")])
    agent = Agent(model=faux.get_model(), output_type=Invoice, output_retries=1)
    result = agent.prompt("?")
    assert result.stop_reason == "error" and result.text == '{"number": "A"}'
    assert result.error_message is not None
    assert result.error_message.startswith('No valid output after 2 answers. Validation failed for output "Invoice"')
    assert 'Received output:\n{"number": "A"}' in result.error_message
    assert faux.get_pending_response_count() == 1  # no third call
    with pytest.raises(OutputError) as info:
        _ = result.output
    assert info.value.raw_text == '{"number": "A"}' and "No valid output after 2 answers" in str(info.value)
    assert agent.state.error_message == result.error_message


def test_zero_retries_fail_at_the_first_invalid_output(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("[]")])
    result = Agent(model=faux.get_model(), output_type=Invoice, output_retries=0).prompt("?")
    assert result.stop_reason == "error" and "[] is not of type 'object'" in (result.error_message or "")


def test_a_run_that_ends_before_its_output_raises_on_output(faux: FauxProvider) -> None:
    @tool
    def lookup(number: str) -> str:
        return "12.5"

    faux.set_responses([faux_message([faux_tool_call("lookup", {"number": "A"})])])
    result = Agent(model=faux.get_model(), tools=[lookup], output_type=Invoice, max_turns=1).prompt("?")
    with pytest.raises(OutputError, match="before the output was given"):
        _ = result.output


def test_an_output_type_with_no_json_form_is_refused_when_set(faux: FauxProvider) -> None:
    with pytest.raises(TypeError, match="output_type"):
        Agent(output_type=tuple[int, str])
    agent = Agent(model=faux.get_model())
    with pytest.raises(ValueError, match="output_retries"):
        agent.output_retries = -1
    with pytest.raises(ValueError, match="output_mode"):
        agent.output_mode = "grammar"  # type: ignore[assignment]  # the point: a value outside the Literal
    with pytest.raises(TypeError, match="output_type"):
        agent.prompt("?", output_type=tuple[int, str])
    with pytest.raises(ValueError, match="output_type is not a valid JSON Schema: 'strange' is not valid"):
        agent.output_type = {"type": "strange"}
    assert not agent.state.is_streaming and faux.state.call_count == 0


def test_pydantic_models_are_output_types_when_pydantic_is_installed(faux: FauxProvider) -> None:
    pydantic = pytest.importorskip("pydantic")

    class City(pydantic.BaseModel):
        name: str
        population: int = pydantic.Field(ge=0)

    faux.set_responses(
        [faux_message('{"name": "Paris", "population": -1}'), faux_message('{"name": "Paris", "population": 2}')]
    )
    result = Agent(model=faux.get_model()).prompt("?", output_type=City)
    assert result.output == City(name="Paris", population=2)
    assert faux.state.requests[0].options.output_format.schema["properties"]["population"]["minimum"] == 0
    assert "population: -1 is less than the minimum of 0" in result.messages[2].content[0].text


# --------------------------------------------------------------------------- tools, then the output


def test_tools_run_first_and_the_output_ends_the_run(faux: FauxProvider) -> None:
    @tool
    def lookup(number: str) -> str:
        return "total 12.5"

    faux.set_responses(
        [
            faux_message([faux_text("Looking it up."), faux_tool_call("lookup", {"number": "A-17"})]),
            faux_message(json.dumps(INVOICE)),
        ]
    )
    agent = Agent(model=faux.get_model(), tools=[lookup], output_type=Invoice)
    agent.follow_up("a follow-up stays queued for the next run")
    result = agent.prompt("Read invoice A-17.")
    assert [m.role for m in result.messages] == ["user", "assistant", "toolResult", "assistant"]
    assert result.output.total == 12.5
    assert agent.has_queued_messages()  # the output ended the run: no follow-up poll


# --------------------------------------------------------------------------- tool mode


def test_tool_mode_forces_the_final_answer_tool_and_takes_its_arguments(faux: FauxProvider) -> None:
    faux.set_responses([faux_message([faux_tool_call("final_answer", INVOICE)])])
    agent = Agent(model=faux.get_model(), output_type=Invoice, output_mode="tool")
    result = agent.prompt("?")
    assert result.output == Invoice("A-17", 12.5, False, [LineItem("tea", 12.5)])
    request = faux.state.requests[0]
    assert request.options.output_format is None
    assert request.options.tool_choice == {"name": "final_answer"}
    (output_tool,) = request.context.tools
    assert output_tool.name == "final_answer" and output_tool.parameters["required"] == ["number", "total"]
    assert [m.role for m in result.messages] == ["user", "assistant", "toolResult"]
    assert result.messages[2].content[0].text == "Final answer received." and not result.messages[2].is_error


def test_tool_mode_with_tools_requires_a_call_and_reports_invalid_arguments_as_a_tool_error(
    faux: FauxProvider,
) -> None:
    @tool
    def lookup(number: str) -> str:
        return "total 12.5"

    faux.set_responses(
        [
            faux_message([faux_tool_call("lookup", {"number": "A"}), faux_tool_call("final_answer", {"number": "A"})]),
            faux_message("It is 12.5."),
            faux_message([faux_tool_call("final_answer", {"number": "A", "total": 12.5})]),
        ]
    )
    agent = Agent(model=faux.get_model(), tools=[lookup], output_type=Invoice, output_mode="tool")
    result = agent.prompt("?")
    assert result.output == Invoice("A", 12.5)
    assert faux.state.requests[0].options.tool_choice == "required"
    roles = [m.role for m in result.messages]
    assert roles == ["user", "assistant", "toolResult", "toolResult", "assistant", "user", "assistant", "toolResult"]
    rejected = result.messages[2]
    assert rejected.is_error and rejected.tool_name == "final_answer"
    assert rejected.content[0].text.startswith('Validation failed for output "Invoice":\n  - total:')
    assert result.messages[3].content[0].text == "total 12.5"  # the other call ran
    assert "answer by calling the final_answer tool" in result.messages[5].content[0].text


def test_a_server_without_structured_output_gets_the_tool_mode(faux: FauxProvider) -> None:
    model = faux.get_model()
    model.compat = {"supports_structured_output": False}
    faux.set_responses([faux_message([faux_tool_call("final_answer", {"value": "no"})])])
    result = Agent(model=model).prompt("?", output_type=Literal["yes", "no"])
    assert result.output == "no"
    assert faux.state.requests[0].options.tool_choice == {"name": "final_answer"}


def test_a_tool_named_like_the_output_tool_fails_the_run_with_a_clear_message(faux: FauxProvider) -> None:
    @tool
    def final_answer(text: str) -> str:
        return text

    result = Agent(model=faux.get_model(), tools=[final_answer], output_type=Invoice).prompt("?")
    assert result.stop_reason == "error" and "final_answer" in (result.error_message or "")


# --------------------------------------------------------------------------- streaming


def test_listeners_see_the_partial_output_parsed_as_it_streams(faux: FauxProvider) -> None:
    faux.set_responses([faux_message(json.dumps(INVOICE))])
    agent = Agent(model=faux.get_model(), output_type=Invoice)
    seen = output_events(agent)
    result = agent.prompt("?")
    assert len(seen) > 3 and seen[-1] == INVOICE
    assert all(isinstance(value, dict) for value in seen)
    assert seen[0] != seen[-1] and seen[0].keys() <= INVOICE.keys()
    assert result.structured is not None and result.structured.data == INVOICE


def test_a_partial_output_read_after_the_run_is_the_output_as_of_its_update(faux: FauxProvider) -> None:
    # partial_output is parsed when first read: updates kept and read later, in order, each
    # give the answer's text as of that update, parsed
    faux.set_responses([faux_message(json.dumps(INVOICE))])
    agent = Agent(model=faux.get_model(), output_type=Invoice)
    kept: list[Any] = []
    agent.subscribe(lambda event: kept.append(event) if event.type == "message_update" else None)
    agent.prompt("?")
    text, expected, later = "", [], []
    for event in kept:
        if event.assistant_message_event.type == "text_delta":
            text += event.assistant_message_event.delta
            expected.append(parse_streaming_json(text))
            later.append(copy.deepcopy(event.partial_output))
    assert len(later) > 3 and later == expected and later[-1] == INVOICE


def test_an_update_with_a_partial_output_is_pickled_and_replaced_like_any_event(faux: FauxProvider) -> None:
    # a listener may send its events to another process (pickled, as a multiprocessing queue
    # does) or keep a changed copy: each gives the output as of its update
    faux.set_responses([faux_message(json.dumps(INVOICE))])
    agent = Agent(model=faux.get_model(), output_type=Invoice)
    text, expected, sent, replaced = "", [], [], []

    def listener(event: AgentEvent) -> None:
        nonlocal text
        if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
            text += event.assistant_message_event.delta
            expected.append(parse_streaming_json(text))
            sent.append(pickle.loads(pickle.dumps(event)).partial_output)
            replaced.append(copy.deepcopy(replace(event).partial_output))

    agent.subscribe(listener)
    agent.prompt("?")
    assert len(sent) > 3 and sent == expected and replaced == expected and sent[-1] == INVOICE


def test_updates_read_by_threads_at_once_parse_the_answer_once(faux: FauxProvider) -> None:
    # the updates share one parser: threads reading them together must not feed it the same
    # deltas twice (a short switch interval makes the threads interleave within the reads)
    items = [{"name": f"item {i}", "amount": i} for i in range(300)]
    faux.set_responses([faux_message(json.dumps({"value": items}))])
    agent = Agent(model=faux.get_model(), output_type=list[dict[str, Any]])
    kept: list[Any] = []
    agent.subscribe(lambda event: kept.append(event) if event.type == "message_update" else None)
    agent.prompt("?")
    readers = 4
    start = threading.Barrier(readers)

    def read_all() -> Any:
        start.wait()
        return [value for value in (event.partial_output for event in kept) if value is not None][-1]

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with ThreadPoolExecutor(readers) as pool:
            finals = list(pool.map(lambda _: read_all(), range(readers)))
    finally:
        sys.setswitchinterval(interval)
    assert finals == [items] * readers


def test_tool_mode_streams_the_partial_output_of_the_final_answer_call(faux: FauxProvider) -> None:
    faux.set_responses([faux_message([faux_tool_call("final_answer", {"value": ["a", "b", "c", "d", "e", "f"]})])])
    agent = Agent(model=faux.get_model(), output_mode="tool")
    seen = output_events(agent)
    agent.prompt("?", output_type=list[str])
    assert seen[-1] == ["a", "b", "c", "d", "e", "f"]
    assert len(seen) > 2 and all(isinstance(value, list) for value in seen)


def test_a_coerced_answer_leaves_the_call_the_transcript_keeps_as_the_model_sent_it(faux: FauxProvider) -> None:
    # a final_answer call's arguments belong to the message: they are coerced in a copy
    faux.set_responses([faux_message([faux_tool_call("final_answer", {"a": "1", "b": "2"})])])
    agent = Agent(model=faux.get_model(), output_mode="tool")
    result = agent.prompt("?", output_type=dict[str, int])
    (call,) = [call for message in agent.state.messages if message.role == "assistant" for call in message.tool_calls]
    assert result.output == {"a": 1, "b": 2} and call.arguments == {"a": "1", "b": "2"}


def test_a_coerced_native_answer_leaves_the_partial_output_listeners_saw(faux: FauxProvider) -> None:
    # the native answer is parsed again from the text and coerced in place: the partial output
    # (the streaming parser's value, which listeners may hold) is another object
    faux.set_responses([faux_message(json.dumps({"a": "1", "b": "2"}))])
    agent = Agent(model=faux.get_model())
    held: list[Any] = []  # the live values, not copies
    agent.subscribe(lambda event: held.append(event.partial_output) if event.type == "message_update" else None)
    result = agent.prompt("?", output_type=dict[str, int])
    assert result.output == {"a": 1, "b": 2} and [v for v in held if v is not None][-1] == {"a": "1", "b": "2"}


def test_agent_end_carries_the_output_and_its_json_form(faux: FauxProvider) -> None:
    faux.set_responses([faux_message(json.dumps(INVOICE))])
    agent = Agent(model=faux.get_model(), output_type=Invoice)
    ends: list[Any] = []
    agent.subscribe(lambda event: ends.append(event) if event.type == "agent_end" else None)
    agent.prompt("?")
    (end,) = ends
    assert end.output.value == Invoice("A-17", 12.5, False, [LineItem("tea", 12.5)])
    assert end.to_dict()["output"] == INVOICE


def test_continue_after_a_failed_output_retries_with_the_agents_output_type(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("no JSON"), faux_message(json.dumps(INVOICE))])
    agent = Agent(model=faux.get_model(), output_type=Invoice, output_retries=0)
    assert agent.prompt("Read the invoice.").stop_reason == "error"
    result = agent.continue_()  # retries the failed call (docs/loop.md#rule-3)
    assert result.output == Invoice("A-17", 12.5, False, [LineItem("tea", 12.5)])
    assert faux.state.requests[1].options.output_format is not None


def test_a_refusal_is_not_retried_and_output_says_the_model_refused(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("I can't help with that.", stop_reason="refusal"), faux_message("unused")])
    result = Agent(model=faux.get_model(), output_type=Invoice).prompt("?")
    assert result.stop_reason == "refusal" and faux.get_pending_response_count() == 1
    with pytest.raises(OutputError, match="the model refused: I can't help with that."):
        _ = result.output


def test_a_huge_rejected_answer_is_quoted_back_only_up_to_the_bound(faux: FauxProvider) -> None:
    not_json = "x" * 20_000
    too_long_to_quote = json.dumps({"number": "A" * 20_000})  # JSON, but no total
    faux.set_responses([faux_message(not_json), faux_message(too_long_to_quote), faux_message(json.dumps(INVOICE))])
    result = Agent(model=faux.get_model(), output_type=Invoice).prompt("Read the invoice.")
    assert isinstance(result.output, Invoice)
    for feedback, answer in ((result.messages[2], not_json), (result.messages[4], too_long_to_quote)):
        text = feedback.content[0].text
        assert (
            f"Received output:\n{answer[:MAX_QUOTED_CHARS]}\n[... 18," in text and "more characters not shown]" in text
        )
        assert len(text) < MAX_QUOTED_CHARS + 1_500  # the frame, the problems (cut) and the quote


def test_the_error_of_a_failed_huge_answer_keeps_only_the_bounded_quote(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("y" * 50_000)])
    result = Agent(model=faux.get_model(), output_type=Invoice, output_retries=0).prompt("?")
    assert result.stop_reason == "error" and len(result.error_message or "") < MAX_QUOTED_CHARS + 500


@pytest.mark.parametrize("number", ["1e999999", "-1e999999", "NaN", "Infinity", "-Infinity"])
def test_a_number_json_cannot_hold_is_rejected_not_accepted(faux: FauxProvider, number: str) -> None:
    faux.set_responses([faux_message(f'{{"number": "A", "total": {number}}}'), faux_message(json.dumps(INVOICE))])
    result = Agent(model=faux.get_model(), output_type=Invoice).prompt("?")
    assert result.output == Invoice("A-17", 12.5, lines=[LineItem("tea", 12.5)])
    assert "root: the answer is not JSON" in result.messages[2].content[0].text


def test_a_deeply_nested_answer_is_rejected_naming_the_bound(faux: FauxProvider) -> None:
    faux.set_responses([faux_message("[" * 5000 + "]" * 5000), faux_message(json.dumps(INVOICE))])
    result = Agent(model=faux.get_model(), output_type=Invoice).prompt("?")
    assert isinstance(result.output, Invoice)
    assert "root: the answer is nested deeper than 100 levels" in result.messages[2].content[0].text


def test_finish_turn_answering_something_else_is_an_error_even_when_the_output_is_accepted(
    faux: FauxProvider,
) -> None:
    faux.set_responses([faux_message(json.dumps(INVOICE))])
    agent = Agent(model=faux.get_model(), output_type=Invoice, finish_turn=lambda turn, signal: "stop")
    result = agent.prompt("Read the invoice.")
    assert result.stop_reason == "error" and "finish_turn returned 'stop'" in (result.error_message or "")
