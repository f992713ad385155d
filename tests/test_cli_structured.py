"""``piagent --schema FILE.json`` and ``--output-json`` (docs/structured-output.md#the-command-line):
stdout carries only the validated JSON; the answer streams to stderr."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from piagent.cli import main
from piagent.testing import faux_message
from tests.ai.providers.openai_wire import chat_text
from tests.support.scripted_server import ScriptedServer
from tests.test_cli import WAIT, cli_process, run_cli

SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
}


def schema_file(tmp_path: Path) -> str:
    path = tmp_path / "city.json"
    path.write_text(json.dumps(SCHEMA), encoding="utf-8")
    return str(path)


def test_schema_prints_only_the_validated_json_and_streams_the_answer_to_stderr(faux: Any, tmp_path: Path) -> None:
    faux.set_responses([faux_message('{"city": "Paris", "population": "2100000"}')])
    run = run_cli(faux, "--schema", schema_file(tmp_path), "Describe Paris.")
    assert run["code"] == 0, run["err"]
    assert run["out"] == '{"city": "Paris", "population": 2100000}\n'  # validated (coerced), one line
    assert '"population": "2100000"' in run["err"]  # the raw answer streamed as progress
    assert faux.state.requests[0].options.output_format.schema == SCHEMA  # the file's schema, as it is


def test_output_json_accepts_any_json_value(faux: Any) -> None:
    faux.set_responses([faux_message('{"value": [1, "two", null]}')])
    run = run_cli(faux, "--output-json", "Three things.")
    assert (run["code"], run["out"]) == (0, '[1, "two", null]\n')


def test_an_answer_that_never_matches_exits_1_with_nothing_on_stdout(faux: Any, tmp_path: Path) -> None:
    faux.set_responses([faux_message('{"city": "Paris"}')] * 4)  # the first answer and 3 retries
    run = run_cli(faux, "--schema", schema_file(tmp_path), "Describe Paris.")
    assert run["code"] == 1 and run["out"] == ""
    assert "No valid output after 4 answers" in run["err"] and "'population' is a required property" in run["err"]


def test_a_bad_schema_file_is_a_usage_error(faux: Any, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text("{not json", encoding="utf-8")
    listed = tmp_path / "list.json"
    listed.write_text("[]", encoding="utf-8")
    strange = tmp_path / "strange.json"
    strange.write_text('{"type": "strange"}', encoding="utf-8")
    for path, message in [
        (str(tmp_path / "missing.json"), "No such file"),
        (str(broken), "not JSON"),
        (str(listed), "a JSON Schema is an object"),
        (str(strange), "not a valid JSON Schema: 'strange' is not valid"),
    ]:
        run = run_cli(faux, "--schema", path, "?")
        assert run["code"] == 2 and message in run["err"], run["err"]
    assert faux.state.call_count == 0


def test_json_events_carry_the_output_on_agent_end(faux: Any, tmp_path: Path) -> None:
    faux.set_responses([faux_message('{"city": "Lyon", "population": 500000}')])
    run = run_cli(faux, "--json", "--schema", schema_file(tmp_path), "Describe Lyon.")
    assert run["code"] == 0
    events = [json.loads(line) for line in run["out"].splitlines()]
    assert events[-1]["type"] == "agent_end" and events[-1]["output"] == {"city": "Lyon", "population": 500000}


def test_python_m_piagent_schema_against_an_openai_compatible_server(tmp_path: Path) -> None:
    with ScriptedServer() as server:
        server.reply(chat_text('{"city": "Ro', 'me", "population": 2800000}'))
        process = cli_process(
            "--base-url", f"{server.url}/v1", "--model", "m1", "--schema", schema_file(tmp_path), "Rome?"
        )
        out, err = process.communicate(timeout=WAIT)
        assert process.returncode == 0, err
        assert out == '{"city": "Rome", "population": 2800000}\n'
        sent = server.requests[0].json["response_format"]
        assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "output"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_an_interactive_session_refuses_a_schema(faux: Any, tmp_path: Path) -> None:
    err = io.StringIO()
    argv = ["--no-session", "--schema", schema_file(tmp_path)]
    code = main(argv, stdin=Terminal(), stdout=io.StringIO(), stderr=err, model=faux.get_model())
    assert code == 2 and "answer one prompt" in err.getvalue()


def test_a_non_finite_number_is_never_printed_as_json(faux: Any) -> None:
    faux.set_responses(
        [faux_message('{"value": NaN}'), faux_message('{"value": 1e999999}'), faux_message('{"value": 1}')]
    )
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["--no-session", "--output-json", "q"], stdin=io.StringIO(), stdout=out, stderr=err, model=faux.get_model()
    )
    assert code == 0 and out.getvalue() == "1\n"
    assert err.getvalue().count("root: the answer is not JSON") == 2
