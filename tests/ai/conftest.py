from __future__ import annotations

from collections.abc import Iterator

import pytest

from piagent.ai import capabilities


@pytest.fixture
def fresh_warnings() -> Iterator[None]:
    """The test sees its own one-time warnings (piagent keeps one process-wide set)."""
    saved = set(capabilities._warned)
    capabilities._warned.clear()
    yield
    capabilities._warned.clear()
    capabilities._warned.update(saved)
