"""Every Gemini catalogue family at every thinking level: the exact request, checked against the
official ``google-genai`` SDK; and the finish reasons added in 2026 (CONTINUATION continued)."""

from __future__ import annotations

import functools
import json
import threading
from typing import Any, Optional

import pytest

from piagent.ai import (
    AssistantMessage,
    Context,
    StreamOptions,
    Tool,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    custom_model,
    get_model,
)
from piagent.ai.providers.google import SKIP_SIGNATURE, stream_google
from tests.ai.providers.sdk_oracle import replay_with_sdk
from tests.support.scripted_server import RESET, ScriptedServer, Wait

KEY = "test-gemini-key-0123456789"
TOOL = Tool("lookup", "Look a word up.", {"type": "object", "properties": {"word": {"type": "string"}}})


@pytest.fixture(scope="module")
def server():
    with ScriptedServer() as s:
        yield s


def chunks(*bodies: dict[str, Any]) -> list[bytes]:
    return [f"data: {json.dumps(b)}\n\n".encode() for b in bodies]


def text_chunk(text: str, finish: Optional[str] = "STOP", **candidate: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, **candidate}]}
    if finish:
        body["candidates"][0]["finishReason"] = finish
    body["usageMetadata"] = {"promptTokenCount": 10, "candidatesTokenCount": 2, "thoughtsTokenCount": 3}
    return body


def model_at(server: ScriptedServer, model_id: str) -> Any:
    model = get_model("google", model_id)
    model.base_url = server.url + "/v1beta"
    return model


def send(server, model, context: Optional[Context] = None, **options) -> tuple[dict[str, Any], AssistantMessage]:
    server.reply(chunks(text_chunk("ok")))
    context = context or Context(system_prompt="Be brief.", messages=[UserMessage("Hi", timestamp=1)])
    message = stream_google(model, context, StreamOptions(api_key=KEY, max_tokens=800, **options)).result(10)
    return server.requests[-1].json, message


@functools.cache
def _client(url: str) -> Any:
    from google import genai
    from google.genai import types

    return genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=url, api_version="v1beta"))


