"""The in-process llama-cpp provider on the real embedded model (SmolLM2-135M)."""

from __future__ import annotations

import json
import threading

from piagent.abort import AbortController
from piagent.ai import Context, Tool, UserMessage, stream_simple
from piagent.ai.providers import llama_cpp
from piagent.ai.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage

WAIT = 120
WEATHER = Tool(
    "get_weather",
    "Get the current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = Tool(
    "get_time",
    "Get the current time in a timezone.",
    {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]},
)


def ask(text: str, tools=None) -> Context:
    return Context("You are a helpful assistant. Answer briefly.", [UserMessage(text)], tools)


def test_text_streams_token_by_token_and_adds_up_to_the_final_message(local_model):
    events = stream_simple(local_model, ask("What is the capital of France?"))
    deltas = [e.delta for e in events if e.type == "text_delta"]
    final = events.result(timeout=WAIT)
    assert final.stop_reason in ("stop", "length")
    assert len(deltas) > 2 and final.text == "".join(deltas) and final.text.strip()
    assert final.usage.input > 10 and final.usage.output >= len(deltas)
    assert (final.api, final.provider, final.model) == ("llama-cpp", "local", "smollm2-135m")


def test_a_named_tool_choice_forces_that_call_with_schema_valid_arguments(local_model):
    events = stream_simple(
        local_model, ask("What's the weather in Paris?", [WEATHER, CLOCK]), tool_choice={"name": "get_weather"}
    )
    kinds = [e.type for e in events]
    final = events.result(timeout=WAIT)
    assert final.stop_reason == "toolUse"
    assert kinds[0] == "start" and "toolcall_start" in kinds and "toolcall_delta" in kinds and kinds[-1] == "done"
    (call,) = final.tool_calls
    assert call.name == "get_weather" and isinstance(call.arguments.get("city"), str)


def test_required_tool_choice_picks_one_of_the_tools(local_model):
    final = stream_simple(
        local_model, ask("What time is it in Tokyo?", [WEATHER, CLOCK]), tool_choice="required"
    ).result(timeout=WAIT)
    assert final.stop_reason == "toolUse"
    (call,) = final.tool_calls
    assert call.name in ("get_weather", "get_time") and call.arguments


def test_tool_choice_none_answers_in_text(local_model):
    final = stream_simple(local_model, ask("What's the weather in Paris?", [WEATHER]), tool_choice="none").result(
        timeout=WAIT
    )
    assert final.stop_reason in ("stop", "length") and not final.tool_calls and final.text


def test_abort_stops_generation_between_tokens(local_model):
    controller = AbortController()
    events = stream_simple(
        local_model, ask("Write a long story about a dragon."), signal=controller.signal, max_tokens=400
    )
    deltas = []
    for event in events:
        if event.type == "text_delta":
            deltas.append(event.delta)
            if len(deltas) == 3:
                controller.abort()
    final = events.result(timeout=WAIT)
    assert final.stop_reason == "aborted" and final.error_message == "Request was aborted"
    assert len(deltas) == 3 and final.text == "".join(deltas)


