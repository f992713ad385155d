"""OpenTelemetry for piagent (the ``otel`` extra): traces, metrics and log correlation.

:func:`instrument` installs an :class:`~piagent.instrumentation.Instrumentation` that follows the
OpenTelemetry GenAI semantic conventions; :func:`uninstrument` removes it. Both are also
``piagent.instrument`` / ``piagent.uninstrument``. Importing this module imports
``opentelemetry-api``; ``import piagent`` never does. See docs/observability.md.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Optional

from .. import instrumentation
from ._logging import LOGGER, RunIdentifiers
from ._tracing import OpenTelemetryInstrumentation

__all__ = ["OpenTelemetryInstrumentation", "instrument", "uninstrument"]

_lock = threading.Lock()
_log_filter: Optional[RunIdentifiers] = None


def instrument(tracer_provider: Any = None, meter_provider: Any = None, capture_content: bool = False) -> None:
    """Trace every agent run from now on, and record its metrics.

    ``tracer_provider`` / ``meter_provider``: None uses OpenTelemetry's global ones (a no-op until
    the application configures the SDK). ``capture_content``: also record messages, system
    prompt, tool definitions, tool arguments and results (off by default: they may hold
    personal data); API keys are never recorded. Calling it again replaces the settings.
    """
    global _log_filter
    if not isinstance(capture_content, bool):
        raise TypeError(f"capture_content must be a bool, got {type(capture_content).__name__}")
    observer = OpenTelemetryInstrumentation(tracer_provider, meter_provider, capture_content)
    with _lock:
        instrumentation.install(observer)
        if _log_filter is None:
            _log_filter = RunIdentifiers()
            logging.getLogger(LOGGER).addFilter(_log_filter)


def uninstrument() -> None:
    """Stop tracing (runs under way finish their spans); a no-op when not instrumented."""
    global _log_filter
    with _lock:
        if isinstance(instrumentation.active, OpenTelemetryInstrumentation):
            instrumentation.install(None)
        if _log_filter is not None:
            logging.getLogger(LOGGER).removeFilter(_log_filter)
            _log_filter = None
