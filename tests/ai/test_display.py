"""Messages render as small, escaped HTML in notebooks (``_repr_html_``)."""

from __future__ import annotations

from piagent.ai import display
from piagent.ai.types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

HOSTILE = '<script>alert("x")</script> & <b>bold</b>'


def test_user_text_is_escaped_never_interpreted():
    rendered = UserMessage(HOSTILE)._repr_html_()
    assert "<script>" not in rendered and "<b>bold</b>" not in rendered
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in rendered
    assert rendered.startswith('<div class="piagent-message"') and "<b>user</b>" in rendered


def test_assistant_shows_model_stop_reason_text_thinking_and_tool_calls_escaped():
    message = AssistantMessage(
        [
            ThinkingContent("let me <think>"),
            TextContent("Checking <now>."),
            ToolCall("c1", "get_<weather>", {"city": "<Paris>"}),
        ],
        model="m-1",
        stop_reason="toolUse",
    )
    rendered = message._repr_html_()
    assert "assistant <small>(m-1, toolUse)</small>" in rendered
    assert "<details><summary><i>thinking</i></summary>" in rendered and "let me &lt;think&gt;" in rendered
    assert "Checking &lt;now&gt;." in rendered
    assert "<code>get_&lt;weather&gt;({&quot;city&quot;: &quot;&lt;Paris&gt;&quot;})</code>" in rendered


def test_assistant_error_message_is_shown_and_escaped():
    rendered = AssistantMessage([], stop_reason="error", error_message="HTTP 500: <oops>")._repr_html_()
    assert "HTTP 500: &lt;oops&gt;" in rendered and "error" in rendered


def test_tool_result_names_the_tool_marks_errors_and_names_images():
    ok = ToolResultMessage(
        "c1", "read_file", [TextContent("line <1>"), ImageContent("aGk=", "image/png")]
    )._repr_html_()
    assert "← read_file" in ok and "line &lt;1&gt;" in ok and "[image image/png]" in ok and "aGk=" not in ok
    failed = ToolResultMessage("c1", "read_file", [TextContent("no such file")], is_error=True)._repr_html_()
    assert "<small>(error)</small>" in failed and display._COLORS["error"] in failed


def test_long_text_is_cut_to_keep_the_view_small():
    rendered = UserMessage("x" * (display.MAX_CHARS * 3))._repr_html_()
    assert "x" * (display.MAX_CHARS - 1) + "…" in rendered and "x" * display.MAX_CHARS not in rendered


def test_application_messages_render_by_role_with_their_repr_escaped():
    class Note:
        role = "note"

        def __repr__(self) -> str:
            return "<Note>"

    rendered = display.messages_html([Note(), UserMessage("hi")])
    assert "<b>note</b>" in rendered and "&lt;Note&gt;" in rendered and "hi" in rendered