def camel(value: Any) -> Any:
    """Keys in lowerCamelCase: the API reads protobuf JSON, where ``thinking_level`` and
    ``thinkingLevel`` are the same field (the SDK sends some nested configs in snake_case)."""
    if isinstance(value, dict):
        return {_camel_key(k): camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [camel(v) for v in value]
    return value


def _camel_key(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def sdk_body(server: ScriptedServer, model_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """The body google-genai sends for the same request (its types reject unknown fields), in
    camelCase; compare with ``camel(body)``."""
    pytest.importorskip("google.genai")
    from google.genai import types

    config = dict(body["generationConfig"])
    for key in ("systemInstruction", "tools", "toolConfig"):
        if key in body:
            config[key] = body[key]
    thinking = config.get("thinkingConfig", {})
    if "thinkingLevel" in thinking:
        assert thinking["thinkingLevel"] in types.ThinkingLevel.__members__
    sdk_config = types.GenerateContentConfig.model_validate(config)
    contents = [types.Content.model_validate(c) for c in body["contents"]]
    client = _client(server.url)
    return camel(
        replay_with_sdk(
            server, lambda: client.models.generate_content_stream(model=model_id, contents=contents, config=sdk_config)
        )
    )


EXPECTED: dict[str, dict[Optional[str], Optional[dict[str, Any]]]] = {
    "gemini-3.8-flash": {  # rejects MINIMAL (400): off and minimal are its lowest level, LOW
        None: {"thinkingLevel": "LOW", "includeThoughts": True},
        "minimal": {"thinkingLevel": "LOW", "includeThoughts": True},
        "low": {"thinkingLevel": "LOW", "includeThoughts": True},
        "medium": {"thinkingLevel": "MEDIUM", "includeThoughts": True},
        "high": {"thinkingLevel": "HIGH", "includeThoughts": True},
        "xhigh": {"thinkingLevel": "HIGH", "includeThoughts": True},
        "max": {"thinkingLevel": "HIGH", "includeThoughts": True},
    },
    "gemini-3.6-flash": {
        None: {"thinkingLevel": "MINIMAL", "includeThoughts": True},
        "minimal": {"thinkingLevel": "MINIMAL", "includeThoughts": True},
    },
    "gemini-3.1-pro-preview": {
        None: {"thinkingLevel": "LOW", "includeThoughts": True},
        "minimal": {"thinkingLevel": "LOW", "includeThoughts": True},
        "medium": {"thinkingLevel": "MEDIUM", "includeThoughts": True},
    },
    "gemini-4-hydrogen": {  # thinking levels low..xhigh (Google's Gemini 4 Hydrogen guide)
        None: {"thinkingLevel": "LOW", "includeThoughts": True},
        "xhigh": {"thinkingLevel": "XHIGH", "includeThoughts": True},
    },
    "gemini-4-argon": {  # LOW, MEDIUM, HIGH only (Google's Gemini 4 Argon guide): no XHIGH
        None: {"thinkingLevel": "LOW", "includeThoughts": True},
        "xhigh": {"thinkingLevel": "HIGH", "includeThoughts": True},
        "max": {"thinkingLevel": "HIGH", "includeThoughts": True},
    },
    "gemini-2.5-flash-lite": {
        None: {"thinkingBudget": 0},
        "low": {"thinkingBudget": 2048, "includeThoughts": True},
        "max": {"thinkingBudget": 16384, "includeThoughts": True},  # its budgets stop at 24576
    },
}
CASES = [(model_id, level) for model_id, levels in EXPECTED.items() for level in levels]


@pytest.mark.parametrize("model_id, level", CASES)
def test_each_family_and_level_sends_the_documented_thinking_config(server, model_id, level):
    body, _ = send(server, model_at(server, model_id), reasoning=level)
    assert body["generationConfig"].get("thinkingConfig") == EXPECTED[model_id][level]
    assert "thinkingBudget" not in json.dumps(body) or model_id.startswith("gemini-2")
    assert sdk_body(server, model_id, body) == camel(body)


def test_a_call_made_by_another_model_carries_the_skip_signature_on_every_model_that_requires_signatures(server):
    history = [
        UserMessage("Look up 'cat'", timestamp=1),
        AssistantMessage([ToolCall("c1", "lookup", {"word": "cat"})], api="anthropic-messages", provider="x"),
        ToolResultMessage("c1", "lookup", [], timestamp=2),
    ]
    context = Context(messages=history, tools=[TOOL])
    for model_id in ("gemini-4-argon", "gemini-3.5-flash"):
        body, _ = send(server, model_at(server, model_id), context)
        call = body["contents"][1]["parts"][0]
        assert call["thoughtSignature"] == SKIP_SIGNATURE
        assert sdk_body(server, model_id, body) == camel(body)
    body, _ = send(server, model_at(server, "gemini-2.5-flash-lite"), context)
    assert "thoughtSignature" not in body["contents"][1]["parts"][0]


def test_an_unknown_gemini_id_is_driven_like_its_family(server):
    body, _ = send(server, model_at(server, "gemini-3.9-flash"), reasoning="low")
    assert body["generationConfig"]["thinkingConfig"] == {"thinkingLevel": "LOW", "includeThoughts": True}


def test_continuation_is_continued_into_the_same_message(server):
    model = model_at(server, "gemini-3.8-flash")
    server.reply(chunks(text_chunk("Part one, ", finish="CONTINUATION", continuationToken="dG9rZW4=")))
    server.reply(chunks(text_chunk("part two.")))
    before = len(server.requests)
    context = Context(messages=[UserMessage("Write", timestamp=1)])
    message = stream_google(model, context, StreamOptions(api_key=KEY)).result(10)
    assert message.stop_reason == "stop" and message.text == "Part one, part two."
    first, second = (r.json for r in server.requests[before:])
    assert "continuationToken" not in first and second["continuationToken"] == "dG9rZW4="
    assert second["contents"] == first["contents"]
    # both requests' counts, the thoughts (3 each) included in output and counted apart
    assert message.usage.input == 20 and message.usage.output == 10 and message.usage.reasoning == 6


def test_a_continued_answer_costs_each_request_at_its_own_price_tier(server):
    """Every request of a continued answer is billed on its own: two 150K-token prompts to
    Gemini 3.1 Pro both stay under its 200K tier, though their sum does not."""
    model = model_at(server, "gemini-3.1-pro-preview")
    meta = {"usageMetadata": {"promptTokenCount": 150_000, "candidatesTokenCount": 1000}}
    server.reply(chunks({**text_chunk("One, ", finish="CONTINUATION", continuationToken="dA=="), **meta}))
    server.reply(chunks({**text_chunk("two."), **meta}))
    message = stream_google(model, Context(messages=[UserMessage("Write")]), StreamOptions(api_key=KEY)).result(10)
    assert message.stop_reason == "stop" and message.usage.input == 300_000
    base = model.cost  # 2 / 12 USD per million below 200K input tokens, 4 / 18 above
    assert message.usage.cost.input == pytest.approx(300_000 * base.input / 1e6)
    assert message.usage.cost.output == pytest.approx(2000 * base.output / 1e6)
    assert message.usage.cost.total == pytest.approx(message.usage.cost.input + message.usage.cost.output)


@pytest.mark.parametrize(
    "reason, words",
    [
        ("MISSING_THOUGHT_SIGNATURE", "thought signature"),
        ("TOO_MANY_TOOL_CALLS", "too many tool calls"),
        ("MALFORMED_RESPONSE", "malformed response"),
        ("CONTINUATION", "incomplete"),  # without a token there is nothing to continue with
    ],
)
def test_new_finish_reasons_end_with_a_clear_message(server, reason, words):
    server.reply(chunks(text_chunk("x", finish=reason)))
    model = model_at(server, "gemini-3.8-flash")
    message = stream_google(model, Context(messages=[UserMessage("Hi")]), StreamOptions(api_key=KEY)).result(10)
    assert message.stop_reason == "error" and words in message.error_message and reason in message.error_message


def stream_until_cut(
    server: ScriptedServer, model: Any, first: list[bytes], reset: bool
) -> tuple[threading.Event, Any]:
    """Start a stream whose first response sends ``first``, then either ends there or (``reset``)
    waits for the returned event and drops the connection; returns ``(event, stream)``."""
    read = threading.Event()
    server.reply(first + ([Wait(read), RESET] if reset else []))
    return read, stream_google(model, Context(messages=[UserMessage("Write")]), StreamOptions(api_key=KEY))


def finish(read: threading.Event, stream: Any, last_text: str) -> Any:
    """Consume ``stream``, letting the connection drop once ``last_text`` was delivered; the final message."""
    for event in stream:
        if event.delta == last_text:
            read.set()
    return stream.result(10)


@pytest.mark.parametrize("reset", [True, False])
def test_a_stream_that_breaks_off_after_a_checkpoint_is_resumed_from_its_newest_token(server, reset):
    """A long decode's chunks carry checkpoint continuationTokens (finishReason still unset); when
    the connection drops (or the stream just ends) the request is sent again with the newest one
    and the answer goes on in the same message, as the official SDK does."""
    model = model_at(server, "gemini-3.8-flash")
    first = chunks(
        text_chunk("Intro. ", finish=None),
        text_chunk("Checkpoint one. ", finish=None, continuationToken="Y2twMQ=="),
        text_chunk("Checkpoint two. ", finish=None, continuationToken="Y2twMg=="),
    )
    before = len(server.requests)
    read, stream = stream_until_cut(server, model, first, reset)
    server.reply(chunks(text_chunk("Resumed and done.")))
    message = finish(read, stream, "Checkpoint two. ")
    assert message.stop_reason == "stop", message.error_message
    assert message.text == "Intro. Checkpoint one. Checkpoint two. Resumed and done."
    initial, resumed = (r.json for r in server.requests[before:])
    assert "continuationToken" not in initial and resumed == dict(initial, continuationToken="Y2twMg==")
    assert google_sdk_resume_body(server, model, resumed) == camel(resumed)


def test_a_stream_that_breaks_off_before_any_checkpoint_fails_without_a_second_request(server):
    model = model_at(server, "gemini-3.8-flash")
    before = len(server.requests)
    read, stream = stream_until_cut(server, model, chunks(text_chunk("Uncheckpointed ", finish=None)), True)
    read.set()  # drop at once: nothing to wait for
    message = stream.result(10)
    assert message.stop_reason == "error" and "Connection lost" in message.error_message
    assert len(server.requests) == before + 1


def test_a_resumed_request_that_brings_no_new_checkpoint_is_not_resumed_again(server):
    model = model_at(server, "gemini-3.8-flash")
    before = len(server.requests)
    read, stream = stream_until_cut(
        server, model, chunks(text_chunk("A. ", finish=None, continuationToken="Y2twMQ==")), True
    )
    server.reply(chunks(text_chunk("B. ", finish=None)))  # ends without a finish reason nor a new token
    message = finish(read, stream, "A. ")
    assert message.stop_reason == "error" and message.text == "A. B. "
    assert len(server.requests) == before + 2


def google_sdk_resume_body(server: ScriptedServer, model: Any, body: dict[str, Any]) -> dict[str, Any]:
    """The body google-genai sends for the same resumed request (its ``continuation_token``
    config; its own automatic continuation off, so it sends exactly one request), in camelCase."""
    pytest.importorskip("google.genai")
    import base64

    from google.genai import types

    config = types.GenerateContentConfig.model_validate(body["generationConfig"])
    config.continuation_token = base64.b64decode(body["continuationToken"])
    config.automatic_continuation = False
    contents = [types.Content.model_validate(c) for c in body["contents"]]
    client = _client(server.url)
    return camel(
        replay_with_sdk(
            server, lambda: client.models.generate_content_stream(model=model.id, contents=contents, config=config)
        )
    )


def test_continuations_are_bounded(server):
    from piagent.ai.providers.google import MAX_CONTINUATIONS

    for _ in range(MAX_CONTINUATIONS + 1):
        server.reply(chunks(text_chunk("more ", finish="CONTINUATION", continuationToken="dA==")))
    model = model_at(server, "gemini-3.8-flash")
    message = stream_google(model, Context(messages=[UserMessage("Hi")]), StreamOptions(api_key=KEY)).result(10)
    assert message.stop_reason == "error" and f"after {MAX_CONTINUATIONS} continuations" in message.error_message
    assert message.text == "more " * (MAX_CONTINUATIONS + 1)


def test_temperature_is_kept_when_thinking_is_off_as_a_zero_budget_on_a_model_that_rejects_it_while_thinking(server):
    model = custom_model(
        "gemini-custom",
        provider="my-gemini",
        api="google-generative-ai",
        base_url=server.url + "/v1beta",
        capabilities={
            "thinking": "budget",
            "efforts": ["low", "high"],
            "thinking_off": "zero_budget",
            "sampling": "without_thinking",
        },
        register=False,
    )
    body, _ = send(server, model, temperature=0.3)
    assert body["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}
    assert body["generationConfig"]["temperature"] == 0.3
    body, _ = send(server, model, temperature=0.3, reasoning="high")
    assert "temperature" not in body["generationConfig"]


@pytest.mark.parametrize("model_id, ceiling", [("gemini-2.5-flash-lite", 24576)])
def test_no_level_asks_a_gemini_2_5_model_for_a_budget_beyond_its_documented_range(server, model_id, ceiling):
    for level in ("minimal", "low", "medium", "high", "xhigh", "max"):
        body, _ = send(server, model_at(server, model_id), reasoning=level)
        assert body["generationConfig"]["thinkingConfig"]["thinkingBudget"] <= ceiling
