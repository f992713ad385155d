"""Compaction against real small windows (docs/compaction.md): the embedded model and
llama-cpp-python's server, each with a 1,024-token context. A 40-turn conversation with long
tool outputs completes with several compactions, where without compaction it ends with the
overflow.

The server's model is declared as a user declares it (``custom_model`` with its default window
of 128,000): the server answers the first request that does not fit with HTTP 200 and an empty
stream; piagent asks it again unstreamed, reads the window from the server's error, compacts
for that window and sends the request again, then compacts before the requests that follow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any, Optional

import pytest

from piagent import Agent, AgentTool, AgentToolResult, RequestUpdate, TextContent
from piagent.ai import custom_model
from piagent.ai.overflow import context_window
from piagent.ai.types import Model
from piagent.compaction import CompactionSummary
from tests_local.conftest import running_server

WINDOW = 1024
TURNS = 40
MAX_TOKENS = 12  # short answers: the model's time goes to reading, which is what fills the window
PAGE = (
    "The harbour town kept its lighthouse lit through every winter storm. Fishermen mended nets on the "
    "quay while gulls argued over scraps, and the baker opened before dawn so the crews could eat. "
)
PAGE_REPEAT = 2  # a page of about 100 tokens: the window holds a few turns


class Reader:
    """A read_page tool and the agent's ``prepare_request``: a user message is answered by a
    read_page call (forced: the small model calls tools reliably only then), its result by the
    model's choice (``auto``: the tools stay in the embedded model's prompt, so each request
    extends the one before and the model reads only what is new). Notes each call run and each
    result present at the end of a request's context."""

    def __init__(self) -> None:
        self.run: list[str] = []  # the ids of the calls executed
        self.sent: set[str] = set()  # the ids of the results the model was sent

    def tool(self) -> AgentTool:
        def execute(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> AgentToolResult:
            self.run.append(tool_call_id)
            return AgentToolResult([TextContent(f"Page {args.get('page')}:\n" + PAGE * PAGE_REPEAT)])

        schema = {"type": "object", "properties": {"page": {"type": "integer"}}, "required": ["page"]}
        return AgentTool("read_page", "Read one page of the town's chronicle", schema, execute)

    def prepare_request(self, request: Any, signal: Any) -> Optional[RequestUpdate]:
        last = request.context.messages[-1]  # the context as sent, after any compaction
        if last.role == "toolResult" and PAGE in last.content[0].text:
            self.sent.add(last.tool_call_id)
        return RequestUpdate(tool_choice={"name": "read_page"} if last.role == "user" else "auto")

    def agent(self, model: Model, **options: Any) -> Agent:
        return Agent(model=model, tools=[self.tool()], prepare_request=self.prepare_request, **options)


def converse(agent: Agent) -> tuple[list[Any], list[Any]]:
    """40 prompts, each read and answered; returns the run results and the compaction_end events."""
    compactions: list[Any] = []
    agent.subscribe(lambda event: compactions.append(event) if event.type == "compaction_end" else None)
    results = []
    for turn in range(TURNS):
        results.append(agent.prompt(f"Read page {turn + 1} and tell me what it says."))
        if results[-1].error_message:
            break
    return results, compactions


def assert_completed_with_compactions(reader: Reader, agent: Agent, results: list[Any], compactions: list[Any]) -> None:
    assert [r.error_message for r in results] == [None] * TURNS
    assert len(reader.run) >= TURNS and reader.sent == set(reader.run)  # every page read reached the model
    assert len(compactions) >= 3 and all(e.result is not None for e in compactions)
    assert isinstance(agent.state.messages[0], CompactionSummary)


# --------------------------------------------------------------------------- the embedded model


def small(model: Model) -> Model:
    """The embedded model loaded with a WINDOW-token context (its ``context_window`` is its n_ctx)."""
    return dataclasses.replace(model, context_window=WINDOW, max_tokens=MAX_TOKENS)


@pytest.mark.timeout(900)  # 80 model calls and the summaries, on a small CPU share
def test_a_40_turn_conversation_with_long_tool_outputs_completes_on_the_embedded_model(local_model: Model) -> None:
    reader = Reader()
    agent = reader.agent(small(local_model))
    results, compactions = converse(agent)
    assert_completed_with_compactions(reader, agent, results, compactions)


def test_without_compaction_the_same_conversation_ends_with_the_overflow(local_model: Model) -> None:
    agent = Reader().agent(small(local_model), compaction=None)
    results, _ = converse(agent)
    assert len(results) < TURNS
    assert f"exceed context window of {WINDOW}" in (results[-1].error_message or "")


# --------------------------------------------------------------------------- llama-cpp-python's server


@pytest.fixture(scope="module")
def small_server(gguf: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The server with a WINDOW-token context, rendering the GGUF's own chat template: its named
    chat formats (chatml, chatml-function-calling) leave tool results out of the prompt, so only
    this one lets long tool outputs fill the window."""
    log = tmp_path_factory.mktemp("small-server") / "server.log"
    with running_server(gguf, None, log, n_ctx=WINDOW) as base_url:
        yield base_url


def declared(base_url: str) -> Model:
    """The model as a user declares a local server's: no window given (custom_model's 128,000)."""
    return custom_model("smollm2-135m", base_url=base_url, max_tokens=MAX_TOKENS, register=False)


@pytest.mark.timeout(900)
def test_a_40_turn_conversation_with_long_tool_outputs_completes_against_the_server(small_server: str) -> None:
    model = declared(small_server)
    reader = Reader()
    agent = reader.agent(model)
    results, compactions = converse(agent)
    assert_completed_with_compactions(reader, agent, results, compactions)
    first = compactions[0]
    assert (first.reason, first.will_retry) == ("overflow", True)  # the server's empty HTTP 200, recognised
    assert context_window(model) == WINDOW and model.context_window == 128000  # learned from the server
    assert any(e.reason == "threshold" for e in compactions[1:])  # then compacted before each overflow


def test_without_compaction_the_conversation_against_the_server_ends_with_its_overflow(small_server: str) -> None:
    agent = Reader().agent(declared(small_server), compaction=None)
    results, _ = converse(agent)
    assert len(results) < TURNS
    assert f"maximum context length is {WINDOW} tokens" in (results[-1].error_message or "")
