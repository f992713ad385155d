"""The typed user program (tests/typed_program.py) runs as written; `.ci/run` type-checks it
under ``mypy --strict``."""

from __future__ import annotations

from tests.typed_program import main


def test_the_typed_user_program_runs_its_tool_hooks_listeners_and_every_prompt_form() -> None:
    seen = main()
    assert "add -> [TextContent(text='5', text_signature=None, type='text')]" in seen
    assert seen.count("assistant (aborted: False)") == 6  # the signal listener saw every assistant message
    start = seen.index("again")
    assert seen[start : start + 3] == ["again", "add faux-1 6 messages", "Be brief. 2"]
    assert seen[-2] == "5 7 error"  # two typed outputs, then a run with no response queued
    assert seen[-1] == "9 11"  # the outputs of an Agent(output_type=Sum)
