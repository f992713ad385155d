"""The instrumentation seam (piagent/instrumentation.py): what an installed observer is called with."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from piagent import Agent, AgentTool, AgentToolResult, TextContent, instrumentation
from piagent.instrumentation import Instrumentation
from piagent.testing import faux_message, faux_tool_call


class Recording(Instrumentation):
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.events: list[str] = []

    def run(self, body: Any, emit: Any, context: Any, config: Any, signal: Any) -> Any:
        self.calls.append(("run", threading.current_thread().name))

        def observe(event: Any) -> None:
            self.events.append(event.type)
            emit(event)

        return body(observe)

    def model_call(self, body: Any, model: Any, context: Any, options: Any) -> Any:
        self.calls.append(("model_call", model.id))
        return body()

    def tool_call(self, execute: Any, call: Any) -> Any:
        def traced(*args: Any) -> Any:
            self.calls.append(("tool_call", call.id))
            return execute(*args)

        return traced


@pytest.fixture
def recording() -> Iterator[Recording]:
    observer = Recording()
    instrumentation.install(observer)
    yield observer
    instrumentation.install(None)


def test_an_installed_instrumentation_sees_the_run_its_model_calls_tool_calls_and_events(recording, faux) -> None:
    tool = AgentTool("t", "d", {"type": "object", "properties": {}}, lambda *a: AgentToolResult([TextContent("r")]))
    faux.set_responses([faux_message([faux_tool_call("t", {}, id="c1")]), faux_message("done")])
    seen: list[str] = []
    agent = Agent(model=faux.get_model(), tools=[tool])
    agent.subscribe(lambda event: seen.append(event.type))
    result = agent.prompt("go")
    assert result.text == "done"
    assert recording.calls == [
        ("run", threading.current_thread().name),
        ("model_call", "faux-1"),
        ("tool_call", "c1"),
        ("model_call", "faux-1"),
    ]
    assert recording.events == seen and seen[0] == "agent_start" and seen[-1] == "agent_end"


def test_install_takes_an_instrumentation_or_none() -> None:
    with pytest.raises(TypeError, match="Instrumentation"):
        instrumentation.install(object())  # type: ignore[arg-type]
    assert instrumentation.installed() is None
