"""``Agent(session=...)``: start from the branch, append at message_end before the next call, resume."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from piagent import Agent, tool
from piagent.ai.models import custom_model, get_model
from piagent.ai.types import UserMessage
from piagent.sessions import JsonlSession, SessionError, SqliteSession
from piagent.testing import FauxProvider, faux_message, faux_tool_call
from tests.ai.providers.openai_wire import chat_text
from tests.support.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]


def stored_roles(path: Path) -> list[str]:
    return [e["message"]["role"] for e in JsonlSession(path).entries() if e["type"] == "message"]


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def test_each_message_is_on_disk_before_the_next_model_call_and_partials_never_are(
    faux: FauxProvider, tmp_path: Path
) -> None:
    path = tmp_path / "s.jsonl"
    seen_by_second_call: list[list[str]] = []

    def second_call(context: Any, options: Any, state: Any, model: Any) -> Any:
        seen_by_second_call.append(stored_roles(path))  # read by a fresh reader, as another process would
        return faux_message("the value is known")

    faux.set_responses([faux_message([faux_tool_call("lookup", {"key": "k"})]), second_call])
    agent = Agent(model=faux.get_model(), tools=[lookup], session=JsonlSession(path))
    ended: list[int] = []

    def check(event: Any) -> None:
        if event.type == "message_update":  # mid-stream: only ended messages are stored
            assert len(stored_roles(path)) == len(ended)
        elif event.type == "message_end":
            ended.append(1)

    agent.subscribe(check)
    result = agent.prompt("Look k up")
    assert result.text == "the value is known"
    assert seen_by_second_call == [["user", "assistant", "toolResult"]]
    assert stored_roles(path) == ["user", "assistant", "toolResult", "assistant"]
    stored = [e["message"] for e in JsonlSession(path).entries() if e["type"] == "message"]
    assert stored == [m.to_dict() for m in agent.state.messages]


def test_a_new_agent_starts_from_the_branch_and_continues_it(faux: FauxProvider, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    faux.set_responses([faux_message("first answer"), faux_message("second answer")])
    Agent(model=faux.get_model(), session=JsonlSession(path)).prompt("first question")

    again = Agent(model=faux.get_model(), session=JsonlSession(path))
    assert [m.role for m in again.state.messages] == ["user", "assistant"]
    again.prompt("second question")
    sent = faux.state.requests[1].context.messages
    assert [m.role for m in sent] == ["user", "assistant", "user"] and sent[1].text == "first answer"
    assert stored_roles(path) == ["user", "assistant", "user", "assistant"]


def test_the_recorded_model_and_thinking_level_are_used_unless_given(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = JsonlSession(path)
    session.append_model_change("anthropic", "claude-sonnet-4-5")
    session.append_thinking_level_change("high")
    resumed = Agent(session=JsonlSession(path))
    assert resumed.state.model == get_model("anthropic:claude-sonnet-4-5")
    assert resumed.state.thinking_level == "high"
    given = Agent(model="openai:gpt-4.1-mini", thinking_level="low", session=JsonlSession(path))
    assert given.state.model.id == "gpt-4.1-mini" and given.state.thinking_level == "low"


def test_a_run_records_a_changed_model_and_thinking_level_before_its_messages(
    faux: FauxProvider, tmp_path: Path
) -> None:
    path = tmp_path / "s.jsonl"
    faux.set_responses([faux_message("a"), faux_message("b")])
    agent = Agent(model=faux.get_model(), session=JsonlSession(path))
    agent.prompt("one")
    agent.thinking_level = "low"
    agent.prompt("two")
    kinds = [e["type"] for e in JsonlSession(path).entries()]
    assert kinds == ["model_change", "message", "message", "thinking_level_change", "message", "message"]
    assert JsonlSession(path).context().thinking_level == "low"


RESUMER = """
import sys
from piagent import Agent
from piagent.ai.models import custom_model
from piagent.sessions import JsonlSession, SqliteSession
kind, path, url = sys.argv[1:4]
session = JsonlSession(path) if kind == "jsonl" else SqliteSession(path, "one")
model = custom_model("m1", base_url=url, provider="local", register=False)
agent = Agent(model=model, get_api_key=lambda provider: "k", session=session)
print(agent.prompt("And Italy?").text)
"""


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_an_agent_resumed_in_another_process_keeps_the_system_prompt(
    faux: FauxProvider, tmp_path: Path, kind: str
) -> None:
    path = tmp_path / ("s.jsonl" if kind == "jsonl" else "s.db")

    def open_session() -> Any:
        return JsonlSession(path) if kind == "jsonl" else SqliteSession(path, "one")

    faux.set_responses([faux_message("Paris.")])
    Agent(model=faux.get_model(), system_prompt="Answer with a city.", session=open_session()).prompt("France?")
    with ScriptedServer() as server:
        server.reply(chat_text("Rome."))
        resumed = subprocess.run(
            [sys.executable, "-c", RESUMER, kind, str(path), f"{server.url}/v1"],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            timeout=60,
        )
        assert resumed.returncode == 0 and resumed.stdout == "Rome.\n", resumed.stderr
        sent = server.requests[0].json["messages"]
    assert sent[0] == {"role": "system", "content": "Answer with a city."}
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "user"]
    assert Agent(session=open_session()).system_prompt == "Answer with a city."
    assert Agent(system_prompt="Be brief.", session=open_session()).system_prompt == "Be brief."  # given wins


def test_a_changed_system_prompt_is_recorded_before_the_run_that_uses_it(faux: FauxProvider, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    faux.set_responses([faux_message("a"), faux_message("b"), faux_message("c")])
    agent = Agent(model=faux.get_model(), system_prompt="one", session=JsonlSession(path))
    agent.prompt("x")
    agent.prompt("y")  # unchanged: nothing recorded
    agent.system_prompt = "two"
    agent.prompt("z")
    recorded = [e for e in JsonlSession(path).entries() if e["type"] == "custom"]
    assert [(e["customType"], e["data"]) for e in recorded] == [
        ("piagent.system_prompt", {"content": "one"}),
        ("piagent.system_prompt", {"content": "two"}),
    ]
    assert [m.role for m in JsonlSession(path).messages()] == ["user", "assistant"] * 3  # not a message
    assert JsonlSession(path).context().system_prompt == "two"


def test_an_unknown_recorded_model_is_a_warning_and_the_default(tmp_path: Path, caplog: Any) -> None:
    path = tmp_path / "s.jsonl"
    JsonlSession(path).append_model_change("nowhere", "model-x")
    with caplog.at_level(logging.WARNING, logger="piagent.sessions"):
        agent = Agent(session=JsonlSession(path))
    assert "nowhere:model-x is not in the catalogue" in caplog.text and agent.state.model.id == "unknown"


def test_resuming_a_run_killed_mid_tool_batch_repairs_the_dangling_calls(tmp_path: Path) -> None:
    """Over HTTP: the provider sends "No result provided" for each call that never got a result."""
    path = tmp_path / "s.jsonl"
    session = JsonlSession(path)
    session.append_message(UserMessage("look up a and b"))
    calls = faux_message(
        [faux_tool_call("lookup", {"key": "a"}, "call_a"), faux_tool_call("lookup", {"key": "b"}, "call_b")]
    )
    with ScriptedServer() as server:
        model = custom_model("m1", base_url=f"{server.url}/v1", provider="local", register=False)
        calls.api, calls.provider, calls.model = model.api, model.provider, model.id
        session.append_message(calls)  # the process died before any tool result was stored
        server.reply(chat_text("I could not look them up."))
        agent = Agent(model=model, tools=[lookup], get_api_key=lambda provider: "k", session=JsonlSession(path))
        result = agent.continue_()
        sent = server.requests[0].json["messages"]
    assert result.text == "I could not look them up."
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in sent[2:]] == [
        ("call_a", "No result provided"),
        ("call_b", "No result provided"),
    ]
    assert stored_roles(path) == ["user", "assistant", "assistant"]  # the repair is for the model, not stored


def test_an_agent_continues_the_real_pi_session(faux: FauxProvider, pi_session: Path) -> None:
    faux.set_responses([faux_message("Continuing the refactoring.")])
    agent = Agent(model=faux.get_model(), session=JsonlSession(pi_session))
    context_length = len(agent.state.messages)
    result = agent.prompt("Where were we?")
    assert result.text == "Continuing the refactoring."
    sent = faux.state.requests[0].context.messages
    assert len(sent) == context_length + 1 - 0  # the summary and every kept message, pi's roles converted
    assert sent[0].role == "user" and "<summary>" in sent[0].content[0].text
    reloaded = JsonlSession(pi_session)
    assert [m.role for m in reloaded.messages()[-2:]] == ["user", "assistant"]
    assert len(reloaded.entries()) == 1002 + 3  # model_change, the prompt, the answer


def test_messages_and_a_session_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="give one or the other"):
        Agent(messages=[UserMessage("x")], session=JsonlSession(tmp_path / "s.jsonl"))


def test_one_session_object_records_one_agent(tmp_path: Path) -> None:
    session = JsonlSession(tmp_path / "s.jsonl")
    Agent(session=session)
    with pytest.raises(SessionError, match="already recording another agent"):
        Agent(session=session)


def test_two_agents_on_one_sqlite_session_at_once_write_two_whole_branches(
    faux: FauxProvider, memory_dir: Path
) -> None:
    path = memory_dir / "s.db"

    def answer(context: Any, options: Any, state: Any, model: Any) -> Any:
        return faux_message("answer to " + context.messages[-1].content[0].text)

    faux.set_responses([answer] * 8)
    agents = [Agent(model=faux.get_model(), session=SqliteSession(path, "one")) for _ in range(2)]
    barrier = threading.Barrier(2)

    def chat(i: int) -> None:
        barrier.wait()
        for turn in range(3):
            agents[i].prompt(f"agent {i} turn {turn}")

    threads = [threading.Thread(target=chat, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    session = SqliteSession(path, "one")
    leaves = session.branches()
    assert len(leaves) == 2
    for leaf in leaves:
        texts = [m.content[0].text if m.role == "user" else m.text for m in session.messages(leaf)]
        agent = texts[0].split(" turn")[0]
        assert texts == [x for t in range(3) for x in (f"{agent} turn {t}", f"answer to {agent} turn {t}")]
    assert json.loads(json.dumps(session.entries()))  # plain JSON throughout


def test_an_agent_started_after_a_fork_continues_the_earlier_entry_and_the_old_branch_stays(
    faux: FauxProvider, tmp_path: Path
) -> None:
    path = tmp_path / "s.jsonl"
    faux.set_responses([faux_message("Paris"), faux_message("Rome"), faux_message("Lyon")])
    agent = Agent(model=faux.get_model(), session=JsonlSession(path))
    agent.prompt("A city in France?")
    agent.prompt("A city in Italy?")
    session = JsonlSession(path)
    first_answer = next(
        e["id"] for e in session.entries() if e["type"] == "message" and e["message"]["role"] == "assistant"
    )
    session.fork(first_answer)
    forked = Agent(model=faux.get_model(), session=session)
    assert [m.role for m in forked.state.messages] == ["user", "assistant"]
    forked.prompt("Another one in France?")
    reloaded = JsonlSession(path)
    assert len(reloaded.branches()) == 2
    texts = [[m.text for m in reloaded.messages(leaf) if m.role == "assistant"] for leaf in reloaded.branches()]
    assert texts == [["Paris", "Rome"], ["Paris", "Lyon"]]
