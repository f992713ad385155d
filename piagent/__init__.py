"""piagent: a synchronous, thread-based agent runtime (pi-agent-core's loop, without asyncio)."""

from __future__ import annotations

from .abort import AbortController, AbortedError, AbortSignal
from .agent import Agent
from .ai.types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    message_from_dict,
)
from .decorator import tool
from .events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    TurnEndEvent,
    TurnStartEvent,
)
from .exceptions import (
    AgentBusyError,
    InvalidStateError,
    MissingApiKeyError,
    ModelNotFoundError,
    PiAgentError,
    ProviderNotFoundError,
    StreamEndedWithoutResult,
    ToolArgumentsError,
)
from .loop import agent_loop, agent_loop_continue, run_agent_loop, run_agent_loop_continue
from .options import AgentOptions
from .result import RunResult
from .state import AgentState
from .types import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentTool,
    AgentToolResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    TurnContext,
    TurnUpdate,
)

__version__ = "0.1.0"

__all__ = [
    "AbortController",
    "AbortSignal",
    "AbortedError",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "Agent",
    "AgentBusyError",
    "AgentContext",
    "AgentEndEvent",
    "AgentEvent",
    "AgentLoopConfig",
    "AgentOptions",
    "AgentStartEvent",
    "AgentState",
    "AgentTool",
    "AgentToolResult",
    "AssistantMessage",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "ImageContent",
    "InvalidStateError",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "MissingApiKeyError",
    "ModelNotFoundError",
    "PiAgentError",
    "ProviderNotFoundError",
    "RunResult",
    "StreamEndedWithoutResult",
    "TextContent",
    "ThinkingContent",
    "ToolArgumentsError",
    "ToolCall",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "ToolResultMessage",
    "TurnContext",
    "TurnEndEvent",
    "TurnStartEvent",
    "TurnUpdate",
    "Usage",
    "UserMessage",
    "agent_loop",
    "agent_loop_continue",
    "message_from_dict",
    "run_agent_loop",
    "run_agent_loop_continue",
    "tool",
]
