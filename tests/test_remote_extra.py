"""piagent.remote is an extra: the core never imports it (or redis); its public surface is fixed.

Its behaviour is tested against a real redis-server and real Celery workers by make test-remote.
"""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_import_piagent_imports_neither_piagent_remote_nor_redis() -> None:
    code = (
        "import sys, piagent, piagent.cli\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'redis' or m.startswith('piagent.remote')))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_the_core_modules_never_name_piagent_remote() -> None:
    from pathlib import Path

    import piagent

    root = Path(piagent.__file__).parent
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "remote" not in path.relative_to(root).parts
        and ("import redis" in path.read_text() or ".remote" in path.read_text())
    ]
    assert offenders == []


def test_piagent_remote_all_is_its_public_surface() -> None:
    pytest.importorskip("redis")
    import piagent.remote as remote

    assert remote.__all__ == sorted(remote.__all__)
    assert remote.__all__ == [
        "Approval",
        "Attachment",
        "RemoteError",
        "RunBusyError",
        "RunHandle",
        "attach",
        "run_pending",
    ]
    assert issubclass(remote.RemoteError, __import__("piagent").PiAgentError)
