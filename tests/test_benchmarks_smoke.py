"""`make bench` harness at a tiny size: every scenario runs once and checks its own result.

Correctness only: the timing figures and their targets belong to `make bench`, never to tests.
"""

from __future__ import annotations

import importlib.util
import shutil

import pytest

from benchmarks.scenarios import TINY, run_all


@pytest.fixture(scope="module")
def report():
    return run_all(TINY)


# the remote scenario runs where the redis extra and redis-server are installed (make test-remote)
REMOTE = importlib.util.find_spec("redis") is not None and shutil.which("redis-server") is not None


def test_every_scenario_checks_its_result_and_all_checks_pass(report):
    checks = [row for row in report.rows if row.check]
    remote = {"remote"} if REMOTE else set()
    expected = {"stream", "args", "turns", "parallel", "fan-out", "concurrent", "otel", "sessions", "effects", "output"}
    expected |= {"compaction"} | remote
    assert {row.scenario for row in checks} == expected
    failed = [(row.scenario, row.measure, row.piagent) for row in checks if not row.passed]
    assert failed == []


def test_every_target_of_the_issue_is_reported_with_a_verdict(report):
    targets = {(row.scenario, row.target) for row in report.rows if row.target and not row.check}
    assert targets == {
        ("stream", ">= 0.50x floor"),
        ("args", "<= 2.00x floor"),
        ("args", "<= 2.00x (linear)"),
        ("args", "<= 1.15x floor"),
        ("turns", "<= 3.00x floor"),
        ("turns", "<= 1.50x floor"),
        ("parallel", "<= 30 ms"),
        ("concurrent", "<= 1.30x floor"),
        ("otel", "<= 1.10x off"),
        ("otel", "<= 1.05x (not measurable)"),
        ("sessions", "<= 2.00x floor"),
        ("sessions", "<= 2.00x (O(1))"),
        ("effects", "<= 2.00x floor"),
        ("effects", "< 1 ms"),
        ("output", "<= 1.30x text"),
        ("output", "<= 2.50x text"),
        ("output", "<= 1.10x text's"),
        ("first request", "< 30 ms"),
        ("compaction", "<= 1.05x (not measurable)"),
        ("compaction", "< 50 ms"),
        ("total", "< 300 s"),
    } | ({("remote", "<= 100 ms")} if REMOTE else set())
    assert all(row.passed is not None for row in report.rows if row.target)


def test_the_table_renders_every_row(report):
    table = report.render("title")
    for row in report.rows:
        assert row.measure in table


def test_each_round_starts_one_variant_further_on():
    from benchmarks.measure import Rounds

    ran: list[str] = []
    Rounds({name: (lambda name=name: ran.append(name)) for name in "abc"}, repeats=4, warmup=0)
    assert "".join(ran) == "abc" + "bca" + "cab" + "abc"
