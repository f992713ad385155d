"""Every exception piagent raises on purpose, in one place.

    PiAgentError
    ├── AgentBusyError (also RuntimeError)      prompt()/continue_()/reset() while a run is active
    ├── InvalidStateError (also RuntimeError)   continue_() with nothing to continue, waits on the run thread
    ├── ProviderNotFoundError (also LookupError) no provider registered for a model's api
    ├── ModelNotFoundError (also LookupError)   unknown "provider:model-id"
    ├── MissingApiKeyError (also ValueError)    no key in options, get_api_key or the environment
    ├── ToolArgumentsError (also ValueError)    tool arguments that fail their schema
    ├── StreamEndedWithoutResult                an event stream ended without a terminal event
    └── SessionError                            a session store cannot be read or written
        ├── SessionFormatError (also ValueError)  not a session, a newer version, a damaged line
        └── SessionBusyError (also TimeoutError)  another writer held the session's lock too long

Model and tool failures are not exceptions: they end a run with an error message in the
transcript (pi's contract). These exceptions are for misuse and for the low-level API.
"""

from __future__ import annotations

__all__ = [
    "AgentBusyError",
    "InvalidStateError",
    "MissingApiKeyError",
    "ModelNotFoundError",
    "PiAgentError",
    "ProviderNotFoundError",
    "SessionBusyError",
    "SessionError",
    "SessionFormatError",
    "StreamEndedWithoutResult",
    "ToolArgumentsError",
]


class PiAgentError(Exception):
    """Base of every exception piagent raises on purpose."""


class AgentBusyError(PiAgentError, RuntimeError):
    """The agent is running; use steer()/follow_up() or wait for it."""


class InvalidStateError(PiAgentError, RuntimeError):
    """The call does not fit the agent's current state."""


class ProviderNotFoundError(PiAgentError, LookupError):
    """No provider is registered for the model's ``api``."""


class ModelNotFoundError(PiAgentError, LookupError):
    """No model in the catalogue matches."""


class MissingApiKeyError(PiAgentError, ValueError):
    """No API key was given and the provider's environment variable is unset."""


class ToolArgumentsError(PiAgentError, ValueError):
    """Tool-call arguments failed their JSON Schema; the message is what the model sees."""


class StreamEndedWithoutResult(PiAgentError):
    """An event stream was ended without a terminal event and without a result."""


class SessionError(PiAgentError):
    """A session store cannot be read or written (see docs/sessions.md)."""


class SessionFormatError(SessionError, ValueError):
    """The stored data is not a session piagent can read; the message names the place."""


class SessionBusyError(SessionError, TimeoutError):
    """Another writer held the session's write lock longer than the lock timeout."""
