"""Run identifiers on piagent's log records, so that logs and traces can be joined.

While instrumented, every record of the ``piagent`` logger gets two attributes (``extra``),
documented in docs/observability.md#logs:

* ``piagent_trace_id``: the trace id of the run the record was logged in (32 hex digits);
* ``piagent_span_id``: the id of that run's ``invoke_agent`` span (16 hex digits).

Both are "" for a record logged outside a run. Tool threads count as the run's.
"""

from __future__ import annotations

import logging

from opentelemetry.trace import format_span_id, format_trace_id

from ._tracing import current_run_span

LOGGER = "piagent"


class RunIdentifiers(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        span = current_run_span()
        context = span.get_span_context() if span is not None else None
        if context is not None and context.is_valid:
            record.piagent_trace_id = format_trace_id(context.trace_id)
            record.piagent_span_id = format_span_id(context.span_id)
        else:
            record.piagent_trace_id = record.piagent_span_id = ""
        return True
