"""``make test-urllib3`` runs the HTTP tests on the oldest and the newest urllib3 that setup.cfg
allows: this checks that a run really uses the urllib3 it asked for."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import urllib3

ROOT = Path(__file__).resolve().parent.parent


def test_the_allowed_urllib3_range_is_declared_and_the_installed_one_is_in_it() -> None:
    declared = re.search(r"^\s*urllib3>=([\d.]+),<(\d+)\s*$", (ROOT / "setup.cfg").read_text(), re.MULTILINE)
    assert declared is not None
    low = tuple(int(p) for p in declared.group(1).split("."))
    version = tuple(int(p) for p in re.findall(r"\d+", urllib3.__version__)[:3])
    assert low <= version < (int(declared.group(2)),)


def test_a_run_for_a_given_urllib3_uses_it() -> None:
    wanted = os.environ.get("PIAGENT_URLLIB3")
    if not wanted:
        pytest.skip("run by make test-urllib3")
    assert Path(urllib3.__file__).resolve().is_relative_to(Path(os.environ["PYTHONPATH"]).resolve())
    if "==" in wanted:
        assert urllib3.__version__ == wanted.split("==", 1)[1]
