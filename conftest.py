"""What every test suite of the repository shares (tests, tests_local, tests_mcp, tests_remote):
tests never touch the user's home.

Each test runs with ``HOME`` (and ``USERPROFILE``) set to a temporary directory and no inherited
``PIAGENT_SESSIONS_DIR``, so whatever piagent, or a process a test starts, keeps under ``~``
lands there. As a guard, a run that wrote into the real ``~/.piagent/sessions`` for the
repository or for this run's own temporary directory fails at its end. Only those directories are
watched: another process using piagent meanwhile (elsewhere in /tmp, say) never fails the run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from piagent.sessions._directory import session_dir

ROOT = Path(__file__).resolve().parent
REAL_SESSIONS_DIR = Path(os.path.expanduser("~")) / ".piagent" / "sessions"  # read at import, before any test
_watched: list[Path] = [ROOT]  # and, once known, this run's temporary directory


@pytest.fixture(autouse=True)
def _a_temporary_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = str(tmp_path_factory.mktemp("home"))
    monkeypatch.setenv("HOME", home)
    monkeypatch.setenv("USERPROFILE", home)  # what expanduser reads on Windows
    monkeypatch.delenv("PIAGENT_SESSIONS_DIR", raising=False)


@pytest.fixture(autouse=True, scope="session")
def _this_run_s_temporary_directory_is_watched(tmp_path_factory: pytest.TempPathFactory) -> None:
    _watched.append(tmp_path_factory.getbasetemp())


def _watched_directory(name: str) -> bool:
    """True for the session directory of a watched directory or of a directory under it."""
    for where in _watched:
        own = os.path.basename(session_dir(str(where), {}))  # "--path-of-where--"
        if name == own or name.startswith(own[:-1]):
            return True
    return False


def _snapshot() -> dict[Path, tuple[int, int]]:
    directories = REAL_SESSIONS_DIR.iterdir() if REAL_SESSIONS_DIR.is_dir() else ()
    found = {}
    for directory in directories:
        if directory.is_dir() and _watched_directory(directory.name):
            for path in directory.rglob("*"):
                if path.is_file():
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
