"""Fixtures shared by the whole suite."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from piagent.testing import FauxProvider, register_faux_provider


def pytest_configure(config: pytest.Config) -> None:
    """piagent's user-level files (a refreshed catalogue, learned rules) live in a temporary
    directory during the tests, for this process and the commands it starts: never in ~/.piagent."""
    os.environ["PIAGENT_HOME"] = tempfile.mkdtemp(prefix="piagent-home-")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ.pop("PIAGENT_HOME", ""), ignore_errors=True)


@pytest.fixture
def faux() -> Iterator[FauxProvider]:
    """A freshly registered faux provider (one model, ``faux-1``), unregistered afterwards."""
    provider = register_faux_provider()
    yield provider
    provider.unregister()
