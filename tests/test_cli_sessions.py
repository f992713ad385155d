"""The command's sessions: every run recorded, ``-c``, ``--session``, ``--list-sessions``, ``-v``."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from piagent.ai.types import UserMessage
from piagent.cli import main
from piagent.sessions import JsonlSession, session_dir
from piagent.testing import FauxProvider, faux_message
from tests.ai.providers.openai_wire import chat_text
from tests.support.scripted_server import ScriptedServer

WAIT = 30


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A project directory to run in, and the user's session directory."""
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    return {"PIAGENT_SESSIONS_DIR": str(tmp_path / "sessions")}


def run(faux: FauxProvider, environ: dict[str, str], *argv: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdin=io.StringIO(""), stdout=out, stderr=err, model=faux.get_model(), environ=environ)
    return {"code": code, "out": out.getvalue(), "err": err.getvalue()}


def piagent_process(home: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    """``python -m piagent *argv`` in a process of its own, with ``home`` and no API key or PIAGENT_MODEL."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PIAGENT_MODEL"}
    env.update(home)
    return subprocess.run(
        [sys.executable, "-m", "piagent", *argv], capture_output=True, text=True, env=env, timeout=WAIT
    )


def test_a_one_shot_run_is_recorded_and_v_prints_its_session_file(faux: FauxProvider, home: dict[str, str]) -> None:
    faux.set_responses([faux_message("Hello!")])
    result = run(faux, home, "-v", "Say hello")
    assert result["code"] == 0 and result["out"] == "Hello!\n"
    (path,) = Path(session_dir(os.getcwd(), home)).glob("*.jsonl")
    assert f"piagent: session: {path}\n" in result["err"]
    assert [m.role for m in JsonlSession(path).messages()] == ["user", "assistant"]
    assert JsonlSession(path).header["cwd"] == os.getcwd()
    assert Path(session_dir(os.getcwd(), home)).name == "--" + os.getcwd().lstrip("/").replace("/", "-") + "--"


def test_a_session_file_is_named_after_its_session_id(faux: FauxProvider, home: dict[str, str]) -> None:
    faux.set_responses([faux_message("Hello!")])
    run(faux, home, "Say hello")
    (path,) = Path(session_dir(os.getcwd(), home)).glob("*.jsonl")
    stamp, _, session_id = path.stem.partition("_")
    assert session_id == JsonlSession(path).id  # as pi names its files: <creation time>_<session id>.jsonl
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z", stamp)


def test_continue_picks_the_most_recent_session_of_the_directory(faux: FauxProvider, home: dict[str, str]) -> None:
    faux.set_responses([faux_message("one"), faux_message("two"), faux_message("three")])
    run(faux, home, "first")
    run(faux, home, "second")  # a new session
    assert run(faux, home, "-c", "third")["code"] == 0
    sent = faux.state.requests[2].context.messages
    assert [m.content[0].text if m.role == "user" else m.text for m in sent] == ["second", "two", "third"]
    assert len(list(Path(session_dir(os.getcwd(), home)).glob("*.jsonl"))) == 2


def test_continue_without_a_session_in_the_directory_says_it_starts_a_new_one(
    faux: FauxProvider, home: dict[str, str]
) -> None:
    faux.set_responses([faux_message("Hello!")])
    result = run(faux, home, "-c", "Say hello")
    assert result["code"] == 0 and result["out"] == "Hello!\n"
    directory = session_dir(os.getcwd(), home)
    assert result["err"] == f"piagent: no session to continue in {directory}: starting a new one\n"
    assert len(list(Path(directory).glob("*.jsonl"))) == 1


def test_session_path_records_there_and_continues_it(faux: FauxProvider, home: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    faux.set_responses([faux_message("one"), faux_message("two")])
    run(faux, home, "--session", str(path), "first")
    run(faux, home, "--session", str(path), "second")
    assert [m.role for m in JsonlSession(path).messages()] == ["user", "assistant", "user", "assistant"]
    assert not Path(session_dir(os.getcwd(), home)).exists()


def test_no_session_records_nothing(faux: FauxProvider, home: dict[str, str]) -> None:
    faux.set_responses([faux_message("one")])
    assert run(faux, home, "--no-session", "first")["code"] == 0
    assert not Path(session_dir(os.getcwd(), home)).exists()


def test_list_sessions_shows_each_session_of_the_directory(faux: FauxProvider, home: dict[str, str]) -> None:
    assert run(faux, home, "--list-sessions")["out"].startswith("no sessions in ")
    faux.set_responses([faux_message("one"), faux_message("two")])
    run(faux, home, "What is a tree?")
    run(faux, home, "And a forest?")
    listing = run(faux, home, "--list-sessions")
    assert listing["code"] == 0
    lines = listing["out"].splitlines()
    assert len(lines) == 4 and "2 messages  And a forest?" in lines[0] and "What is a tree?" in lines[2]
    assert all(Path(line.strip()).is_file() for line in lines[1::2])


def test_a_session_file_that_cannot_be_read_is_a_usage_error(
    faux: FauxProvider, home: dict[str, str], tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not a session\n")
    result = run(faux, home, "--session", str(bad), "hi")
    assert result["code"] == 2 and "cannot open the session" in result["err"] and "line 1: not JSON" in result["err"]
    assert bad.read_text() == "not a session\n"


def test_continue_and_session_together_are_refused(faux: FauxProvider, home: dict[str, str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run(faux, home, "-c", "--session", "x.jsonl", "hi")
    assert exit_info.value.code == 2


def test_two_processes_continue_one_conversation_and_its_model_over_http(home: dict[str, str], tmp_path: Path) -> None:
    with ScriptedServer() as server:
        server.reply(chat_text("Paris."))
        server.reply(chat_text("About 2 million."))
        for argv in (["--model", "m1", "-v", "-s", "Be brief.", "Capital of France?"], ["-c", "Its population?"]):
            process = piagent_process(home, "--base-url", f"{server.url}/v1", *argv)
            assert process.returncode == 0, process.stderr
        second = server.requests[1].json["messages"]
    assert server.requests[1].json["model"] == "m1"  # the continued session's model, without --model
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[0]["content"] == "Be brief." and second[2]["content"] == "Paris."  # its system prompt too


def test_a_bad_compat_flag_is_refused_when_continuing_a_sessions_model(home: dict[str, str]) -> None:
    """``-c`` takes the session's model: a typo in --compat was not even read, let alone refused."""
    with ScriptedServer() as server:
        server.reply(chat_text("Paris."))
        runs = []
        for argv in (["--model", "m1", "Capital of France?"], ["-c", "--compat", "supports_null_contnet=true", "Why?"]):
            runs.append(piagent_process(home, "--base-url", f"{server.url}/v1", *argv))
        assert runs[0].returncode == 0, runs[0].stderr
        assert runs[1].returncode == 2 and len(server.requests) == 1
    assert "did you mean 'supports_null_content'?" in runs[1].stderr


def test_a_torn_last_line_is_reported_on_stderr_without_v(home: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "torn.jsonl"
    JsonlSession(path).append_message(UserMessage("Capital of France?"))
    with open(path, "ab") as file:
        file.write(b'{"type":"message","id":"ab')  # a writer killed mid-line
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PIAGENT_MODEL"}
    env.update(home)
    with ScriptedServer() as server:
        server.reply(chat_text("Paris."))
        process = subprocess.run(
            [sys.executable, "-m", "piagent", "--base-url", f"{server.url}/v1", "-m", "m1"]
            + ["--session", str(path), "And?"],
            capture_output=True,
            text=True,
            env=env,
            timeout=WAIT,
        )
    assert process.returncode == 0 and process.stdout == "Paris.\n", process.stderr
    assert f"piagent: {path}: skipped a torn last line (26 bytes)" in process.stderr
    assert [m.role for m in JsonlSession(path).messages()] == ["user", "user", "assistant"]


def test_a_run_on_a_session_another_agent_is_writing_is_refused_in_a_word(home: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "busy.jsonl"
    session = JsonlSession(path)
    session.append_message(UserMessage("Capital of France?"))
    before = path.read_bytes()
    release = session.begin_run()  # another agent's run, in progress
    try:
        with ScriptedServer() as server:
            process = subprocess.run(
                [sys.executable, "-m", "piagent", "--base-url", f"{server.url}/v1", "-m", "m1"]
                + ["--session", str(path), "And Italy?"],
                capture_output=True,
                text=True,
                env=dict(os.environ, **home),
                timeout=WAIT,
            )
            assert server.requests == []
    finally:
        release()
    assert process.returncode == 1 and process.stdout == ""
    assert process.stderr == (
        f"piagent: session {path} is being written by another agent's run (one agent writes a session at a time): "
        "try again once that run has ended\n"
    )
    assert path.read_bytes() == before


def test_continuing_a_base_url_session_without_its_address_is_a_usage_error_that_changes_nothing(
    home: dict[str, str],
) -> None:
    """The session records no server address: the command says to pass --base-url (or --model) and never
    switches to its default model on its own; given --base-url again, the session's model is asked there."""

    def piagent(*argv: str) -> subprocess.CompletedProcess[str]:
        return piagent_process(home, *argv)

    with ScriptedServer() as server:
        url = f"{server.url}/v1"
        server.reply(chat_text("Hi."))
        assert piagent("--base-url", url, "-m", "ollama:llama3.2", "Hi").returncode == 0
        (path,) = Path(session_dir(os.getcwd(), home)).glob("*.jsonl")
        before = path.read_bytes()

        refused = piagent("-v", "-c", "Again")
        assert refused.returncode == 2 and refused.stdout == ""
        assert "the session's model ollama:llama3.2 is not in the catalogue" in refused.stderr
        assert "pass --base-url URL to continue with it there" in refused.stderr and "--model" in refused.stderr
        assert path.read_bytes() == before and len(server.requests) == 1

        server.reply(chat_text("Again."))
        continued = piagent("-c", "--base-url", url, "Again")
        assert continued.returncode == 0 and continued.stdout == "Again.\n", continued.stderr
        assert server.requests[1].json["model"] == "llama3.2"
    changes = [(e["provider"], e["modelId"]) for e in JsonlSession(path).entries() if e["type"] == "model_change"]
    assert changes == [("ollama", "llama3.2")]


def test_continuing_a_base_url_session_applies_the_compat_flags_given(home: dict[str, str]) -> None:
    """``-c --base-url URL --compat K=V`` asks the session's model there with those flags (they were checked,
    then dropped); ``-c --compat K=V`` without --base-url is refused, naming --base-url."""

    def piagent(*argv: str) -> subprocess.CompletedProcess[str]:
        return piagent_process(home, *argv)

    with ScriptedServer() as server:
        url = f"{server.url}/v1"
        server.reply(chat_text("Hi."))
        assert piagent("--base-url", url, "-m", "ollama:llama3.2", "--max-tokens", "7", "Hi").returncode == 0
        default_field = "max_tokens" if "max_tokens" in server.requests[0].json else "max_completion_tokens"
        other_field = {"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}[default_field]

        server.reply(chat_text("Again."))
        compat = f"max_tokens_field={other_field}"
        continued = piagent("-c", "--base-url", url, "--compat", compat, "--max-tokens", "7", "Again")
        assert continued.returncode == 0, continued.stderr
        sent = server.requests[1].json
        assert sent["model"] == "llama3.2" and sent.get(other_field) == 7 and default_field not in sent

        refused = piagent("-c", "--compat", compat, "Again")
        assert refused.returncode == 2 and "pass --base-url URL" in refused.stderr
        assert len(server.requests) == 2
