"""An agent and its runs are freed by reference counting (docs/architecture.md#memory): a settled
run, and an agent nobody holds, leave nothing for Python's cycle collector, which a server running
many runs at once would otherwise wait on (their transcripts, queues and hooks held until the
next full collection)."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from piagent import Agent, UsageLimits
from piagent._threads import _CachedThreads
from piagent.ai import Model
from tests.ai.providers.helpers import add_tool
from tests.ai.providers.openai_wire import chat_stream, chat_text, chunk, tool_delta, usage
from tests.support.scripted_server import ScriptedServer


@pytest.fixture
def no_cycle_collection() -> Iterator[None]:
    """The cycle collector off for the test: only reference counting frees anything."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def piagent_garbage() -> list[str]:
    """The piagent objects that only the cycle collector would free (their type names)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return sorted({type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("piagent")})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def tool_then_answer(server: ScriptedServer) -> None:
    server.reply(
        chat_stream(
            chunk({"role": "assistant", "content": None}),
            tool_delta(0, "call_1", "add", '{"a": 2, "b": 3}'),
            chunk({}, "tool_calls", usage=usage(20, 10)),
        )
    )
    server.reply(chat_text("5."))


def http_agent(server: ScriptedServer, **options: Any) -> Agent:
    model = Model("gpt-test", api="openai-completions", provider="openai", base_url=server.url)
    return Agent(model=model, tools=[add_tool([])], get_api_key=lambda provider: "sk-test", **options)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"tool_execution": "sequential", "usage_limits": UsageLimits(requests=10), "fallback_models": []},
        {"compaction": None, "max_turns": 5},
    ],
    ids=["defaults", "sequential-limits", "no-compaction"],
)
def test_a_settled_run_leaves_nothing_for_the_cycle_collector(no_cycle_collection: None, options: Any) -> None:
    with ScriptedServer() as server:
        agent = http_agent(server, **options)
        agent.subscribe(lambda event: None)
        for _ in range(2):
            tool_then_answer(server)
            assert agent.prompt("What is 2 + 3?").text == "5."
            assert piagent_garbage() == []
        assert [m.role for m in agent.state.messages][-4:] == ["user", "assistant", "toolResult", "assistant"]


def test_an_agent_nobody_holds_is_freed_at_once(no_cycle_collection: None) -> None:
    with ScriptedServer() as server:
        tool_then_answer(server)
        agent = http_agent(server)
        agent.prompt("What is 2 + 3?")
        gone = weakref.ref(agent)
        del agent
        assert gone() is None
        assert piagent_garbage() == []


def test_the_state_outlives_its_agent(no_cycle_collection: None) -> None:
    with ScriptedServer() as server:
        tool_then_answer(server)
        agent = http_agent(server, system_prompt="You add.")
        agent.prompt("What is 2 + 3?")
        state = agent.state
        del agent
        assert state.system_prompt == "You add." and state.messages[-1].text == "5."
        state.thinking_level = "high"  # still validated against the options' checks
        with pytest.raises(ValueError, match="thinking_level"):
            state.thinking_level = "very"  # type: ignore[assignment]
        assert state.thinking_level == "high" and not state.is_streaming


def test_an_option_set_through_the_state_goes_through_the_agents_own_attribute(no_cycle_collection: None) -> None:
    seen: list[Any] = []

    class ModelLogged(Agent):  # a subclass that overrides an option with a property, as users do
        @property
        def model(self) -> Any:
            return self.__dict__["model"]

        @model.setter
        def model(self, value: Any) -> None:
            seen.append(value)
            Agent.model.__set__(self, value)  # type: ignore[attr-defined]

    agent = ModelLogged(model=Model("m", api="openai-completions", provider="p", base_url="http://127.0.0.1:9"))
    agent.state.model = Model("n", api="openai-completions", provider="p", base_url="http://127.0.0.1:9")
    assert agent.model.id == "n" and [model.id for model in seen] == ["m", "n"]
    with pytest.raises(TypeError):
        agent.state.model = 42  # type: ignore[assignment]  # the option's own check, as before
    assert agent.model.id == "n"


def test_a_worker_thread_keeps_nothing_of_a_job_it_finished() -> None:
    """A Thread keeps its start arguments until it ends: a worker, idle for up to 30 s, held
    its first job (the model's response, a tool's result) all that time."""

    class Payload:
        pass

    workers = _CachedThreads("piagent-test-worker")
    payload = Payload()
    payload_freed = weakref.ref(payload)
    ran = threading.Event()
    workers.submit(lambda held: ran.set(), payload)
    del payload
    assert ran.wait(10)
    deadline = time.monotonic() + 10
    while not workers.idle_threads() and time.monotonic() < deadline:  # the job's end, then idle
        time.sleep(0.001)
    assert workers.idle_threads()
    assert payload_freed() is None
