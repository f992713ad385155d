"""``Agent(session=...)``: start from the branch, append at message_end before the next call, resume."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from piagent import Agent, InvalidStateError, tool
from piagent.ai.models import custom_model, get_model
from piagent.ai.types import UserMessage
from piagent.sessions import JsonlSession, Session, SessionBusyError, SessionError, SqliteSession
from piagent.testing import FauxProvider, faux_message, faux_tool_call
from tests.ai.providers.openai_wire import chat_text
from tests.support.scripted_server import ScriptedServer, Wait

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


def open_session(kind: str, path: Path) -> Session:
    return JsonlSession(path) if kind == "jsonl" else SqliteSession(path, "one")


# An agent in a process of its own prompts the session at ``path`` over HTTP, then once more
# for each line "again" on its stdin.
PROMPTER = """
import sys
from piagent import Agent
from piagent.ai.models import custom_model
from piagent.exceptions import SessionBusyError
from piagent.sessions import JsonlSession, SqliteSession
kind, path, url, prompt = sys.argv[1:5]
session = JsonlSession(path) if kind == "jsonl" else SqliteSession(path, "one")
model = custom_model("m1", base_url=url, provider="local", register=False)
agent = Agent(model=model, get_api_key=lambda provider: "k", session=session)
while True:
    try:
        print(agent.prompt(prompt).text, flush=True)
    except SessionBusyError as exc:
        print("busy:", exc, flush=True)
    if sys.stdin.readline() != "again\\n":
        break
"""


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_an_agent_resumed_in_another_process_keeps_the_system_prompt(
    faux: FauxProvider, tmp_path: Path, kind: str
) -> None:
    path = tmp_path / ("s.jsonl" if kind == "jsonl" else "s.db")
    faux.set_responses([faux_message("Paris.")])
    first = Agent(model=faux.get_model(), system_prompt="Answer with a city.", session=open_session(kind, path))
    first.prompt("France?")
    with ScriptedServer() as server:
        server.reply(chat_text("Rome."))
        resumed = subprocess.run(
            [sys.executable, "-c", PROMPTER, kind, str(path), f"{server.url}/v1", "And Italy?"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
            timeout=60,
        )
        assert resumed.returncode == 0 and resumed.stdout == "Rome.\n", resumed.stderr
        sent = server.requests[0].json["messages"]
    assert sent[0] == {"role": "system", "content": "Answer with a city."}
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "user"]
    assert Agent(session=open_session(kind, path)).system_prompt == "Answer with a city."
    assert Agent(system_prompt="Be brief.", session=open_session(kind, path)).system_prompt == "Be brief."  # given wins


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
    model = faux.get_model()
    model.context_window = 200_000  # the session's model's: its last answer reports a context of 168,018 tokens
    agent = Agent(model=model, session=JsonlSession(pi_session))
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


def conversation(messages: list[Any]) -> list[str]:
    def text(message: Any) -> str:
        if message.role != "user":
            return str(message.text)
        return message.content if isinstance(message.content, str) else message.content[0].text

    return [text(m) for m in messages]


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_second_agent_prompting_during_a_run_is_refused_then_continues_after_it(
    faux: FauxProvider, memory_dir: Path, kind: str
) -> None:
    """Two agents (threads, a session object each) never interleave their messages in one session."""
    path = memory_dir / ("s.jsonl" if kind == "jsonl" else "s.db")

    started, release = threading.Event(), threading.Event()

    def held(context: Any, options: Any, state: Any, model: Any) -> Any:
        started.set()
        assert release.wait(30)
        return faux_message("first answer")

    faux.set_responses([held, faux_message("second answer")])
    first = Agent(model=faux.get_model(), session=open_session(kind, path))
    second = Agent(model=faux.get_model(), session=open_session(kind, path))  # loaded before the first run
    running = first.prompt("first question", wait=False)
    assert started.wait(30)
    name = str(path) if kind == "jsonl" else f"{path}#one"
    with pytest.raises(SessionBusyError, match=f"session {re.escape(name)} is being written by another agent's run"):
        second.prompt("second question")
    assert conversation(open_session(kind, path).messages()) == ["first question"]  # the refused run wrote nothing
    release.set()
    assert running.result(30).text == "first answer"
    assert second.prompt("second question").text == "second answer"
    sent = faux.state.requests[1].context.messages
    assert conversation(sent) == ["first question", "first answer", "second question"]
    reloaded = open_session(kind, path)
    assert len(reloaded.branches()) == 1
    assert conversation(reloaded.messages()) == conversation(sent) + ["second answer"]


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_claimed_session_takes_in_other_writers_entries_and_follows_only_its_own_branch(
    memory_dir: Path, kind: str
) -> None:
    path = memory_dir / ("s.jsonl" if kind == "jsonl" else "s.db")
    mine, theirs = open_session(kind, path), open_session(kind, path)
    a = mine.append_message(UserMessage("a"))
    b = theirs.append_message(UserMessage("b"))  # it had not seen a: b starts a branch of its own
    for session, leaf in ((mine, a), (theirs, b)):  # each had appended last, after the other's entry
        session.begin_run()()
        assert session.leaf_id == leaf and len(session.entries()) == 2  # taken in; the leaf kept on its branch
    other = open_session(kind, path)
    other.fork(a)
    c = other.append_message(UserMessage("c"))  # continues a
    mine.begin_run()()
    assert mine.leaf_id == c and [m.content for m in mine.messages()] == ["a", "c"]


def test_a_stale_agent_continuing_after_another_agent_answered_is_refused_and_writes_nothing(
    faux: FauxProvider, tmp_path: Path
) -> None:
    """continue_() decides from the transcript as the session has it at the run's start, other writers included."""
    path = tmp_path / "s.jsonl"
    JsonlSession(path).append_message(UserMessage("question"))  # a run killed after its prompt
    faux.set_responses([faux_message("answer")])
    stale = Agent(model=faux.get_model(), session=JsonlSession(path))
    Agent(model=faux.get_model(), session=JsonlSession(path)).continue_()  # another process resumed it first
    before = path.read_bytes()
    with pytest.raises(InvalidStateError, match="Cannot continue from message role: assistant"):
        stale.continue_()
    assert path.read_bytes() == before
    assert [m.role for m in stale.messages] == ["user", "assistant"]  # caught up with the answer


