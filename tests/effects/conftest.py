"""Fixtures of the effects tests: the session tests' tmpfs directory, for the chaos runs."""

from __future__ import annotations

from tests.sessions.conftest import memory_dir

__all__ = ["memory_dir"]
