"""What piagent's two HTTP clients (the model providers and MCP's Streamable HTTP) share: both
treat the server as untrusted.

* :func:`redirect_target`: a redirect is followed only to the same origin (scheme, host and
  port) and only when it keeps the method and body (307, 308), so no header (``Authorization``,
  an API key, any header the user configured, a session id) and no body ever reaches another
  host.
* :class:`Inflater`: ``Content-Encoding`` (gzip, deflate: :data:`ACCEPT_ENCODING`) undone piece
  by piece, so a small compressed body cannot inflate into memory unchecked.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any, Optional
from urllib.parse import urljoin, urlsplit

import requests

from .exceptions import ProviderStreamError

__all__ = ["ACCEPT_ENCODING", "Inflater", "origin", "redirect_target"]

ACCEPT_ENCODING = "gzip, deflate"
"""The ``Accept-Encoding`` piagent sends: what :class:`Inflater` undoes."""
SAME_METHOD_REDIRECTS = (307, 308)
PIECE_BYTES = 65_536


def origin(url: str) -> tuple[str, str, Optional[int]]:
    """``(scheme, host, port)`` of ``url``, lower-cased, with the scheme's default port."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)


def redirect_target(url: str, response: requests.Response) -> tuple[str, Optional[str]]:
    """Where the redirect ``response`` to a request for ``url`` leads, and why it must not be
    followed ("a redirect to another origin (...)", "a redirect that may change the method ..."), or
    None when it may be: a 307 or 308 to the same origin."""
    target = urljoin(url, response.headers.get("location", ""))
    if origin(target) != origin(url):
        scheme, host, port = origin(target)
        return target, f"a redirect to another origin ({scheme}://{host}:{port})"
    if response.status_code not in SAME_METHOD_REDIRECTS:
        return target, "a redirect that may change the method (only 307 and 308 keep it and the body)"
    return target, None


class Inflater:
    """Undoes ``Content-Encoding`` (gzip or deflate) piece by piece, never more than ``piece``
    bytes per step; raises :class:`ProviderStreamError` for another encoding or a broken body."""

    def __init__(self, encoding: str, piece: int = PIECE_BYTES) -> None:
        name = encoding.strip().lower()
        self._piece = piece
        self._wbits: Optional[int]
        if name in ("", "identity"):
            self._wbits = None
        elif name in ("gzip", "x-gzip"):
            self._wbits = 16 + zlib.MAX_WBITS
        elif name == "deflate":
            self._wbits = zlib.MAX_WBITS  # zlib-wrapped; raw deflate is tried if that fails
        else:
            raise ProviderStreamError(f"Unsupported Content-Encoding {encoding!r} (piagent accepts gzip and deflate)")
        self._inflater: Any = zlib.decompressobj(self._wbits) if self._wbits is not None else None
        self._started = False
        #: True for a body sent as it is: :meth:`feed` would give back each piece unchanged
        self.identity = self._inflater is None

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._inflater is None:
            yield data
            return
        while data:
            try:
                out = self._inflater.decompress(data, self._piece)
            except zlib.error as exc:
                if self._wbits == zlib.MAX_WBITS and not self._started:  # a raw deflate stream
                    self._wbits = -zlib.MAX_WBITS
                    self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise ProviderStreamError(f"The response body could not be decompressed: {exc}") from None
            self._started = True
            if out:
                yield out
            data = self._inflater.unconsumed_tail
            if not data and self._inflater.eof and self._inflater.unused_data:  # a gzip with several members
                data = self._inflater.unused_data
                self._inflater = zlib.decompressobj(self._wbits or zlib.MAX_WBITS)
