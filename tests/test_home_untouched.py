"""Tests never touch the user's home: every test runs with a temporary ``HOME`` (the root
conftest.py), so a command a test starts, with the environment a user's shell would give it,
keeps its sessions there; and a run that changes the real ``~/.piagent`` fails at its end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ai.providers.openai_wire import chat_text
from tests.support.scripted_server import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
pwd = pytest.importorskip("pwd")  # the user's real home, from the password database (POSIX)


def test_a_test_runs_with_a_temporary_home_and_no_inherited_sessions_directory(tmp_path: Path) -> None:
    home = Path(os.path.expanduser("~")).resolve()
    assert home != Path(pwd.getpwuid(os.getuid()).pw_dir).resolve()  # the user's, from the password database
    assert home.parent == tmp_path.resolve().parent  # in pytest's temporary directory
    assert "PIAGENT_SESSIONS_DIR" not in os.environ


def test_the_command_started_by_a_test_records_its_session_under_the_temporary_home(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "PYTHONPATH": str(ROOT)}  # as a login shell
    with ScriptedServer() as server:
        server.reply(chat_text("Hello."))
        done = subprocess.run(
            [sys.executable, "-m", "piagent", "--base-url", f"{server.url}/v1", "-m", "m1", "Hi"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello."
    recorded = list((home / ".piagent" / "sessions").rglob("*.jsonl"))
    assert len(recorded) == 1 and str(tmp_path).strip("/").replace("/", "-") in recorded[0].parent.name
