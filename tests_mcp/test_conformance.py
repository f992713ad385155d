"""The official MCP conformance framework, in client mode, drives piagent.mcp.

Every client scenario its ``list`` names outside OAuth (``auth/...``) must pass; the list is
read from the framework at test time, so a new scenario in a new release is run too. The
stable release has no 2026-07-28 scenarios yet: the request-header ones (standard headers,
``x-mcp-header`` mirroring, invalid annotations) and request metadata come from its
pinned pre-release (``conformance-2026`` in tests_mcp/npm).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .conftest import CONFORMANCE, CONFORMANCE_2026, HERE, NODE, ROOT

DRIVER = os.path.join(HERE, "conformance_client.py")
STATELESS_SCENARIOS = ["request-metadata", "http-standard-headers", "http-custom-headers", "http-invalid-tool-headers"]


def client_scenarios(framework: str = CONFORMANCE) -> list[str]:
    if not os.path.exists(NODE):
        return ["(framework not installed)"]
    listing = subprocess.run([NODE, framework, "list", "--client"], capture_output=True, text=True, timeout=60)
    names = re.findall(r"^\s*-\s*(\S+)", listing.stdout, re.MULTILINE)
    return [name for name in names if not name.startswith("auth/")]


def test_the_framework_lists_the_known_client_scenarios() -> None:
    assert {"initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"} <= set(client_scenarios())
    assert set(STATELESS_SCENARIOS) <= set(client_scenarios(CONFORMANCE_2026))


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("framework", "scenario"),
    [pytest.param(CONFORMANCE, name, id=name) for name in client_scenarios()]
    + [pytest.param(CONFORMANCE_2026, name, id=f"pre-release:{name}") for name in STATELESS_SCENARIOS],
)
def test_client_scenario_passes(framework: str, scenario: str, tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run(
        [NODE, framework, "client", "--command", f"{sys.executable} {DRIVER}", "--scenario", scenario],
        capture_output=True,
        text=True,
        timeout=110,
        cwd=tmp_path,
        env=env,
    )
    output = done.stdout + done.stderr  # the framework reports on either, by version
    summary = output[output.rfind("Test Results:") :]
    print(f"{scenario}: {' '.join(summary.split())}")
    assert done.returncode == 0 and "OVERALL: PASSED" in output, output[-4000:]
    assert re.search(r"Passed: (\d+)/\1, 0 failed", output)
