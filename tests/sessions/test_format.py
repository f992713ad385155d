"""pi's session format: the real pi fixture, migrations, unknown entries kept, bad input, branches and labels."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from piagent.ai.types import UserMessage
from piagent.sessions import (
    CURRENT_VERSION,
    JsonlSession,
    SessionError,
    SessionFormatError,
    StoredMessage,
    convert_to_llm,
)

from .conftest import FIXTURE


def raw_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def write_lines(path: Path, *records: Any) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return path


def header(version: int = 3, **extra: Any) -> dict[str, Any]:
    return {"type": "session", "version": version, "id": "s-1", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/"}


def message_entry(entry_id: str, parent: Any, role: str = "user", text: str = "hi") -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": [{"type": "text", "text": text}], "timestamp": 1}
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": "2026-01-01T00:00:01.000Z",
        "message": message,
    }


# --------------------------------------------------------------------------- the real pi session


def test_the_pi_fixture_loads_every_entry_migrated_to_version_3_with_a_linear_tree() -> None:
    raw = raw_records(FIXTURE)
    session = JsonlSession(FIXTURE)
    entries = session.entries()
    assert session.header["version"] == CURRENT_VERSION and session.id == raw[0]["id"]
    assert len(entries) == len(raw) - 1 == 1002
    assert [e["type"] for e in entries] == [r["type"] for r in raw[1:]]
    assert entries[0]["parentId"] is None
    assert all(entries[i]["parentId"] == entries[i - 1]["id"] for i in range(1, len(entries)))
    roles = [e["message"]["role"] for e in entries if e["type"] == "message"]
    assert (roles.count("assistant"), roles.count("toolResult"), roles.count("user")) == (484, 448, 55)
    assert roles.count("bashExecution") == 3
    assert JsonlSession(FIXTURE).entries() == entries  # the migrated ids are the same on every load
    assert session.branches() == [entries[-1]["id"]]


def test_the_fixture_context_is_the_last_compaction_summary_then_kept_and_later_messages() -> None:
    """Derived independently from the v1 file's indices (pi's firstKeptEntryIndex)."""
    raw = raw_records(FIXTURE)
    last = max(i for i, r in enumerate(raw) if r["type"] == "compaction")
    kept_from = raw[last]["firstKeptEntryIndex"]
    expected = [r["message"] for r in raw[kept_from:last] + raw[last + 1 :] if r["type"] == "message"]

    context = JsonlSession(FIXTURE).context()
    summary, *messages = context.messages
    assert isinstance(summary, StoredMessage) and summary.role == "compactionSummary"
    assert summary.data["summary"] == raw[last]["summary"] and summary.data["tokensBefore"] == raw[last]["tokensBefore"]
    assert [(m.role, m.timestamp) for m in messages] == [(m["role"], m["timestamp"]) for m in expected]
    for message, original in zip(messages, expected):
        if original["role"] in ("user", "assistant", "toolResult"):
            content = original["content"]  # pi leaves its streaming buffer (partialJson) in tool calls
            content = [{k: v for k, v in b.items() if k != "partialJson"} for b in content]
            assert message.to_dict()["content"] == content
        else:
            assert message.data == original  # pi's own roles are kept as they are
    assistants = [r["message"] for r in raw if r["type"] == "message" and r["message"]["role"] == "assistant"]
    assert context.model == (assistants[-1]["provider"], assistants[-1]["model"])
    assert context.thinking_level == [r for r in raw if r["type"] == "thinking_level_change"][-1]["thinkingLevel"]


def test_the_model_sees_pi_summaries_and_bash_executions_as_user_messages() -> None:
    raw = raw_records(FIXTURE)
    messages = JsonlSession(FIXTURE).messages()
    llm = convert_to_llm(messages)
    first = llm[0]
    assert isinstance(first, UserMessage)
    assert first.content[0].text.startswith(
        "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
    )
    assert first.content[0].text.endswith("\n</summary>")
    bash = next(r["message"] for r in raw if r["type"] == "message" and r["message"]["role"] == "bashExecution")
    (converted,) = convert_to_llm([StoredMessage(bash)])
    text = converted.content[0].text
    assert text.startswith(f"Ran `{bash['command']}`\n") and converted.timestamp == bash["timestamp"]
    assert convert_to_llm([StoredMessage(dict(bash, excludeFromContext=True))]) == []
    assert convert_to_llm([StoredMessage({"role": "somethingNew", "timestamp": 1})]) == []


def test_appending_to_the_v1_fixture_migrates_it_once_keeping_every_original_byte(pi_session: Path) -> None:
    original = pi_session.read_text(encoding="utf-8").splitlines()
    session = JsonlSession(pi_session)
    before = session.entries()
    session.set_label(before[-1]["id"], "checkpoint")
    lines = pi_session.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(original) + 1
    assert json.loads(lines[0]) == dict(json.loads(original[0]), version=3)
    for old, new in zip(original[1:], lines[1:]):
        record = json.loads(old)
        if record["type"] == "compaction":  # firstKeptEntryIndex became firstKeptEntryId
            assert "firstKeptEntryIndex" not in json.loads(new) and "firstKeptEntryId" in json.loads(new)
        else:
            assert new.startswith(old[:-1] + ',"id":')  # the line as pi wrote it, then the tree fields
    reloaded = JsonlSession(pi_session)
    assert reloaded.entries()[:-1] == before and reloaded.labels() == {before[-1]["id"]: "checkpoint"}
    size = pi_session.stat().st_size
    reloaded.set_label(before[0]["id"], "start")  # now version 3: a plain append
    assert pi_session.read_bytes()[:size] == "\n".join(lines).encode() + b"\n"


def test_a_v2_file_renames_hook_messages_to_custom(tmp_path: Path) -> None:
    hook = message_entry("b", "a", role="hookMessage")
    hook["message"].update(customType="ext", display=True)
    path = write_lines(tmp_path / "v2.jsonl", header(2), message_entry("a", None), hook)
    session = JsonlSession(path)
    assert session.entries()[1]["message"]["role"] == "custom"
    (converted,) = convert_to_llm(session.messages()[1:])
    assert converted.content[0].text == "hi"
    session.append_entry("custom", customType="ext", data={"n": 1})
    assert (
        '"role":"custom"' in path.read_text().splitlines()[2]
        and json.loads(path.read_text().splitlines()[0])["version"] == 3
    )


def test_unknown_entry_types_and_roles_are_kept_in_the_tree_and_written_back_unchanged(tmp_path: Path) -> None:
    future = {"type": "hologram", "id": "b", "parentId": "a", "timestamp": "2026-01-01T00:00:02.000Z", "beam": [1.5e-7]}
    odd = message_entry("c", "b", role="telepathy")
    path = write_lines(tmp_path / "s.jsonl", header(), message_entry("a", None), future, odd)
    before = path.read_bytes()
    session = JsonlSession(path)
    assert session.entries()[1] == future and session.entries()[2] == odd
    assert [getattr(m, "role", None) for m in session.messages()] == ["user", "telepathy"]
    session.append_message(UserMessage("next"))
    assert path.read_bytes().startswith(before)
    assert [e["type"] for e in JsonlSession(path).branch()] == ["message", "hologram", "message", "message"]


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ('{"hello": "world"}\n', "not a pi session"),
        ("just some text\n", "line 1: not JSON"),
        ("[1, 2]\n", "line 1: not a JSON object"),
        (json.dumps(header(4)) + "\n", r"version 4 is newer than this piagent reads \(3\)"),
        (json.dumps(header(0)) + "\n", "version must be a positive integer"),
        (json.dumps(header()) + "\n" + json.dumps(header()) + "\n", "a second session header"),
        (json.dumps(header()) + '\n{"type": "message", "parentId": null}\n', "needs a string 'id'"),
    ],
)
def test_a_file_that_is_not_a_readable_session_is_a_clear_error_and_stays_as_it_was(
    tmp_path: Path, content: str, error: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(SessionFormatError, match=error):
        JsonlSession(path)
    assert path.read_text() == content


def test_a_damaged_middle_line_names_the_line_and_nothing_is_written(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "s.jsonl", header(), message_entry("a", None), "{not json", message_entry("b", "a"))
    before = path.read_bytes()
    with pytest.raises(SessionFormatError, match=r"s\.jsonl, line 3: not JSON"):
        JsonlSession(path)
    assert path.read_bytes() == before


def test_a_torn_last_line_is_skipped_with_a_warning_then_cut_off_by_the_next_append(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_lines(tmp_path / "s.jsonl", header(), message_entry("a", None))
    whole = path.read_bytes()
    path.write_bytes(whole + json.dumps(message_entry("b", "a")).encode()[:40])  # a writer killed mid-line
    with caplog.at_level(logging.WARNING, logger="piagent.sessions"):
        session = JsonlSession(path)
    assert [e["id"] for e in session.entries()] == ["a"]
    assert "skipped a torn last line (40 bytes)" in caplog.text
    new_id = session.append_message(UserMessage("again"))
    assert path.read_bytes().startswith(whole)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="piagent.sessions"):
        assert [e["id"] for e in JsonlSession(path).entries()] == ["a", new_id]
    assert caplog.text == ""


def test_a_last_line_missing_only_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(header()) + "\n" + json.dumps(message_entry("a", None)))
    session = JsonlSession(path)
    assert [e["id"] for e in session.entries()] == ["a"]
    session.append_message(UserMessage("b"))
    assert len(path.read_text().splitlines()) == 3 and len(JsonlSession(path).entries()) == 2


def test_a_parent_that_points_nowhere_starts_its_branch_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_lines(tmp_path / "s.jsonl", header(), message_entry("a", None), message_entry("b", "gone", text="x"))
    with caplog.at_level(logging.WARNING, logger="piagent.sessions"):
        session = JsonlSession(path)
    assert "entry b follows gone, which is not in the session" in caplog.text
    assert [e["id"] for e in session.branch()] == ["b"]
    assert sorted(session.branches()) == ["a", "b"]


def test_a_cycle_of_parents_is_an_error_not_a_hang(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "s.jsonl", header(), message_entry("a", "b"), message_entry("b", "a"))
    with pytest.raises(SessionFormatError, match="its own ancestor"):
        JsonlSession(path).messages()


def test_a_directory_or_a_bad_argument_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SessionError, match="is a directory"):
        JsonlSession(tmp_path)
    session = JsonlSession(tmp_path / "new.jsonl")
    with pytest.raises(ValueError, match="no entry 'nope'"):
        session.fork("nope")
    with pytest.raises(ValueError, match="set by the session"):
        session.append_entry("custom", id="mine")
    with pytest.raises(TypeError, match="give it a to_dict"):
        session.append_message(object())
    assert not (tmp_path / "new.jsonl").exists()


# --------------------------------------------------------------------------- tree


def test_fork_continues_from_an_earlier_entry_and_the_old_branch_stays(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = JsonlSession(path)
    first = session.append_message(UserMessage("one"))
    second = session.append_message(UserMessage("two"))
    session.fork(first)
    third = session.append_message(UserMessage("three"))
    reloaded = JsonlSession(path)
    assert reloaded.leaf_id == third and reloaded.branches() == [second, third]
    assert [m.content for m in reloaded.messages()] == ["one", "three"]
    assert [m.content for m in reloaded.messages(second)] == ["one", "two"]
    reloaded.fork(None)
    root = reloaded.append_message(UserMessage("fresh start"))
    assert JsonlSession(path).entry(root)["parentId"] is None


def test_labels_are_set_cleared_and_survive_a_reload(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    session = JsonlSession(path)
    a = session.append_message(UserMessage("a"))
    b = session.append_message(UserMessage("b"))
    session.set_label(a, "start")
    session.set_label(b, "end")
    session.set_label(b, None)
    session.append_entry("session_info", name="  My chat ")
    reloaded = JsonlSession(path)
    assert reloaded.labels() == {a: "start"} and reloaded.name == "My chat"
    assert "label" not in reloaded.entries()[-2]  # a cleared label is written as pi writes it


def test_new_entry_ids_avoid_the_sessions_ids_and_those_given_in_the_same_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uuid

    session = JsonlSession(write_lines(tmp_path / "s.jsonl", header(), message_entry("aaaaaaaa", None)))
    drawn = iter(["aaaaaaaa", "bbbbbbbb", "bbbbbbbb", "cccccccc"])  # an id of the session's, then one twice
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(next(drawn) * 4))
    from piagent._effects import ToolIntent

    intents = [ToolIntent(call_id, "noop", {}, 1.0, "host:1", call_id) for call_id in ("one", "two")]
    session.record_intents(intents)  # one append of two entries
    assert [entry["id"] for entry in session.entries()] == ["aaaaaaaa", "bbbbbbbb", "cccccccc"]
