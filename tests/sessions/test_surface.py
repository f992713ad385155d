"""``piagent.sessions.__all__`` is its public surface, and the core never imports it."""

from __future__ import annotations

import inspect
import subprocess
import sys

import piagent.sessions as sessions


def test_all_is_sorted_complete_and_resolves() -> None:
    assert sessions.__all__ == sorted(sessions.__all__)
    assert [name for name in sessions.__all__ if not hasattr(sessions, name)] == []
    public = {
        name
        for name, value in vars(sessions).items()
        if not name.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value))
    }
    assert sorted(public - set(sessions.__all__)) == []


def test_importing_piagent_and_building_an_agent_does_not_import_sessions() -> None:
    code = "import sys, piagent; piagent.Agent(); print('piagent.sessions' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "False"
