"""Fixtures of the session tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

FIXTURE = Path(__file__).with_name("data") / "before-compaction.jsonl"


@pytest.fixture
def memory_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory on tmpfs when the machine has one, else ``tmp_path``.

    For tests that append a lot: what they check (process crashes, serialisation) does not
    depend on the disk, and fsync on a shared disk costs up to tens of milliseconds per call.
    """
    if not Path("/dev/shm").is_dir():
        yield tmp_path
        return
    directory = Path(tempfile.mkdtemp(prefix="piagent-sessions-", dir="/dev/shm"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def pi_session(tmp_path: Path) -> Path:
    """A copy of the real pi session (v1, two compactions) that a test may write to."""
    path = tmp_path / "pi-session.jsonl"
    shutil.copyfile(FIXTURE, path)
    return path
