"""examples/script.py and examples/fan_out.py, run for real with the faux provider."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from piagent.testing import faux_message, faux_text, faux_tool_call

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WAIT = 10


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_script_streams_the_answer_after_its_tool_result(faux: Any, capsys: pytest.CaptureFixture) -> None:
    faux.set_responses(
        [
            faux_message([faux_tool_call("country_facts", {"country": "Japan"})]),
            faux_message([faux_text("About 124.5 million people live in Japan.")]),
        ]
    )
    result = load("script").main("How many people live in Japan?", model=faux.get_model())
    assert result.stop_reason == "stop" and result.text == "About 124.5 million people live in Japan."
    out = capsys.readouterr().out
    assert out == (
        "[country_facts {'country': 'Japan'}]\n"
        "[-> Japan: capital Tokyo, population 124.5 million (2024).]\n"
        "About 124.5 million people live in Japan.\n"
    )
    assert [r.options.tool_choice for r in faux.state.requests] == [{"name": "country_facts"}, "none"]


def test_script_tool_error_reaches_the_model_as_an_error_result(faux: Any) -> None:
    faux.set_responses(
        [faux_message([faux_tool_call("country_facts", {"country": "Atlantis"})]), faux_message("Unknown.")]
    )
    result = load("script").main("Atlantis?", model=faux.get_model())
    (tool_result,) = [m for m in result.messages if m.role == "toolResult"]
    assert tool_result.is_error and "No facts about 'Atlantis'" in tool_result.content[0].text


def test_fan_out_runs_the_agents_at_the_same_time_and_keeps_each_answer_with_its_question(
    faux: Any, capsys: pytest.CaptureFixture
) -> None:
    questions = ["Q1?", "Q2?", "Q3?"]
    everyone_asked = threading.Barrier(len(questions))

    def answer(context: Any, options: Any, state: Any, model: Any) -> Any:
        everyone_asked.wait(WAIT)  # raises (an error answer) unless all agents are in flight at once
        return faux_message(f"answer to {context.messages[-1].content[0].text}")

    faux.set_responses([answer] * len(questions))
    results = load("fan_out").main(questions, model=faux.get_model())
    assert [r.text for r in results] == ["answer to Q1?", "answer to Q2?", "answer to Q3?"]
    assert capsys.readouterr().out.splitlines() == [f"{q} -> answer to {q}" for q in questions]
