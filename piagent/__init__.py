"""piagent: a synchronous, thread-based agent runtime (pi-agent-core's loop, without asyncio)."""

from __future__ import annotations

import logging
import sys
from typing import Any

from ._effects import RecoveryContext, RecoveryDecision, ToolIntent, idempotency_key
from .abort import AbortController, AbortedError, AbortSignal
from .agent import Agent
from .ai.types import (
    AssistantMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    message_from_dict,
)
from .compaction import Compaction, CompactionResult
from .decorator import tool
from .events import (
    AgentEndEvent,
    AgentEvent,
    AgentStartEvent,
    CompactionEndEvent,
    CompactionStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    ModelFallbackEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
    ToolRecoveryEvent,
    TurnEndEvent,
    TurnStartEvent,
    UsageLimitEvent,
)
from .exceptions import (
    AgentBusyError,
    CompactionError,
    InvalidStateError,
    InvalidTypeError,
    InvalidValueError,
    MissingApiKeyError,
    ModelNotFoundError,
    OutputError,
    PiAgentError,
    ProviderError,
    ProviderNotFoundError,
    StreamEndedWithoutResult,
    ToolArgumentsError,
    UsageLimitExceeded,
)
from .executors import run_tool_call
from .limits import LimitReached, UsageGuard, UsageLimits, UsageMeter, UsageTotals
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
    PrepareRequestContext,
    RequestUpdate,
    ToolCallOutcome,
    TurnContext,
    TurnDecision,
    TurnUpdate,
)

# A library never prints on its own: piagent's log records (a failed run's traceback among
# them) go where the application's logging config sends them, and nowhere when it has none.
logging.getLogger("piagent").addHandler(logging.NullHandler())

__version__ = "0.1.0"


def instrument(tracer_provider: Any = None, meter_provider: Any = None, capture_content: bool = False) -> None:
    """Trace and measure every agent run with OpenTelemetry (the ``otel`` extra): see :func:`piagent.otel.instrument`.

    Nothing is traced, and OpenTelemetry is not even imported, until this is called.
    """
    try:
        from .otel import instrument as start
    except ImportError as exc:
        from ._extras import install_command

        raise ImportError(f"piagent.instrument() needs OpenTelemetry's API: {install_command('otel')}") from exc
    start(tracer_provider, meter_provider, capture_content)


def uninstrument() -> None:
    """Undo :func:`instrument` (a no-op if it was never called)."""
    otel = sys.modules.get("piagent.otel")
    if otel is not None:
        otel.uninstrument()


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
    "Compaction",
    "CompactionEndEvent",
    "CompactionError",
    "CompactionResult",
    "CompactionStartEvent",
    "ImageContent",
    "InvalidStateError",
    "InvalidTypeError",
    "InvalidValueError",
    "LimitReached",
    "MessageEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "MissingApiKeyError",
    "ModelFallbackEvent",
    "ModelNotFoundError",
    "OutputError",
    "PiAgentError",
    "PrepareRequestContext",
    "ProviderError",
    "ProviderNotFoundError",
    "RecoveryContext",
    "RecoveryDecision",
    "RequestUpdate",
    "RunResult",
    "StreamEndedWithoutResult",
    "SystemMessage",
    "TextContent",
    "ThinkingContent",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallOutcome",
    "ToolExecutionEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "ToolIntent",
    "ToolRecoveryEvent",
    "ToolResultMessage",
    "TurnContext",
    "TurnDecision",
    "TurnEndEvent",
    "TurnStartEvent",
    "TurnUpdate",
    "Usage",
    "UsageGuard",
    "UsageLimitEvent",
    "UsageLimitExceeded",
    "UsageLimits",
    "UsageMeter",
    "UsageTotals",
    "UserMessage",
    "agent_loop",
    "agent_loop_continue",
    "idempotency_key",
    "instrument",
    "message_from_dict",
    "run_agent_loop",
    "run_agent_loop_continue",
    "run_tool_call",
    "tool",
    "uninstrument",
]
