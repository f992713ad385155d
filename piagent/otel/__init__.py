"""OpenTelemetry for piagent (the ``otel`` extra): traces, metrics and log correlation.

:func:`instrument` installs an :class:`~piagent.instrumentation.Instrumentation` that follows the
OpenTelemetry GenAI semantic conventions for every run; :func:`uninstrument` removes it. Both
are also ``piagent.instrument`` / ``piagent.uninstrument``. For one agent only, pass
``Agent(instrumentation=OpenTelemetryInstrumentation(tracer_provider, meter_provider))``.
Importing this module imports ``opentelemetry-api``; ``import piagent`` never does. See
docs/observability.md.
"""

from __future__ import annotations

from typing import Any

from .. import instrumentation
from . import _logging
from ._tracing import OpenTelemetryInstrumentation

__all__ = ["OpenTelemetryInstrumentation", "instrument", "uninstrument"]


def instrument(tracer_provider: Any = None, meter_provider: Any = None, capture_content: bool = False) -> None:
    """Trace every agent run from now on, and record its metrics.

    ``tracer_provider`` / ``meter_provider``: None uses OpenTelemetry's global ones (a no-op until
    the application configures the SDK). ``capture_content``: also record messages, system
    prompt, tool definitions, tool arguments and results (off by default: they may hold
    personal data); API keys are never recorded. Calling it again replaces the settings.
    """
    instrumentation.install(OpenTelemetryInstrumentation(tracer_provider, meter_provider, capture_content))


def uninstrument() -> None:
    """Stop tracing the runs started from now on (runs under way go on being traced), and stop
    adding run identifiers to log records; a no-op when not instrumented (an agent's own
    ``instrumentation`` is left as it is, log identifiers included)."""
    if isinstance(instrumentation.active, OpenTelemetryInstrumentation):
        instrumentation.install(None)
        _logging.detach()
