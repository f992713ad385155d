"""Untrusted text (the model's answer and thinking, tool names and results, error text, session
listings) never drives the user's terminal: on a terminal, control characters but newline and
tab are shown as ``\\xHH``; ``--json`` escapes every one; piped output carries the text as it came.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

from piagent.cli import main
from piagent.cli.render import terminal_safe
from piagent.testing import faux_message, faux_text, faux_thinking, faux_tool_call

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: sets the clipboard to "rm -rf ~"
TITLE = "\x1b]0;owned\x07"
CLEAR = "\x1b[2J\x1b[H"
CSI_8BIT = "\x9b2J"
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(faux: Any, *argv: str, out: io.StringIO, err: io.StringIO) -> int:
    return main(["--no-session", *argv], stdin=io.StringIO(""), stdout=out, stderr=err, model=faux.get_model())


def test_terminal_safe_keeps_newlines_and_tabs_and_shows_every_other_control_character() -> None:
    text = f"a{CLIPBOARD}b\n\tc{CSI_8BIT}\r\nd\re\x7f"
    shown = terminal_safe(text)
    assert shown == "a\\x1b]52;c;cm0gLXJmIH4=\\x07b\n\tc\\x9b2J\nd\\x0de\\x7f"
    assert not RAW_CONTROL.search(shown)


def test_on_a_terminal_no_escape_sequence_from_the_model_or_its_tools_reaches_the_screen(faux: Any) -> None:
    faux.set_responses(
        [
            faux_message([faux_thinking(f"plan{TITLE}"), faux_tool_call(f"calc{CLEAR}", {"x": CSI_8BIT})]),
            faux_message(f"the answer{CLIPBOARD} ends", stop_reason="error", error_message=f"HTTP 500: {CLEAR}boom"),
        ]
    )
    out, err = Terminal(), Terminal()
    code = run(faux, "--tools", "calculator", "go", out=out, err=err)
    assert code == 1
    screen = out.getvalue() + err.getvalue()
    assert "the answer\\x1b]52;c;cm0gLXJmIH4=\\x07 ends" in out.getvalue()
    assert "plan\\x1b]0;owned\\x07" in err.getvalue()  # thinking
    assert "calc\\x1b[2J\\x1b[H" in err.getvalue()  # the tool's name, in its start and end lines
    assert "HTTP 500: \\x1b[2J\\x1b[Hboom" in err.getvalue()  # the error text
    piagent_styles = re.sub(r"\x1b\[[0-9;]*m", "", screen)  # piagent's own colours only
    assert not RAW_CONTROL.search(piagent_styles)


def test_json_output_escapes_every_control_character_and_parses_back_to_the_same_text(faux: Any) -> None:
    answer = f"x{CLIPBOARD}{CSI_8BIT}\x7fy"
    faux.set_responses([faux_message([faux_text(answer)])])
    out = Terminal()
    assert run(faux, "--json", "go", out=out, err=Terminal()) == 0
    assert not RAW_CONTROL.search(out.getvalue().replace("\n", ""))
    ends = [json.loads(line) for line in out.getvalue().splitlines() if '"agent_end"' in line]
    assert ends[0]["messages"][-1]["content"][0]["text"] == answer


def test_structured_output_escapes_every_control_character_too(faux: Any) -> None:
    faux.set_responses([faux_message(json.dumps({"value": {"a": f"{CSI_8BIT}{CLIPBOARD}"}}))])
    out = Terminal()
    assert run(faux, "--output-json", "go", out=out, err=Terminal()) == 0
    assert not RAW_CONTROL.search(out.getvalue().rstrip("\n"))
    assert json.loads(out.getvalue()) == {"a": f"{CSI_8BIT}{CLIPBOARD}"}


def test_piped_output_carries_the_answer_as_it_came(faux: Any) -> None:
    faux.set_responses([faux_message(f"raw{CLIPBOARD}")])
    out = io.StringIO()
    assert run(faux, "go", out=out, err=io.StringIO()) == 0
    assert out.getvalue() == f"raw{CLIPBOARD}\n"


def test_list_sessions_on_a_terminal_shows_escape_sequences_in_names_and_prompts(
    tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("PIAGENT_SESSIONS_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    from piagent.sessions import session_dir

    directory = Path(session_dir(str(tmp_path)))
    directory.mkdir(parents=True)
    header = {"type": "session", "version": 3, "id": "s1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}
    user = {"role": "user", "content": f"hi{TITLE}", "timestamp": 1}
    lines = [header, {"type": "message", "id": "a", "parentId": None, "message": user}]
    lines.append({"type": "session_info", "id": "b", "parentId": "a", "name": f"n{CLEAR}"})
    (directory / "s1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = Terminal()
    assert main(["--list-sessions"], stdout=out, stderr=Terminal()) == 0
    assert "hi\\x1b]0;owned\\x07" in out.getvalue() and "[n\\x1b[2J\\x1b[H]" in out.getvalue()
    assert not RAW_CONTROL.search(out.getvalue())
