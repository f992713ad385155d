"""Secrets out of every text piagent shows: error messages, excerpts, logs.

:func:`redact` replaces each secret, in every form it takes in a message, with
``[REDACTED]``; :func:`excerpt` and :func:`shorten` cut a text only after redacting it, so a
key cut in half by the cut cannot escape (see docs/providers.md#secrets).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Optional
from urllib.parse import urlsplit, urlunsplit

__all__ = ["REDACTED", "excerpt", "redact", "shorten", "shown_url"]

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 4
_SCAN_BYTES = 1_048_576  # how much of a payload an excerpt reads (it shows far less)


def _forms(secrets: Iterable[Optional[str]]) -> list[str]:
    """Each secret as it may appear in a message: raw, without surrounding whitespace, and escaped
    the way ``repr`` and JSON quote it (a key with an inner newline shows up as ``sk-a\\nb``)."""
    found: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        for form in (secret, secret.strip()):
            found.update((form, repr(form)[1:-1], json.dumps(form)[1:-1], json.dumps(form, ensure_ascii=False)[1:-1]))
    return sorted((form for form in found if len(form) >= MIN_SECRET_CHARS), key=len, reverse=True)


def shown_url(url: str) -> str:
    """``url`` as errors and logs may show it: without user, password and query (``?…`` stays to
    say there was one), where a key (``user:key@``, ``?api_key=``) would be."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "…" if parts.query else "", ""))


def redact(text: str, secrets: Iterable[Optional[str]]) -> str:
    """``text`` with every secret (of 4+ characters) replaced by ``[REDACTED]``, longest first
    (so that ``Bearer <key>`` and ``<key>`` both disappear)."""
    for form in _forms(secrets):
        if form in text:
            text = text.replace(form, REDACTED)
    return text


def _without_partial_tail(text: str, forms: list[str]) -> str:
    """``text`` without a trailing beginning of a secret (what a cut through the secret leaves)."""
    for form in forms:
        for size in range(len(form) - 1, 0, -1):
            if text.endswith(form[:size]):
                return text[:-size]
    return text


def shorten(text: str, secrets: Iterable[Optional[str]], limit: int, complete: bool = True) -> str:
    """``text`` redacted, then cut to ``limit`` characters. ``complete=False`` says ``text`` was
    itself cut from something longer, so a secret's beginning at its end is dropped too."""
    secrets = list(secrets)
    text = redact(text, secrets)
    if not complete:
        text = _without_partial_tail(text, _forms(secrets))
    return text[:limit]


def excerpt(data: bytes, secrets: Iterable[Optional[str]], limit: int) -> str:
    """The first ``limit`` characters of ``data`` (UTF-8, invalid bytes replaced), redacted first."""
    head = data[:_SCAN_BYTES]
    return shorten(head.decode("utf-8", "replace"), secrets, limit, complete=len(head) == len(data))
