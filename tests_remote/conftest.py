"""Fixtures of the remote tests: a real redis-server per module (see redis_server.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .redis_server import RedisServer


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:  # every remote test is bounded well below pytest's default
        item.add_marker(pytest.mark.timeout(180))
