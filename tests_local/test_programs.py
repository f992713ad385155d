"""The programs a user runs first, on the embedded model, as real processes: the demo, the
``piagent`` command with no key in the environment, the examples."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests_local.conftest import ROOT

WAIT = 300
EXAMPLES = Path(ROOT) / "examples"


def keyless_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k not in ("PIAGENT_MODEL", "HF_TOKEN")}
    env.update(extra)
    return env


def run(argv: list[str], cwd: Any = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=str(cwd), env=keyless_env(**env), capture_output=True, text=True, timeout=WAIT)


def test_the_demo_streams_calls_a_tool_and_takes_a_steering_message() -> None:
    done = run([sys.executable, str(EXAMPLES / "demo.py")])
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "== 1. A streamed answer" in out and "Paris" in out.split("== 2.")[0]
    assert '(calls get_weather {"city": ' in out and "[toolUse]" in out
    assert "result    < " in out and "sunny, 24 °C" in out
    assert "thread 'steerer' queued a steering message" in out
    steer = out.index("user      > Now give the dragon a name.")
    assert out.index("queued a steering message") < steer < out.rindex("assistant <")


def test_piagent_answers_with_the_embedded_model_when_no_key_is_set() -> None:
    done = run([sys.executable, "-m", "piagent", "What is the capital of France?"])
    assert done.returncode == 0, done.stderr
    assert "Paris" in done.stdout and done.stderr == ""


def test_piagent_forced_tool_call_shows_on_stderr(tmp_path: Path) -> None:
    done = run([sys.executable, "-m", "piagent", "--tools", "list_dir", "--tool-choice", "list_dir", "--max-turns", "2",
                "Which files are in this directory?"], cwd=tmp_path)  # fmt: skip
    # the model may call again in the second turn (auto), a well-formed call too: then the turn limit ends the run
    assert done.returncode == 0 or "turn limit reached (--max-turns 2)" in done.stderr, done.stderr
    # the call and its result line (whatever path the small model chose, inside tmp_path)
    assert done.stderr.startswith("→ list_dir({") and ("✓ list_dir (" in done.stderr or "✗ list_dir (" in done.stderr)


def test_piagent_json_lines_on_the_embedded_model() -> None:
    done = run([sys.executable, "-m", "piagent", "--json", "Say hello."])
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == '{"type": "agent_start"}' and '"type": "agent_end"' in lines[-1]


def test_the_script_and_fan_out_examples_run_on_the_embedded_model() -> None:
    script = run([sys.executable, str(EXAMPLES / "script.py"), "How many people live in Japan?"])
    assert script.returncode == 0, script.stderr
    assert "[country_facts {'country': 'Japan'}]" in script.stdout and "124.5 million" in script.stdout
    fan_out = run([sys.executable, str(EXAMPLES / "fan_out.py")])
    assert fan_out.returncode == 0, fan_out.stderr
    assert "What is the capital of Japan? -> " in fan_out.stdout and "Tokyo" in fan_out.stdout
    assert len(fan_out.stdout.splitlines()) == 5


def test_the_django_command_answers_from_the_database_with_the_embedded_model(tmp_path: Path) -> None:
    project = EXAMPLES / "django_project"
    db = str(tmp_path / "db.sqlite3")
    manage = [sys.executable, "manage.py"]
    assert run(manage + ["migrate", "--verbosity", "0"], cwd=project, BOOKSHOP_DB=db).returncode == 0
    create = (
        "from catalog.models import Book; Book.objects.create(title='The Hobbit', author='J. R. R. Tolkien', year=1937)"
    )
    assert run(manage + ["shell", "-c", create], cwd=project, BOOKSHOP_DB=db).returncode == 0
    done = run(manage + ["ask_agent", "Do we have anything by Tolkien?"], cwd=project, BOOKSHOP_DB=db)
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("searching the catalogue: {'query': ") and "\nfound:\n" in done.stderr
    assert done.stdout.strip()  # the model's answer (a 135M model's choice of query and words varies)


def test_piagent_calls_the_forced_tool_of_the_embedded_model_with_well_formed_arguments(tmp_path: Path) -> None:
    done = run([sys.executable, "-m", "piagent", "--tools", "calculator", "--tool-choice", "calculator",
                "--max-turns", "2", "What is 17 * 23?"], cwd=tmp_path)  # fmt: skip
    assert done.stderr.startswith('→ calculator({"expression": "17 * 23"})\n✓ calculator ('), done.stderr
    assert "): 391\n" in done.stderr
    for tag in ("<tool_call>", "</tool_call>", "<|im_start|>", "<|im_end|>"):
        assert tag not in done.stdout and tag not in done.stderr


def test_piagent_verbose_says_the_embedded_model_runs_in_process_from_its_gguf_file(tmp_path: Path) -> None:
    done = run([sys.executable, "-m", "piagent", "-v", "--max-tokens", "8", "Hi"], cwd=tmp_path)
    assert done.returncode in (0, 3), done.stderr
    assert "piagent: model local:smollm2-135m run in process by llama-cpp-python (" in done.stderr
    assert ".gguf)" in done.stderr and "(in process)" not in done.stderr
