"""The model a resumed session comes back with: the one it names when this process knows it, an
error naming it when not (the session unchanged), and never the placeholder recorded in its place."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from piagent import Agent
from piagent.ai.models import custom_model, unregister_model
from piagent.exceptions import ModelNotFoundError
from piagent.sessions import JsonlSession
from piagent.testing import FauxProvider, faux_message
from tests.ai.providers.openai_wire import chat_text
from tests.support.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parents[2]

# A user's program: "first" starts the session with a model registered by custom_model(); "resume"
# continues it without registering the model; "registered" registers it first, then continues it.
PROGRAM = """
import sys
from piagent import Agent
from piagent.ai import custom_model
from piagent.exceptions import ModelNotFoundError
from piagent.sessions import JsonlSession
mode, path, url = sys.argv[1:4]
if mode != "resume":
    custom_model("m1", base_url=url, provider="vllm")
if mode == "first":
    agent = Agent(model="vllm:m1", system_prompt="Be brief.", session=JsonlSession(path))
    print(agent.prompt("Hello").text)
    sys.exit()
agent = Agent(session=JsonlSession(path))
print("model:", agent.state.model.provider, agent.state.model.id)
try:
    print(agent.prompt("And then?").text)
except ModelNotFoundError as exc:
    print("refused:", exc)
"""


def program(mode: str, path: Path, url: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode, str(path), url],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def model_changes(path: Path) -> list[tuple[str, str]]:
    return [(e["provider"], e["modelId"]) for e in JsonlSession(path).entries() if e["type"] == "model_change"]


def test_a_process_that_does_not_know_the_sessions_model_is_refused_and_the_session_resumes_once_it_is_registered(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.jsonl"
    with ScriptedServer() as server:
        url = f"{server.url}/v1"
        server.reply(chat_text("Hello from the server."))
        assert program("first", path, url) == "Hello from the server.\n"
        before = path.read_bytes()

        refused = program("resume", path, url)
        assert path.read_bytes() == before and len(server.requests) == 1  # nothing recorded, nothing sent
        assert refused.startswith("model: unknown unknown\nrefused: ")
        assert f"session {path} names the model vllm:m1, which this process does not know" in refused
        assert "custom_model('m1', base_url=..., provider='vllm')" in refused and "Agent(model=...)" in refused

        server.reply(chat_text("Then nothing."))
        assert program("registered", path, url) == "model: vllm m1\nThen nothing.\n"
        sent = server.requests[1].json
    assert sent["model"] == "m1"
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "user"]
    assert model_changes(path) == [("vllm", "m1")]  # recorded once, by the first run


def test_the_same_agent_resumes_once_the_model_is_registered_and_every_run_is_refused_until_then(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.jsonl"
    JsonlSession(path).append_model_change("nowhere", "model-x")  # a session another process started
    before = path.read_bytes()
    agent = Agent(session=JsonlSession(path))
    for run in (lambda: agent.prompt("Hi"), agent.continue_, agent.compact):
        with pytest.raises(ModelNotFoundError, match="names the model nowhere:model-x, which this process does not"):
            run()
    assert path.read_bytes() == before and not agent.state.is_streaming
    with ScriptedServer() as server:
        server.reply(chat_text("Hello."))
        custom_model("model-x", base_url=f"{server.url}/v1", provider="nowhere")
        try:
            result = agent.prompt("Hi")
        finally:
            unregister_model("nowhere", "model-x")
        assert result.text == "Hello." and server.requests[0].json["model"] == "model-x"
    assert model_changes(path) == [("nowhere", "model-x")]


def test_the_faux_providers_model_comes_back_in_the_same_process(faux: FauxProvider, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    faux.set_responses([faux_message("one"), faux_message("two")])
    Agent(model=faux.get_model(), session=JsonlSession(path)).prompt("first")
    resumed = Agent(session=JsonlSession(path))
    assert resumed.state.model == faux.get_model()
    assert resumed.prompt("second").text == "two"
    assert model_changes(path) == [("faux", faux.get_model().id)]


def test_a_run_without_a_model_records_none_and_a_later_model_is_the_sessions(
    faux: FauxProvider, tmp_path: Path
) -> None:
    path = tmp_path / "chat.jsonl"
    failed = Agent(session=JsonlSession(path)).prompt("Hi")  # given no model, the session naming none
    assert failed.stop_reason == "error" and (failed.error_message or "").startswith("No model set")
    assert model_changes(path) == [] and JsonlSession(path).context().model is None
    faux.set_responses([faux_message("Hello.")])
    Agent(model=faux.get_model(), session=JsonlSession(path)).prompt("Hi again")
    assert Agent(session=JsonlSession(path)).state.model == faux.get_model()


def test_a_placeholder_an_older_version_recorded_does_not_hide_the_model_before_it(
    faux: FauxProvider, tmp_path: Path
) -> None:
    path = tmp_path / "chat.jsonl"
    session = JsonlSession(path)
    session.append_model_change("faux", faux.get_model().id)
    session.append_model_change("unknown", "unknown")  # what a failed run of an earlier piagent recorded
    assert JsonlSession(path).context().model == ("faux", faux.get_model().id)
    assert Agent(session=JsonlSession(path)).state.model == faux.get_model()