def test_threads_share_one_model_instance_one_response_at_a_time(local_model):
    questions = ["What is the capital of France?", "What is the capital of Italy?", "Name a colour."]
    barrier = threading.Barrier(len(questions))
    results = {}

    def ask_in_thread(question: str) -> None:
        barrier.wait(WAIT)
        results[question] = stream_simple(local_model, ask(question)).result(timeout=WAIT)

    loaded_before = set(llama_cpp._loaded)  # other tests may have loaded the GGUF at another context size
    threads = [threading.Thread(target=ask_in_thread, args=(q,)) for q in questions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert sorted(results) == sorted(questions)
    assert all(r.stop_reason in ("stop", "length") and r.text for r in results.values())
    # one Llama for the one GGUF and context size, whichever thread asked first
    assert len(set(llama_cpp._loaded) - loaded_before) <= 1


def test_a_call_waiting_for_the_model_can_be_aborted(local_model, gguf):
    loaded = llama_cpp._load(gguf, local_model.context_window)
    controller = AbortController()
    with loaded.lock:  # another response is generating
        events = stream_simple(local_model, ask("Hi"), signal=controller.signal)
        controller.abort()
        final = events.result(timeout=WAIT)
    assert final.stop_reason == "aborted" and final.content == []


def test_a_consumer_that_stops_at_done_does_not_hold_the_model(local_model, gguf):
    events = stream_simple(local_model, ask("Say hi."))
    for event in events:
        if event.type == "done":
            break
    loaded = llama_cpp._load(gguf, local_model.context_window)
    assert loaded.lock.acquire(timeout=WAIT)
    loaded.lock.release()


CALCULATOR = Tool(
    "calculator",
    "Evaluate an arithmetic expression.",
    {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
)
MARKUP = ("<tool_call>", "</tool_call>", "<|im_start|>", "<|im_end|>")


def after_a_calculator_result(expression: str, result: str) -> Context:
    """The turn after a call and its result, where the model opens a ``<tool_call>`` of its own."""
    call = ToolCall(id="call_1", name="calculator", arguments={"expression": expression})
    return Context(
        None,
        [
            UserMessage(f"What is {expression}?"),
            AssistantMessage(content=[call], stop_reason="toolUse"),
            ToolResultMessage(tool_call_id="call_1", tool_name="calculator", content=[TextContent(result)]),
        ],
        [CALCULATOR],
    )


def test_a_call_the_model_opens_on_its_own_is_written_under_the_grammar_never_as_text(local_model):
    events = stream_simple(local_model, after_a_calculator_result("17 * 23", "391"))  # tool_choice auto
    kinds = [e.type for e in events]
    final = events.result(timeout=WAIT)
    assert final.stop_reason == "toolUse" and "toolcall_delta" in kinds
    assert not any(tag in final.text for tag in MARKUP)
    (call,) = final.tool_calls
    assert call.name == "calculator" and isinstance(call.arguments["expression"], str)
    assert not any(tag in call.arguments["expression"] for tag in MARKUP)


def test_a_forced_call_is_the_question_s_expression_in_well_formed_json_of_the_tool_schema(local_model):
    final = stream_simple(
        local_model, ask("What is 17 * 23?", [CALCULATOR]), tool_choice={"name": "calculator"}
    ).result(timeout=WAIT)
    assert final.stop_reason == "toolUse", final.error_message
    (call,) = final.tool_calls
    assert call.arguments == {"expression": "17 * 23"}


def test_string_values_under_the_grammar_are_json_strings_without_raw_control_characters():
    from llama_cpp import llama_grammar

    upstream = llama_grammar.json_schema_to_gbnf(json.dumps(CALCULATOR.parameters))
    assert llama_cpp._LOOSE_STRING_CHAR in upstream  # the rule the provider replaces is still llama-cpp-python's
    grammar = llama_cpp._schema_grammar(CALCULATOR.parameters, "tool calculator")
    assert llama_cpp._JSON_STRING_CHAR.split(" |")[0] in grammar._grammar


def test_tool_arguments_are_compact_json_then_anything_which_is_never_read():
    from llama_cpp import llama_grammar

    upstream = llama_grammar.json_schema_to_gbnf(json.dumps(CALCULATOR.parameters))
    assert llama_cpp._OPTIONAL_SPACE in upstream  # the rule the provider replaces is still llama-cpp-python's
    grammar = llama_cpp._arguments_grammar(CALCULATOR.parameters, "tool calculator")._grammar
    assert llama_cpp._OPTIONAL_SPACE not in grammar and 'root ::= " " piagent-arguments [^\\x00]*' in grammar


def test_the_output_tokens_reported_are_the_tokens_generated(local_model):
    """An answer cut at ``max_tokens`` is exactly that many generated tokens (the stream's last
    chunk, which only says why it ended, is not one)."""
    for max_tokens in (1, 5, 20):
        final = stream_simple(local_model, ask("Tell me a long story about a dragon."), max_tokens=max_tokens).result(
            timeout=WAIT
        )
        assert (final.stop_reason, final.usage.output) == ("length", max_tokens)
