"""The API without surprises: what a new user meets first (no model, one tool, a tool choice
that cannot be met, raw and validated arguments, the first request's imports)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from piagent import Agent, tool
from piagent.testing import faux_message, faux_tool_call


@tool
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b


def test_an_agent_without_a_model_fails_saying_how_to_set_one_and_prints_nothing() -> None:
    code = "from piagent import Agent\nr = Agent().prompt('hi')\nprint(r.stop_reason, '|', r.error_message)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""  # no traceback printed by the library
    assert done.stdout.startswith('error | No model set: give the agent one, e.g. Agent(model="openai:gpt-4.1")')


def test_one_tool_is_accepted_where_a_list_is_expected(faux: Any) -> None:
    agent = Agent(model=faux.get_model(), tools=add)
    assert agent.tools == [add]
    agent.tools = add
    assert agent.tools == [add]
    with pytest.raises(TypeError, match=r"tools must be a list of tools \(AgentTool, @tool functions\) or one tool"):
        Agent(tools="add")


@pytest.mark.parametrize(
    "tools, choice, message",
    [
        ([add], {"name": "nope"}, r"tool_choice names 'nope', which is not among the agent's tools \(tools: add\)"),
        ([], "required", r'tool_choice="required" needs tools'),
    ],
)
def test_a_tool_choice_no_tool_can_meet_is_refused_at_prompt(faux: Any, tools: list, choice: Any, message: str) -> None:
    agent = Agent(model=faux.get_model(), tools=tools, tool_choice=choice)
    with pytest.raises(ValueError, match=message):
        agent.prompt("hi")
    assert not faux.state.requests and not agent.state.is_streaming and agent.state.messages == []


def test_listeners_get_the_raw_arguments_at_start_and_the_validated_ones_after(faux: Any) -> None:
    faux.set_responses([faux_message([faux_tool_call("add", {"a": "2"})]), faux_message("3")])
    agent = Agent(model=faux.get_model(), tools=[add])
    events: list[Any] = []
    agent.subscribe(events.append)
    agent.prompt("2 + 1?")
    start = next(e for e in events if e.type == "tool_execution_start")
    end = next(e for e in events if e.type == "tool_execution_end")
    assert start.args == {"a": "2"}  # as the model wrote them
    assert end.validated_args == {"a": 2} and end.result.content[0].text == "3"  # what add() received
    assert end.to_dict()["validatedArgs"] == {"a": 2} and "validatedArgs" not in start.to_dict()


def test_building_an_agent_imports_its_provider_and_compiles_tool_validators_not_the_first_prompt() -> None:
    code = (
        "import sys\n"
        "from piagent import Agent, tool\n"
        "from piagent.ai import Model\n"
        "wanted = ('piagent.ai.providers.openai_completions', 'jsonschema')\n"
        "loaded = lambda: [m for m in wanted if m in sys.modules]\n"
        "print(loaded())\n"
        "@tool\n"
        "def add(a: int) -> int:\n"
        "    'Add.'\n"
        "    return a\n"
        "Agent(model=Model(id='m', api='openai-completions', provider='p', base_url='http://127.0.0.1:9/v1'),"
        " tools=[add])\n"
        "print(loaded())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == ["[]", "['piagent.ai.providers.openai_completions', 'jsonschema']"], done.stderr
