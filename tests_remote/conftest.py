"""Fixtures of the remote tests: a real redis-server per module (see redis_server.py), a faux provider."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from piagent.testing import faux_message, register_faux_provider

from .redis_server import RedisServer


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def faux() -> Iterator[Any]:
    """A faux provider answering ``answer <number of messages>``, 50 times."""
    provider = register_faux_provider()
    provider.set_responses([lambda context, *_: faux_message(f"answer {len(context.messages)}")] * 50)
    yield provider
    provider.unregister()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:  # every remote test is bounded well below pytest's default
        item.add_marker(pytest.mark.timeout(180))
