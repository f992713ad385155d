"""Every exception piagent raises on purpose, in one place.

    PiAgentError
    ├── AgentBusyError (also RuntimeError)      prompt()/continue_()/reset() while a run is active
    ├── InvalidStateError (also RuntimeError)   continue_() with nothing to continue, waits on the run thread
    ├── ProviderNotFoundError (also LookupError) no provider registered for a model's api
    ├── ModelNotFoundError (also LookupError)   unknown "provider:model-id"
    ├── MissingApiKeyError (also ValueError)    no key in options, get_api_key or the environment
    ├── ToolArgumentsError (also ValueError)    tool arguments that fail their schema
    ├── OutputError (also ValueError)           RunResult.output of a run that gave no valid output
    ├── StreamEndedWithoutResult                an event stream ended without a terminal event
    ├── CompactionError (also RuntimeError)     agent.compact() found nothing to compact, or its summary failed
    ├── InvalidValueError (also ValueError)     a value piagent cannot accept (an option, a schema...)
    ├── InvalidTypeError (also TypeError)       a value of the wrong type
    ├── AbortedError                            AbortSignal.throw_if_aborted() on an aborted signal
    ├── UsageLimitExceeded                      a usage limit stops the next request (docs/limits.md)
    ├── SessionError                            a session store cannot be read or written
    │   ├── SessionFormatError (also ValueError)  not a session, a newer version, a damaged line
    │   └── SessionBusyError (also TimeoutError)  another agent's run holds the session; a lock held too long
    └── ProviderError                           a model call failed (what its error event reports)
        ├── HttpStatusError                     a non-2xx answer, or a refused redirect
        ├── AbortedRequest                      the call's signal was aborted
        └── ProviderStreamError                 the stream was unusable, too large or too slow

Model and tool failures are not exceptions: they end a run with an error message in the
transcript (pi's contract). These exceptions are for misuse and for the low-level API.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from ._redaction import excerpt, redact

__all__ = [
    "AbortedRequest",
    "AgentBusyError",
    "CompactionError",
    "HttpStatusError",
    "InvalidTypeError",
    "InvalidValueError",
    "InvalidStateError",
    "MissingApiKeyError",
    "ModelNotFoundError",
    "OutputError",
    "PiAgentError",
    "ProviderError",
    "ProviderNotFoundError",
    "ProviderStreamError",
    "SessionBusyError",
    "SessionError",
    "SessionFormatError",
    "StreamEndedWithoutResult",
    "ToolArgumentsError",
    "UsageLimitExceeded",
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
    """No model in the catalogue matches; ``suggestions`` holds the closest ``provider:id`` refs."""

    def __init__(self, message: str, suggestions: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.suggestions = suggestions


class MissingApiKeyError(PiAgentError, ValueError):
    """No API key was given and the provider's environment variable is unset."""


class InvalidValueError(PiAgentError, ValueError):
    """A value piagent cannot accept: an option out of range, a malformed schema or message."""


class InvalidTypeError(PiAgentError, TypeError):
    """A value of the wrong type where piagent needs a specific one."""


class ToolArgumentsError(PiAgentError, ValueError):
    """Tool-call arguments failed their JSON Schema; the message is what the model sees."""


class OutputError(PiAgentError, ValueError):
    """A run with an ``output_type`` ended without a valid output; ``raw_text`` is its final text."""

    def __init__(self, message: str, raw_text: str = "") -> None:
        super().__init__(message)
        self.raw_text = raw_text


class CompactionError(PiAgentError, RuntimeError):
    """A compaction did not happen: nothing to compact, the summary failed, or (``aborted``) it was aborted."""

    def __init__(self, message: str, aborted: bool = False) -> None:
        super().__init__(message)
        self.aborted = aborted


class StreamEndedWithoutResult(PiAgentError):
    """An event stream was ended without a terminal event and without a result."""


class UsageLimitExceeded(PiAgentError):
    """A usage limit was reached and not raised: the next request is not made (docs/limits.md).

    ``reached`` is the :class:`~piagent.limits.LimitReached` that stopped it."""

    def __init__(self, message: str, reached: object = None) -> None:
        super().__init__(message)
        self.reached = reached


class SessionError(PiAgentError):
    """A session store cannot be read or written (see docs/sessions.md)."""


class SessionFormatError(SessionError, ValueError):
    """The stored data is not a session piagent can read; the message names the place."""


class SessionBusyError(SessionError, TimeoutError):
    """Another agent's run holds the session, or another writer held a lock longer than the lock timeout."""


class ProviderError(PiAgentError):
    """A model call failed; providers turn it into the stream's terminal ``error`` event.

    :meth:`describe` is the message with every secret replaced (the whole text is scrubbed
    before anything is cut, so a key cut in half cannot escape).
    """

    def describe(self, secrets: Iterable[Optional[str]] = ()) -> str:
        return redact(str(self) or type(self).__name__, secrets)


class HttpStatusError(ProviderError):
    """A non-2xx answer; ``message`` is the provider's error text, scrubbed of secrets.

    ``fields`` holds the short text fields of a JSON error object besides its message (OpenAI
    ``type``/``code``/``param``, Anthropic ``type``, Gemini ``status``, and as ``violations``
    the fields Gemini's ``details[].fieldViolations`` name), scrubbed too; empty when the
    answer had none.
    """

    def __init__(self, status: int, message: str, fields: Optional[dict[str, str]] = None) -> None:
        super().__init__(f"HTTP {status}: {message}" if message else f"HTTP {status}")
        self.status = status
        self.message = message
        self.fields: dict[str, str] = dict(fields or {})


class AbortedRequest(ProviderError):
    """The request was aborted through its signal."""

    def __init__(self) -> None:
        super().__init__("Request was aborted")


class ProviderStreamError(ProviderError):
    """The provider's stream was unusable: cut short, invalid JSON, too large, too slow, or an
    error it reported itself.

    ``data``, when given, is the offending payload: the message shows an excerpt of it, taken
    after secrets were removed (``f"{reason}: {excerpt!r}{detail}"``).
    """

    EXCERPT_CHARS = 200

    def __init__(self, reason: str, data: Optional[bytes] = None, detail: str = "") -> None:
        self.reason = reason
        self.data = data
        self.detail = detail
        super().__init__(self._message(()))

    def _message(self, secrets: Iterable[Optional[str]]) -> str:
        if self.data is None:
            return self.reason + self.detail
        return f"{self.reason}: {excerpt(self.data, secrets, self.EXCERPT_CHARS)!r}{self.detail}"

    def describe(self, secrets: Iterable[Optional[str]] = ()) -> str:
        return redact(self._message(secrets), secrets)
