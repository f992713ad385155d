"""read_file / write_file / list_dir: confined to their root, clear errors, bounded output."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from piagent import (
    AbortController,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    ToolResultMessage,
    UserMessage,
    run_agent_loop,
)
from piagent.testing import faux_message, faux_tool_call, register_faux_provider
from piagent.tools import file_tools, list_dir, read_file, write_file


def call(t: AgentTool, **args: Any) -> str:
    """Execute ``t`` as the loop would (validated args already), returning its text."""
    result = t.execute("call-1", args, AbortController().signal, lambda partial: None)
    return "".join(block.text for block in result.content)


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """root/ with notes.txt and sub/deep.txt; a secret file beside root, outside it."""
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("line 1\nline 2\nline 3\n")
    (root / "sub" / "deep.txt").write_text("deep\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    return {"root": root, "secret": secret, "outside": tmp_path}


class TestConfinement:
    @pytest.mark.parametrize("path", ["../secret.txt", "sub/../../secret.txt", "..", "sub/../.."])
    def test_dot_dot_escaping_the_root_is_refused(self, tree: dict[str, Path], path: str) -> None:
        with pytest.raises(PermissionError, match="outside the allowed directory"):
            call(read_file(tree["root"]), path=path)

    def test_absolute_path_outside_the_root_is_refused(self, tree: dict[str, Path]) -> None:
        with pytest.raises(PermissionError, match="outside the allowed directory"):
            call(read_file(tree["root"]), path=str(tree["secret"]))
        with pytest.raises(PermissionError):
            call(list_dir(tree["root"]), path="/")

    def test_absolute_path_inside_the_root_is_allowed(self, tree: dict[str, Path]) -> None:
        assert call(read_file(tree["root"]), path=str(tree["root"] / "sub" / "deep.txt")) == "deep\n"

    def test_dot_dot_that_stays_inside_is_allowed(self, tree: dict[str, Path]) -> None:
        assert call(read_file(tree["root"]), path="sub/../notes.txt").startswith("line 1")

    def test_symlink_pointing_out_of_the_root_is_refused(self, tree: dict[str, Path]) -> None:
        (tree["root"] / "link.txt").symlink_to(tree["secret"])
        (tree["root"] / "linkdir").symlink_to(tree["outside"], target_is_directory=True)
        with pytest.raises(PermissionError):
            call(read_file(tree["root"]), path="link.txt")
        with pytest.raises(PermissionError):
            call(read_file(tree["root"]), path="linkdir/secret.txt")
        with pytest.raises(PermissionError):
            call(list_dir(tree["root"]), path="linkdir")
        with pytest.raises(PermissionError):
            call(write_file(tree["root"]), path="link.txt", content="overwritten")
        assert tree["secret"].read_text() == "top secret\n"

    def test_symlink_inside_the_root_is_followed(self, tree: dict[str, Path]) -> None:
        (tree["root"] / "alias.txt").symlink_to(tree["root"] / "sub" / "deep.txt")
        assert call(read_file(tree["root"]), path="alias.txt") == "deep\n"

    def test_root_given_through_a_symlink_still_works(self, tree: dict[str, Path], tmp_path: Path) -> None:
        alias = tmp_path / "alias-root"
        alias.symlink_to(tree["root"], target_is_directory=True)
        assert call(read_file(alias), path="notes.txt").startswith("line 1")
        with pytest.raises(PermissionError):
            call(read_file(alias), path="../secret.txt")

    def test_write_outside_the_root_creates_nothing(self, tree: dict[str, Path]) -> None:
        with pytest.raises(PermissionError):
            call(write_file(tree["root"]), path="../evil/new.txt", content="x")
        assert not (tree["outside"] / "evil").exists()

    def test_missing_root_is_refused_at_construction(self, tmp_path: Path) -> None:
        with pytest.raises(ValueError, match="not an existing directory"):
            read_file(tmp_path / "missing")


class TestReadFile:
    def test_reads_text(self, tree: dict[str, Path]) -> None:
        assert call(read_file(tree["root"]), path="notes.txt") == "line 1\nline 2\nline 3\n"

    def test_offset_and_limit_select_lines_and_say_how_to_read_on(self, tree: dict[str, Path]) -> None:
        text = call(read_file(tree["root"]), path="notes.txt", offset=2, limit=1)
        assert text == "line 2\n\n\n[Showing lines 2-2; use offset=3 to read on]"

    def test_offset_past_the_end_is_an_error(self, tree: dict[str, Path]) -> None:
        with pytest.raises(ValueError, match="offset 9 is beyond the end of notes.txt"):
            call(read_file(tree["root"]), path="notes.txt", offset=9)

    def test_long_file_is_truncated_with_a_note(self, tree: dict[str, Path]) -> None:
        (tree["root"] / "big.txt").write_text("".join(f"row {i:04d}\n" for i in range(1000)))
        text = call(read_file(tree["root"], max_bytes=100), path="big.txt")
        assert text.startswith("row 0000\nrow 0001\n")
        assert text.endswith("[Output truncated at 100 bytes: showing lines 1-11; use offset=12 to read on]")

    def test_missing_file_and_directory_give_clear_errors(self, tree: dict[str, Path]) -> None:
        with pytest.raises(FileNotFoundError, match="File not found: nope.txt"):
            call(read_file(tree["root"]), path="nope.txt")
        with pytest.raises(IsADirectoryError, match="sub is a directory"):
            call(read_file(tree["root"]), path="sub")

    def test_binary_file_is_refused(self, tree: dict[str, Path]) -> None:
        (tree["root"] / "blob.bin").write_bytes(b"\x00\x01\x02")
        with pytest.raises(ValueError, match="binary"):
            call(read_file(tree["root"]), path="blob.bin")


class TestWriteFile:
    def test_writes_and_creates_parents(self, tree: dict[str, Path]) -> None:
        message = call(write_file(tree["root"]), path="new/dir/out.txt", content="héllo")
        assert message == f"Wrote 6 bytes to {os.path.join('new', 'dir', 'out.txt')}"
        assert (tree["root"] / "new" / "dir" / "out.txt").read_text(encoding="utf-8") == "héllo"

    def test_overwrites(self, tree: dict[str, Path]) -> None:
        call(write_file(tree["root"]), path="notes.txt", content="new")
        assert (tree["root"] / "notes.txt").read_text() == "new"

    def test_directory_target_is_refused(self, tree: dict[str, Path]) -> None:
        with pytest.raises(IsADirectoryError):
            call(write_file(tree["root"]), path="sub", content="x")


class TestListDir:
    def test_lists_sorted_with_directories_marked(self, tree: dict[str, Path]) -> None:
        assert call(list_dir(tree["root"])) == "notes.txt\nsub/"
        assert call(list_dir(tree["root"]), path="sub") == "deep.txt"

    def test_empty_directory_and_truncation(self, tree: dict[str, Path]) -> None:
        (tree["root"] / "empty").mkdir()
        assert call(list_dir(tree["root"]), path="empty") == "(empty directory)"
        many = tree["root"] / "many"
        many.mkdir()
        for i in range(5):
            (many / f"f{i}").write_text("")
        assert (
            call(list_dir(tree["root"], max_entries=2), path="many") == "f0\nf1\n\n[Truncated: showing 2 of 5 entries]"
        )

    def test_file_is_not_a_directory(self, tree: dict[str, Path]) -> None:
        with pytest.raises(NotADirectoryError, match="notes.txt is not a directory"):
            call(list_dir(tree["root"]), path="notes.txt")


def test_file_tools_gives_the_three_tools_or_the_readers(tree: dict[str, Path]) -> None:
    assert [t.name for t in file_tools(tree["root"])] == ["read_file", "list_dir", "write_file"]
    assert [t.name for t in file_tools(tree["root"], read_only=True)] == ["read_file", "list_dir"]


def test_refused_path_reaches_the_model_as_an_error_result(tree: dict[str, Path]) -> None:
    faux = register_faux_provider()
    try:
        faux.set_responses([faux_message([faux_tool_call("read_file", {"path": "../secret.txt"})]), faux_message("ok")])
        messages = run_agent_loop(
            [UserMessage("read it")],
            AgentContext(tools=file_tools(tree["root"])),
            AgentLoopConfig(model=faux.get_model()),
            lambda event: None,
        )
    finally:
        faux.unregister()
    (result,) = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert result.is_error
    assert result.content[0].text.startswith("Path '../secret.txt' is outside the allowed directory")
    assert "top secret" not in result.content[0].text
