"""piagent.mcp's pure parts (the servers it talks to are tested by ``make test-mcp``)."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

import pytest

import piagent.mcp
from piagent import ImageContent
from piagent.ai.providers._sse import SseFields, iter_sse
from piagent.mcp import MCPToolError
from piagent.mcp._content import OutputCheck, content_from_result
from piagent.mcp._errors import MCPProtocolError
from piagent.mcp._protocol import (
    fill_elicitation_defaults,
    header_params,
    header_value,
    param_headers,
    x_mcp_header_problem,
)


def test_all_is_sorted_and_resolves() -> None:
    assert piagent.mcp.__all__ == sorted(piagent.mcp.__all__)
    assert all(hasattr(piagent.mcp, name) for name in piagent.mcp.__all__)


def test_importing_piagent_does_not_import_the_mcp_client() -> None:
    code = "import sys, piagent, piagent.cli; print('piagent.mcp' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"


def test_the_sse_reader_keeps_id_and_retry_for_mcp_across_any_chunking() -> None:
    stream = b'id: 7\nretry: 500\ndata: \n\nevent: message\nid: 8\ndata: {"a":\ndata: 1}\r\n\r\n: ping\n\ndata: tail'
    for size in (1, 3, len(stream)):
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        fields = SseFields()
        seen = [(fields.last_id, fields.retry, name, data) for name, data in iter_sse(chunks, fields=fields)]
        assert seen == [("7", 500, None, b""), ("8", 500, "message", b'{"a":\n1}'), ("8", 500, None, b"tail")]


def test_an_event_id_counts_once_its_event_is_dispatched() -> None:
    fields = SseFields()
    events = iter_sse([b"id: 1\ndata: a\n\nid: 2\ndata: b\n"], fields=fields)
    assert next(events) == (None, b"a") and fields.last_id == "1"
    assert list(events) == [(None, b"b")] and fields.last_id == "2"  # the stream's end dispatches it


def test_header_values_outside_plain_ascii_use_the_base64_sentinel() -> None:
    assert header_value("get_weather") == "get_weather"
    assert header_value("Hello, 世界") == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert header_value(" padded ") == "=?base64?IHBhZGRlZCA=?="
    assert header_value("=?base64?literal?=") == "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="


def _annotated(prop: dict) -> dict:
    return {"type": "object", "properties": {"p": {**prop, "x-mcp-header": "P"}}}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"p": {"type": "string", "x-mcp-header": "My Region"}}},
        {"type": "object", "properties": {"p": {"type": "string", "x-mcp-header": ""}}},
        {"type": "object", "properties": {"p": {"type": "string", "x-mcp-header": 7}}},
        _annotated({"type": "number"}),
        _annotated({"type": ["string", "null"]}),
        {
            "type": "object",
            "properties": {"a": {"type": "string", "x-mcp-header": "R"}, "b": {"type": "integer", "x-mcp-header": "r"}},
        },
        {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}}},
        {"type": "object", "anyOf": [{"properties": {"p": {"type": "string", "x-mcp-header": "P"}}}]},
        {
            "type": "object",
            "properties": {"p": {"$ref": "#/$defs/d"}},
            "$defs": {"d": {"type": "string", "x-mcp-header": "D"}},
        },
        {"type": "string", "x-mcp-header": "Root"},
    ],
)
def test_x_mcp_header_annotations_that_break_a_rule_are_named(schema: dict) -> None:
    assert x_mcp_header_problem(schema) is not None


def test_param_headers_follow_properties_paths_and_skip_absent_and_null_arguments() -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "dry": {"type": "boolean", "x-mcp-header": "Dry"},
            "gone": {"type": "string", "x-mcp-header": "Gone"},
            "null": {"type": "string", "x-mcp-header": "Null"},
            "where": {"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}},
            "plain": {"type": "string"},
        },
    }
    assert x_mcp_header_problem(schema) is None
    arguments = {"region": "Zürich", "count": 42.0, "dry": False, "null": None, "where": {"zone": "b"}, "plain": "x"}
    assert param_headers(header_params(schema), arguments) == {
        "Mcp-Param-Region": "=?base64?WsO8cmljaA==?=",
        "Mcp-Param-Count": "42",
        "Mcp-Param-Dry": "false",
        "Mcp-Param-Zone": "b",
    }


def test_elicitation_defaults_fill_only_what_was_left_out() -> None:
    schema = {"properties": {"name": {"type": "string", "default": "John"}, "age": {"default": 30}, "x": {}}}
    assert fill_elicitation_defaults({"name": "Ann"}, schema) == {"name": "Ann", "age": 30}
    assert fill_elicitation_defaults(None, {}) == {}


def test_audio_and_blob_resources_become_notes_and_image_blobs_images() -> None:
    result = {
        "content": [
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "x://a", "blob": "AAAA", "mimeType": "application/zip"}},
            {"type": "resource", "resource": {"uri": "x://b", "blob": "AAAA", "mimeType": "image/png"}},
        ]
    }
    audio, blob, image = content_from_result(result, None, structured=True)
    assert audio.text == "[audio audio/wav, 3 bytes: kept in details]"
    assert blob.text == "[resource x://a (application/zip), 3 bytes: kept in details]"
    assert isinstance(image, ImageContent) and image.mime_type == "image/png"


def test_structured_content_is_checked_against_the_output_schema() -> None:
    check = OutputCheck({"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]})
    assert content_from_result({"structuredContent": {"total": 3}}, check, True)[0].text == '{"total": 3}'
    with pytest.raises(MCPProtocolError, match="outputSchema"):
        content_from_result({"structuredContent": {"total": "3"}}, check, True)
    assert content_from_result({"structuredContent": {"total": "3"}}, check, False) == []  # before 2025-06-18


def test_an_output_schema_is_compiled_once_for_all_the_calls_of_its_tool() -> None:
    check = OutputCheck({"type": "object", "properties": {"n": {"type": "integer"}}})
    content_from_result({"structuredContent": {"n": 1}}, check, True)
    validator = check.validator
    for n in range(3):
        content_from_result({"structuredContent": {"n": n}}, check, True)
    assert check.validator is validator


def test_an_invalid_output_schema_fails_the_call_naming_it() -> None:
    with pytest.raises(MCPProtocolError, match="not a valid JSON Schema"):
        content_from_result({"structuredContent": {}}, OutputCheck({"type": 7}), True)


def test_is_error_raises_with_the_servers_text() -> None:
    with pytest.raises(MCPToolError, match="disk full"):
        content_from_result({"isError": True, "content": [{"type": "text", "text": "disk full"}]}, None, True)


def test_an_event_id_in_its_own_chunk_counts_when_the_next_chunk_ends_the_event() -> None:
    fields = SseFields()
    events = iter_sse([b"id: 5\n", b'data: {"a": 1}\n\n'], fields=fields)
    assert next(events) == (None, b'{"a": 1}') and fields.last_id == "5"


def test_a_timeout_that_loses_to_an_answer_being_stored_returns_that_answer() -> None:
    from piagent.mcp._connection import Connection

    class WatchedLock:
        """The request's "unanswered" lock, telling when its caller waits on it without a bound."""

        def __init__(self, lock: Any) -> None:
            self.lock, self.waited_for_good = lock, threading.Event()

        def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
            if timeout == -1:
                self.waited_for_good.set()
            return bool(self.lock.acquire(blocking, timeout))

        def release(self) -> None:
            self.lock.release()

    class HalfAnswering:
        """Claims each request's outcome as an answer's settle() does, and stores it only when told
        (a reader thread can be switched out between the two)."""

        def open(self, sink: Any) -> None:
            self.sink, self.sent = sink, threading.Event()

        def send(self, message: dict, **options: Any) -> None:
            if "id" in message:
                self.pending = self.sink._pending[message["id"]]
                self.unanswered = self.pending._unanswered = WatchedLock(self.pending._unanswered)
                assert self.pending._claimed.acquire(blocking=False)
                self.sent.set()

        def cancel(self, request_id: Any) -> None:
            pass

    transport = HalfAnswering()
    connection = Connection(transport, lambda method, params: None, lambda method, params: {})
    returned: list[Any] = []
    caller = threading.Thread(target=lambda: returned.append(connection.request("tools/call", {}, timeout=0.01)))
    caller.start()
    # timed out, its own settle() refused (the claim is taken): it waits for the answer being stored
    assert transport.sent.wait(5) and transport.unanswered.waited_for_good.wait(5) and not returned
    transport.pending.outcome = {"content": []}
    transport.unanswered.release()
    caller.join(5)
    assert returned == [{"content": []}]
