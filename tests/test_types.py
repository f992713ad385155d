"""Messages and content blocks: to_dict() in pi's camelCase and message_from_dict() back."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from piagent import AgentLoopConfig, message_from_dict
from piagent.ai import (
    AssistantMessage,
    Cost,
    ImageContent,
    Model,
    StreamOptions,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    content_from_dict,
)


def round_trip(message: Any) -> Any:
    """to_dict -> JSON text -> message_from_dict: what saving and loading a transcript does."""
    return message_from_dict(json.loads(json.dumps(message.to_dict())))


def test_user_message_with_string_content_round_trips() -> None:
    message = UserMessage("hello", timestamp=1700000000123)
    assert message.to_dict() == {"role": "user", "content": "hello", "timestamp": 1700000000123}
    assert round_trip(message) == message


def test_user_message_with_text_and_image_round_trips() -> None:
    message = UserMessage(
        [TextContent("look", text_signature="sig-1"), ImageContent("aGVsbG8=", "image/png")], timestamp=5
    )
    d = message.to_dict()
    assert d["content"] == [
        {"type": "text", "text": "look", "textSignature": "sig-1"},
        {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
    ]
    assert round_trip(message) == message


def _usage() -> Usage:
    return Usage(10, 20, 30, 40, 100, Cost(0.1, 0.2, 0.3, 0.4, 1.0))


def test_assistant_message_with_every_block_type_round_trips() -> None:
    message = AssistantMessage(
        content=[
            ThinkingContent("hmm", thinking_signature="think-sig"),
            ThinkingContent("[redacted]", thinking_signature="opaque", redacted=True),
            TextContent("answer", text_signature='{"id":"msg_1"}'),
            ToolCall("call-1", "echo", {"value": "x", "nested": {"n": [1, 2]}}, thought_signature="thought"),
        ],
        api="openai-responses",
        provider="openai",
        model="mock",
        usage=_usage(),
        stop_reason="toolUse",
        response_id="resp_123",
        response_model="mock-2026-12-01",
        timestamp=42,
    )
    d = message.to_dict()
    assert d["stopReason"] == "toolUse"
    assert (d["responseId"], d["responseModel"]) == ("resp_123", "mock-2026-12-01")
    assert d["usage"] == {
        "input": 10,
        "output": 20,
        "cacheRead": 30,
        "cacheWrite": 40,
        "totalTokens": 100,
        "cost": {"input": 0.1, "output": 0.2, "cacheRead": 0.3, "cacheWrite": 0.4, "total": 1.0},
    }
    assert d["content"] == [
        {"type": "thinking", "thinking": "hmm", "thinkingSignature": "think-sig"},
        {"type": "thinking", "thinking": "[redacted]", "thinkingSignature": "opaque", "redacted": True},
        {"type": "text", "text": "answer", "textSignature": '{"id":"msg_1"}'},
        {
            "type": "toolCall",
            "id": "call-1",
            "name": "echo",
            "arguments": {"value": "x", "nested": {"n": [1, 2]}},
            "thoughtSignature": "thought",
        },
    ]
    assert "errorMessage" not in d
    assert round_trip(message) == message


def test_error_assistant_message_round_trips_its_error_message() -> None:
    message = AssistantMessage(
        content=[TextContent("")], stop_reason="error", error_message="provider exploded", timestamp=7
    )
    d = message.to_dict()
    assert (d["stopReason"], d["errorMessage"]) == ("error", "provider exploded")
    assert "responseId" not in d and "responseModel" not in d
    assert round_trip(message) == message


def test_tool_result_message_round_trips() -> None:
    message = ToolResultMessage(
        "call-1",
        "echo",
        [TextContent("echoed: x"), ImageContent("AAAA", "image/jpeg")],
        details={"value": "x"},
        is_error=True,
        timestamp=9,
    )
    d = message.to_dict()
    assert d["role"] == "toolResult"
    assert (d["toolCallId"], d["toolName"], d["isError"], d["details"]) == ("call-1", "echo", True, {"value": "x"})
    assert d["content"][1] == {"type": "image", "data": "AAAA", "mimeType": "image/jpeg"}
    assert round_trip(message) == message


def test_tool_result_without_details_round_trips() -> None:
    message = ToolResultMessage("call-2", "echo", [TextContent("ok")], timestamp=3)
    assert "details" not in message.to_dict()
    assert message.to_dict()["isError"] is False
    assert round_trip(message) == message


def test_content_blocks_round_trip_one_by_one() -> None:
    for block in (
        TextContent("t"),
        TextContent("t", text_signature="s"),
        ThinkingContent("th"),
        ThinkingContent("th", "sig", True),
        ImageContent("ZGF0YQ==", "image/webp"),
        ToolCall("id", "name", {}),
        ToolCall("id", "name", {"a": 1}, "ts"),
    ):
        assert content_from_dict(json.loads(json.dumps(block.to_dict()))) == block


def test_unknown_role_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="notification"):
        message_from_dict({"role": "notification", "content": "x"})


def test_unknown_content_type_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="video"):
        message_from_dict({"role": "user", "content": [{"type": "video", "url": "x"}], "timestamp": 1})


def test_timestamps_are_integer_epoch_milliseconds() -> None:
    message = UserMessage("now")
    assert isinstance(message.timestamp, int)
    assert message.timestamp > 1_600_000_000_000


@pytest.mark.parametrize(
    "options",
    [
        StreamOptions(api_key="sk-secret-123", headers={"Authorization": "Bearer hdr-secret-456"}),
        AgentLoopConfig(api_key="sk-secret-123", headers={"Authorization": "Bearer hdr-secret-456"}),
    ],
)
def test_the_repr_of_options_never_shows_the_api_key_or_headers(options: Any) -> None:
    text = repr(options) + str(options)
    assert "sk-secret-123" not in text
    assert "hdr-secret-456" not in text
    assert re.search(r"\bapi_key=", text) is None and re.search(r"\bheaders=", text) is None


def test_the_repr_of_a_model_never_shows_its_headers() -> None:
    model = Model("m", headers={"x-api-key": "hdr-secret-789"})
    assert "hdr-secret-789" not in repr(model)
