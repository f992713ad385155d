"""Run identifiers on piagent's log records, so that logs and traces can be joined.

While instrumented, every record of the ``piagent`` logger gets two attributes (``extra``),
documented in docs/observability.md#logs:

* ``piagent_trace_id``: the trace id of the run the record was logged in (32 hex digits);
* ``piagent_span_id``: the id of that run's ``invoke_agent`` span (16 hex digits).

Both are "" for a record logged outside a run. Tool threads count as the run's.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Optional

from opentelemetry.trace import Span, format_span_id, format_trace_id

LOGGER = "piagent"

_lock = threading.Lock()
_filter: Optional[logging.Filter] = None


def attach(run_span: Callable[[], Optional[Span]]) -> None:
    """Add the identifiers of ``run_span()`` (the current run's span) to the ``piagent`` logger's
    records; once, however often called."""
    global _filter
    with _lock:
        if _filter is None:
            _filter = RunIdentifiers(run_span)
            logging.getLogger(LOGGER).addFilter(_filter)


def detach() -> None:
    global _filter
    with _lock:
        if _filter is not None:
            logging.getLogger(LOGGER).removeFilter(_filter)
            _filter = None


class RunIdentifiers(logging.Filter):
    def __init__(self, run_span: Callable[[], Optional[Span]]) -> None:
        super().__init__()
        self._run_span = run_span

    def filter(self, record: logging.LogRecord) -> bool:
        span = self._run_span()
        context = span.get_span_context() if span is not None else None
        if context is not None and context.is_valid:
            record.piagent_trace_id = format_trace_id(context.trace_id)
            record.piagent_span_id = format_span_id(context.span_id)
        else:
            record.piagent_trace_id = record.piagent_span_id = ""
        return True
