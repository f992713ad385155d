"""What a provider for a new API needs, public and documented: docs/providers.md.

A provider is a stream function ``(model, context, options) -> AssistantMessageEventStream``
registered under its ``api`` with :func:`~piagent.ai.register_api_provider`. With this kit it
is usually::

    def stream_acme(model, context, options):
        return stream_events(model, options, lambda builder: _body(model, context, options, builder))

    def _body(model, context, options, builder):
        with open_request(model, options, url, payload, lambda key: {"x-api-key": key}) as http:
            yield builder.start()
            for name, data in http.sse():
                event = parse_event_object(data)
                ...  # builder.text_start / text_delta / text_end, toolcall_*...
            yield builder.done("stop")

* :func:`open_request` sends the request: key resolution, ``on_payload``, headers, retries,
  redirects, bounds and deadlines, abort and Ctrl-C, secrets scrubbed from every error;
* :func:`stream_events` keeps the stream-function contract: whatever the body raises, the
  stream ends with one ``error`` event carrying the partial message (``aborted`` when the
  signal fired), never an exception;
* :class:`MessageBuilder` builds the message and the events; tool-call arguments that break a
  bound become a rejected call there (docs/providers.md#limits);
* :func:`register_compat_flag` declares a ``model.compat`` flag the provider reads
  (docs/providers.md#compat-flags);
* the exceptions are :class:`ProviderError` and its subclasses, all under
  :class:`~piagent.exceptions.PiAgentError`.
"""

from __future__ import annotations

from .._redaction import redact
from ..exceptions import AbortedRequest, HttpStatusError, ProviderError, ProviderStreamError
from .builder import MessageBuilder
from .compat import register_compat_flag
from .providers._common import (
    ABORTED_MESSAGE,
    make_usage,
    merge_headers,
    open_request,
    parse_event_json,
    parse_event_object,
    resolve_api_key,
    secrets_of,
    stream_events,
)
from .providers._http import HttpStream, Limits, describe_error, open_stream

__all__ = [
    "ABORTED_MESSAGE",
    "AbortedRequest",
    "HttpStatusError",
    "HttpStream",
    "Limits",
    "MessageBuilder",
    "ProviderError",
    "ProviderStreamError",
    "describe_error",
    "make_usage",
    "merge_headers",
    "open_request",
    "open_stream",
    "parse_event_json",
    "parse_event_object",
    "redact",
    "register_compat_flag",
    "resolve_api_key",
    "secrets_of",
    "stream_events",
]
