from __future__ import annotations

import copy

from piagent.ai.transform import IMAGE_PLACEHOLDER, NO_RESULT_TEXT, transform_messages
from piagent.ai.types import (
    AssistantMessage,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

TARGET = Model("target-1", api="openai-completions", provider="acme", input=["text", "image"])
TEXT_ONLY = Model("target-1", api="openai-completions", provider="acme", input=["text"])


def assistant(*content, model=TARGET, stop_reason="stop"):
    return AssistantMessage(
        list(content), api=model.api, provider=model.provider, model=model.id, stop_reason=stop_reason
    )


OTHER = Model("other-9", api="anthropic-messages", provider="anthropic")


def dump(messages):
    return [m.to_dict() for m in messages]


def test_errored_and_aborted_assistant_messages_are_dropped():
    history = [
        UserMessage("hi"),
        assistant(TextContent("partial"), stop_reason="error"),
        assistant(TextContent("cut"), stop_reason="aborted"),
        assistant(TextContent("ok")),
    ]
    out = transform_messages(history, TARGET)
    assert [m.role for m in out] == ["user", "assistant"]
    assert out[1].text == "ok"


def test_tool_call_without_result_before_next_user_gets_synthetic_error_result():
    call = ToolCall("c1", "lookup", {"q": 1})
    history = [UserMessage("go"), assistant(call, stop_reason="toolUse"), UserMessage("next")]
    out = transform_messages(history, TARGET)
    assert [m.role for m in out] == ["user", "assistant", "toolResult", "user"]
    synthetic = out[2]
    assert (synthetic.tool_call_id, synthetic.tool_name, synthetic.is_error) == ("c1", "lookup", True)
    assert synthetic.text == NO_RESULT_TEXT


def test_only_unanswered_calls_get_synthetic_results_and_at_the_end_too():
    history = [
        UserMessage("go"),
        assistant(ToolCall("a", "t"), ToolCall("b", "t"), stop_reason="toolUse"),
        ToolResultMessage("a", "t", [TextContent("A")]),
    ]
    out = transform_messages(history, TARGET)
    assert [(m.role, getattr(m, "tool_call_id", None)) for m in out] == [
        ("user", None),
        ("assistant", None),
        ("toolResult", "a"),
        ("toolResult", "b"),
    ]
    assert out[3].is_error and out[3].text == NO_RESULT_TEXT


def test_unanswered_calls_are_closed_before_the_next_assistant_message():
    history = [assistant(ToolCall("a", "t")), assistant(TextContent("later"))]
    out = transform_messages(history, TARGET)
    assert [m.role for m in out] == ["assistant", "toolResult", "assistant"]


def test_calls_of_a_dropped_aborted_message_need_no_result():
    history = [UserMessage("go"), assistant(ToolCall("a", "t"), stop_reason="aborted")]
    assert [m.role for m in transform_messages(history, TARGET)] == ["user"]


def test_same_model_messages_pass_through_unchanged():
    message = assistant(
        ThinkingContent("hmm", thinking_signature="sig"),
        ThinkingContent("", thinking_signature="opaque", redacted=True),
        TextContent("answer", text_signature="msg_1"),
        ToolCall("c1", "t", {}, thought_signature="ts"),
    )
    history = [UserMessage("q"), message, ToolResultMessage("c1", "t", [TextContent("r")])]
    out = transform_messages(history, TARGET, normalize_tool_call_id=lambda i, m, s: "changed")
    assert out[1] is message


def test_foreign_thinking_becomes_text_and_empty_or_redacted_thinking_is_dropped():
    message = assistant(
        ThinkingContent("step one", thinking_signature="sig"),
        ThinkingContent("   "),
        ThinkingContent("secret", thinking_signature="blob", redacted=True),
        TextContent("answer", text_signature="sig-text"),
        model=OTHER,
    )
    out = transform_messages([message], TARGET)
    assert [b.to_dict() for b in out[0].content] == [
        {"type": "text", "text": "step one"},
        {"type": "text", "text": "answer"},
    ]


def test_foreign_thought_signatures_are_removed():
    out = transform_messages([assistant(ToolCall("c", "t", {"x": 1}, thought_signature="ts"), model=OTHER)], TARGET)
    call = out[0].content[0]
    assert call.thought_signature is None and call.arguments == {"x": 1}


def test_foreign_tool_call_ids_are_normalised_and_results_remapped():
    seen = []

    def normalize(call_id, model, source):
        seen.append((call_id, model.id, source.model))
        return call_id.replace("|", "_")[:8]

    history = [
        UserMessage("q"),
        assistant(ToolCall("call|abc|defgh", "t"), ToolCall("keep", "t"), model=OTHER),
        ToolResultMessage("call|abc|defgh", "t", [TextContent("r")]),
        UserMessage("next"),
    ]
    out = transform_messages(history, TARGET, normalize_tool_call_id=normalize)
    assert [c.id for c in out[1].tool_calls] == ["call_abc", "keep"]
    assert out[2].tool_call_id == "call_abc"
    assert out[3].role == "toolResult" and out[3].tool_call_id == "keep" and out[3].is_error
    assert seen == [("call|abc|defgh", "target-1", "other-9"), ("keep", "target-1", "other-9")]


def test_images_to_a_text_only_model_become_one_placeholder_per_run():
    image = ImageContent("aGk=", "image/png")
    history = [
        UserMessage([TextContent("look"), image, image, TextContent("and"), image]),
        assistant(ToolCall("c", "shot")),
        ToolResultMessage("c", "shot", [image, image]),
    ]
    out = transform_messages(history, TEXT_ONLY)
    assert [b.to_dict() for b in out[0].content] == [
        {"type": "text", "text": "look"},
        {"type": "text", "text": IMAGE_PLACEHOLDER},
        {"type": "text", "text": "and"},
        {"type": "text", "text": IMAGE_PLACEHOLDER},
    ]
    assert [b.text for b in out[2].content] == [IMAGE_PLACEHOLDER]


def test_images_to_a_vision_model_are_kept():
    message = UserMessage([ImageContent("aGk=", "image/png")])
    assert transform_messages([message], TARGET)[0] is message


def test_input_messages_are_never_mutated():
    image = ImageContent("aGk=", "image/png")
    history = [
        UserMessage([image]),
        assistant(ThinkingContent("t", "s"), ToolCall("x|y", "t", {"a": 1}, "ts"), model=OTHER, stop_reason="toolUse"),
        ToolResultMessage("x|y", "t", [image]),
        assistant(TextContent("e"), stop_reason="error"),
    ]
    before = copy.deepcopy(dump(history))
    transform_messages(history, TEXT_ONLY, normalize_tool_call_id=lambda i, m, s: i.replace("|", "_"))
    assert dump(history) == before


def test_application_messages_pass_through():
    class Note:
        role = "notification"

    note = Note()
    assert transform_messages([note], TARGET) == [note]