def test_a_continue_refused_by_a_busy_session_keeps_the_queued_messages(faux: FauxProvider, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    faux.set_responses([faux_message("one"), faux_message("two")])
    agent = Agent(model=faux.get_model(), session=JsonlSession(path))
    agent.prompt("first")
    agent.follow_up("second")
    release = JsonlSession(path).begin_run()  # another agent's run, in progress
    try:
        with pytest.raises(SessionBusyError):
            agent.continue_()
    finally:
        release()
    assert agent.has_queued_messages()
    assert agent.continue_().text == "two"
    assert conversation(JsonlSession(path).messages()) == ["first", "one", "second", "two"]


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_an_agent_built_after_a_fork_keeps_its_branch_when_another_writer_grows_the_old_one(
    faux: FauxProvider, memory_dir: Path, kind: str
) -> None:
    path = memory_dir / ("s.jsonl" if kind == "jsonl" else "s.db")
    first = open_session(kind, path)
    a = first.append_message(UserMessage("a"))
    first.append_message(UserMessage("b"))
    forked = open_session(kind, path)
    forked.fork(a)  # continue from a: b's branch stays as it is
    faux.set_responses([faux_message("answer")])
    agent = Agent(model=faux.get_model(), session=forked)
    first.append_message(UserMessage("c"))  # another writer grows the old branch (a, b, c)
    agent.prompt("d")
    assert conversation(faux.state.requests[0].context.messages) == ["a", "d"]
    assert conversation(open_session(kind, path).messages()) == ["a", "d", "answer"]


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_second_process_prompting_during_a_run_is_refused_then_continues_after_it(
    memory_dir: Path, kind: str
) -> None:
    path = memory_dir / ("s.jsonl" if kind == "jsonl" else "s.db")
    hold = threading.Event()

    def prompter(server: ScriptedServer, prompt: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-c", PROMPTER, kind, str(path), f"{server.url}/v1", prompt],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )

    with ScriptedServer() as server:
        first_call = server.reply(chat_text("Paris."), before_headers=Wait(hold, 30))
        server.reply(chat_text("Rome."))
        first = prompter(server, "France?")
        assert first_call.received.wait(30)  # the first run is waiting for its answer
        second = prompter(server, "Italy?")
        assert second.stdout is not None and second.stdin is not None
        refused = second.stdout.readline()
        hold.set()
        assert first.communicate(timeout=60)[0] == "Paris.\n"
        second.stdin.write("again\n")  # the same agent, once the first run has ended
        second.stdin.flush()
        answered = second.stdout.readline()
        second.communicate("", timeout=60)
        assert first.returncode == second.returncode == 0
        sent = [m["content"] for m in server.requests[-1].json["messages"]]
    sent = [text if isinstance(text, str) else text[0]["text"] for text in sent]
    name = str(path) if kind == "jsonl" else f"{path}#one"
    assert refused == f"busy: session {name} is being written by another agent's run " + (
        "(one agent writes a session at a time): try again once that run has ended\n"
    )
    assert answered == "Rome.\n" and len(server.requests) == 2
    assert sent == ["France?", "Paris.", "Italy?"]  # its transcript caught up with the first run
    reloaded = open_session(kind, path)
    assert len(reloaded.branches()) == 1
    assert conversation(reloaded.messages()) == ["France?", "Paris.", "Italy?", "Rome."]


# A process of its own claims the session at ``path`` for a run, says so, and waits to be killed.
CLAIMER = """
import sys
from piagent.sessions import JsonlSession, SqliteSession
kind, path = sys.argv[1:3]
session = JsonlSession(path) if kind == "jsonl" else SqliteSession(path, "one")
session.begin_run()
print("claimed", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_process_killed_during_a_run_leaves_the_session_free(memory_dir: Path, kind: str) -> None:
    path = memory_dir / ("s.jsonl" if kind == "jsonl" else "s.db")
    claimer = subprocess.Popen(
        [sys.executable, "-c", CLAIMER, kind, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert claimer.stdout is not None and claimer.stdout.readline() == "claimed\n"
    with pytest.raises(SessionBusyError):
        open_session(kind, path).begin_run()
    claimer.kill()  # SIGKILL: nothing of the process runs again
    assert claimer.wait(30) == -9
    open_session(kind, path).begin_run()()


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_session_reached_through_a_symlink_is_claimed_as_itself(memory_dir: Path, kind: str) -> None:
    path = memory_dir / ("s.jsonl" if kind == "jsonl" else "s.db")
    open_session(kind, path).append_entry("custom", customType="made")
    link = memory_dir / ("link.jsonl" if kind == "jsonl" else "link.db")
    link.symlink_to(path)
    release = open_session(kind, link).begin_run()
    try:
        with pytest.raises(SessionBusyError):
            open_session(kind, path).begin_run()
    finally:
        release()


def test_a_run_ended_by_keyboard_interrupt_releases_the_session(faux: FauxProvider, tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"

    def interrupted(context: Any, options: Any, state: Any, model: Any) -> Any:
        raise KeyboardInterrupt

    faux.set_responses([interrupted, faux_message("answer")])
    agent = Agent(model=faux.get_model(), session=JsonlSession(path))
    with pytest.raises(KeyboardInterrupt):
        agent.prompt("question")
    other = Agent(model=faux.get_model(), session=JsonlSession(path))
    assert other.prompt("again").text == "answer"


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


def test_an_agent_whose_session_release_fails_is_idle_again(faux: FauxProvider) -> None:
    """A store's own claim (a lock elsewhere, say) whose release raises: the error is the run's, the agent is free."""

    class ClaimedStore:
        def __init__(self) -> None:
            self.records: list[dict[str, Any]] = []
            self.claims = 0

        def load(self) -> list[dict[str, Any]]:
            return list(self.records)

        def append(self, header: dict[str, Any], entries: Any) -> None:
            self.records.extend(([header] if not self.records else []) + list(entries))

        def claim_run(self) -> Any:
            self.claims += 1

            def release() -> None:
                raise SessionError("the claim's connection was lost")

            return release

    store = ClaimedStore()
    faux.set_responses([faux_message("one"), faux_message("two")])
    agent = Agent(model=faux.get_model(), session=Session(store))
    with pytest.raises(SessionError, match="the claim's connection was lost"):
        agent.prompt("first")
    assert not agent.state.is_streaming
    with pytest.raises(SessionError, match="the claim's connection was lost"):
        agent.prompt("second")  # not AgentBusyError: the first run settled
    assert store.claims == 2
    assert [m.role for m in Session(store).messages()] == ["user", "assistant"] * 2
