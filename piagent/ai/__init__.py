"""The LLM layer (pi-ai): messages, streams, providers. It knows nothing about agents."""

from __future__ import annotations

from ._learned import remember_rejections
from .builder import MessageBuilder
from .capabilities import Capabilities, forget_learned
from .env import get_env_api_key
from .fallback import fallback_reason, with_fallbacks
from .json_stream import parse_streaming_json
from .models import (
    catalogue_in_use,
    custom_model,
    get_model,
    get_models,
    get_providers,
    load_catalogue,
    refresh_catalogue,
    register_model,
    unregister_model,
)
from .overflow import is_context_overflow
from .registry import (
    ApiProvider,
    StreamFunction,
    complete,
    complete_simple,
    get_api_provider,
    get_api_providers,
    register_api_provider,
    stream,
    stream_simple,
    unregister_api_provider,
)
from .stream import AssistantMessageEventStream, EventStream
from .tokens import estimate_tokens, reported_context_tokens
from .transcript import current_system_message, current_system_prompt, current_tools
from .types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    Cost,
    CostTier,
    ImageContent,
    Message,
    Model,
    OutputFormat,
    StreamOptions,
    SystemMessage,
    TextContent,
    ThinkingContent,
    Tool,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    content_from_dict,
    message_from_dict,
)
from .validation import validate_json_value, validate_tool_arguments

__all__ = [
    "ApiProvider",
    "AssistantMessage",
    "AssistantMessageEvent",
    "AssistantMessageEventStream",
    "Capabilities",
    "Context",
    "Cost",
    "CostTier",
    "EventStream",
    "ImageContent",
    "Message",
    "MessageBuilder",
    "Model",
    "OutputFormat",
    "StreamFunction",
    "StreamOptions",
    "SystemMessage",
    "TextContent",
    "ThinkingContent",
    "Tool",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "catalogue_in_use",
    "complete",
    "complete_simple",
    "content_from_dict",
    "current_system_message",
    "current_system_prompt",
    "current_tools",
    "custom_model",
    "estimate_tokens",
    "fallback_reason",
    "forget_learned",
    "get_api_provider",
    "get_api_providers",
    "get_env_api_key",
    "get_model",
    "get_models",
    "get_providers",
    "is_context_overflow",
    "load_catalogue",
    "message_from_dict",
    "parse_streaming_json",
    "refresh_catalogue",
    "register_api_provider",
    "register_model",
    "remember_rejections",
    "reported_context_tokens",
    "stream",
    "stream_simple",
    "unregister_api_provider",
    "unregister_model",
    "validate_json_value",
    "validate_tool_arguments",
    "with_fallbacks",
]
