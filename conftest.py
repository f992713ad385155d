"""What every test suite of the repository shares (tests, tests_local, tests_mcp, tests_remote):
tests never touch the user's home.

Each test runs with ``HOME`` (and ``USERPROFILE``) set to a temporary directory and no inherited
``PIAGENT_SESSIONS_DIR``, so whatever piagent, or a process a test starts, keeps under ``~``
lands there. As a guard, a run that changed the real ``~/.piagent`` for one of its own working
directories (the repository or pytest's temporary directories) fails at its end.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
REAL_PIAGENT_DIR = Path(os.path.expanduser("~")) / ".piagent"  # read at import, before any test


@pytest.fixture(autouse=True)
def _a_temporary_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = str(tmp_path_factory.mktemp("home"))
    monkeypatch.setenv("HOME", home)
    monkeypatch.setenv("USERPROFILE", home)  # what expanduser reads on Windows
    monkeypatch.delenv("PIAGENT_SESSIONS_DIR", raising=False)


def _ours(path: Path) -> bool:
    """True for a file under a session directory named after the repository or a temporary directory."""
    encoded = [re.sub(r"[/\\:]", "-", str(where).lstrip("/\\")) for where in (ROOT, tempfile.gettempdir())]
    return any(f"--{prefix}" in part for part in path.parts for prefix in encoded)


def _snapshot() -> dict[Path, tuple[int, int]]:
    found = {}
    for path in REAL_PIAGENT_DIR.rglob("*") if REAL_PIAGENT_DIR.is_dir() else ():
        if path.is_file() and _ours(path):
            stat = path.stat()
            found[path] = (stat.st_mtime_ns, stat.st_size)
    return found


_before: dict[Path, tuple[int, int]] = {}


def pytest_sessionstart(session: pytest.Session) -> None:
    _before.update(_snapshot())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    changed = sorted(str(path) for path, seen in _snapshot().items() if _before.get(path) != seen)
    if changed:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_sep("=", "tests wrote into the real ~/.piagent", red=True)
            for path in changed[:20]:
                reporter.write_line(path)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
