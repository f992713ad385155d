"""Names and value formats of the OpenTelemetry GenAI semantic conventions that piagent emits.

Checked against the conventions' registry (development status) as published in late 2026, see
``docs/observability.md#conventions``. Only names piagent sets are here.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Optional
from urllib.parse import urlsplit

from ..ai.providers._http import HttpStatusError

# span and metric attributes
OPERATION_NAME = "gen_ai.operation.name"
PROVIDER_NAME = "gen_ai.provider.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
REQUEST_TEMPERATURE = "gen_ai.request.temperature"
REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
REQUEST_STREAM = "gen_ai.request.stream"
RESPONSE_ID = "gen_ai.response.id"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
OUTPUT_TYPE = "gen_ai.output.type"
USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_DESCRIPTION = "gen_ai.tool.description"
TOKEN_TYPE = "gen_ai.token.type"
ERROR_TYPE = "error.type"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
HTTP_STATUS_CODE = "http.response.status_code"

# content: recorded only with capture_content=True (JSON strings on spans)
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"

# metrics (histograms) and their advised bucket boundaries
CLIENT_OPERATION_DURATION = "gen_ai.client.operation.duration"
CLIENT_TOKEN_USAGE = "gen_ai.client.token.usage"
CLIENT_TIME_TO_FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
CLIENT_TIME_PER_OUTPUT_CHUNK = "gen_ai.client.operation.time_per_output_chunk"
EXECUTE_TOOL_DURATION = "gen_ai.execute_tool.duration"
INVOKE_AGENT_DURATION = "gen_ai.invoke_agent.duration"
DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
AGENT_DURATION_BUCKETS = [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6]
TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]

# piagent's own (no convention exists for retries)
RETRY_EVENT = "piagent.retry"
RETRY_ATTEMPT = "piagent.retry.attempt"
RETRY_DELAY = "piagent.retry.delay"

# error.type values piagent reports besides HTTP status codes and exception class names
ABORTED = "aborted"
TOOL_ERROR = "tool_error"
OTHER = "_OTHER"

# piagent provider id -> the conventions' well-known gen_ai.provider.name (others pass through)
_PROVIDERS = {
    "azure-openai": "azure.ai.openai",
    "google": "gcp.gemini",
    "mistral": "mistral_ai",
    "xai": "x_ai",
}

# piagent stop reason -> the conventions' finish reason (a refusal is the model's own filter)
_FINISH_REASONS = {"toolUse": "tool_call", "refusal": "content_filter"}


def provider_name(provider: str) -> str:
    return _PROVIDERS.get(provider, provider)


def finish_reason(stop_reason: str) -> str:
    """ "stop", "length", "tool_call", "content_filter" (a refusal), "error", or "aborted" (a custom
    value: the call was cancelled)."""
    return _FINISH_REASONS.get(stop_reason, stop_reason)


@functools.lru_cache(maxsize=64)
def server_attributes(base_url: str) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of a model's base URL (nothing if it has no host); cached:
    the same dict for the same URL, never to be changed."""
    try:
        parts = urlsplit(base_url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return {}
    if not host:
        return {}
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return {SERVER_ADDRESS: host, SERVER_PORT: port}


def error_type(error: BaseException) -> str:
    """An HTTP status code for a provider's status error, else the exception's qualified class name."""
    if isinstance(error, HttpStatusError):
        return str(error.status)
    kind = type(error)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


# --------------------------------------------------------------------------- content


def to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for block in content or ():
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append({"type": "text", "content": block.text})
        elif kind == "thinking":
            parts.append({"type": "reasoning", "content": "" if block.redacted else block.thinking})
        elif kind == "toolCall":
            parts.append({"type": "tool_call", "id": block.id, "name": block.name, "arguments": block.arguments})
        elif kind == "image":
            parts.append({"type": "blob", "modality": "image", "mime_type": block.mime_type, "content": block.data})
    return parts


def message(message: Any) -> Optional[dict[str, Any]]:
    """One piagent message as a convention message (``role`` and ``parts``); None for other kinds."""
    role = getattr(message, "role", None)
    if role == "user":
        return {"role": "user", "parts": _parts(message.content)}
    if role == "assistant":
        return {"role": "assistant", "parts": _parts(message.content)}
    if role == "toolResult":
        response = tool_result_text(message.content)
        return {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": message.tool_call_id, "response": response}],
        }
    return None


def input_messages(messages: Any) -> str:
    return to_json([m for m in (message(item) for item in messages) if m is not None])


def output_messages(assistant: Any) -> str:
    return to_json([{**(message(assistant) or {}), "finish_reason": finish_reason(assistant.stop_reason)}])


def system_instructions(system_prompt: str) -> str:
    return to_json([{"type": "text", "content": system_prompt}])


def tool_definitions(tools: Any) -> str:
    return to_json(
        [{"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters} for t in tools]
    )


def tool_result_text(content: Any) -> str:
    """The text of a tool result's content blocks (images are left out)."""
    return "".join(block.text for block in content or () if getattr(block, "type", None) == "text")
