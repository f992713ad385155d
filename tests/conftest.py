"""Fixtures shared by the whole suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from piagent.testing import FauxProvider, register_faux_provider


@pytest.fixture
def faux() -> Iterator[FauxProvider]:
    """A freshly registered faux provider (one model, ``faux-1``), unregistered afterwards."""
    provider = register_faux_provider()
    yield provider
    provider.unregister()
