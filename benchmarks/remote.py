"""The ``remote`` scenario: piagent.remote through a real redis-server started for the bench.

* per-run overhead: the same faux run (prompt, streamed answer) in process, and driven through
  Redis: ``RunHandle.follow_up()`` from the client, a worker thread that attaches, runs and
  detaches, the client following ``events()`` until ``agent_end``;
* events per second through the stream: a long streamed answer published by the worker and read
  by a client, against the rate a listener sees in process;
* abort latency: ``RunHandle.abort()`` to the ``agent_end`` the client reads.

Skipped (one row says why) when the ``redis`` package or ``redis-server`` is missing.
"""

from __future__ import annotations

import importlib.util
import shutil
import statistics
import threading
import time
from typing import Any

from .measure import Report, Rounds, Row, ms, rate, times


def bench_remote(sizes: Any, report: Report) -> None:
    if importlib.util.find_spec("redis") is None or shutil.which("redis-server") is None:
        report.add(Row("remote", "skipped: needs the redis extra and redis-server", ""))
        return
    from tests_remote.redis_server import RedisServer

    server = RedisServer()
    server.start()
    try:
        _overhead(server.url, sizes, report)
        _event_rate(server.url, sizes, report)
        _abort_latency(server.url, sizes, report)
    finally:
        server.stop()


def _agent(answer: str, tools: Any = (), tokens_per_second: Any = None) -> Any:
    from piagent import Agent
    from piagent.testing import faux_message, register_faux_provider

    faux = register_faux_provider(chunk_tokens=(1, 1), tokens_per_second=tokens_per_second)
    faux.set_responses([faux_message(answer)] * 4)
    return Agent(model=faux.get_model(), tools=list(tools))


def _remote_run(url: str, run_id: str, agent: Any, text: str) -> tuple[dict[str, Any], int]:
    """follow_up() from a client, a worker thread attaches and runs; returns (agent_end, events read)."""
    from piagent.remote import RunHandle, attach, run_pending

    def work() -> None:
        with attach(agent, url, run_id):
            run_pending(agent)

    with RunHandle(url, run_id) as handle:
        handle.follow_up(text)
        worker = threading.Thread(target=work)
        worker.start()
        count = 0
        for event in handle.events(timeout=60):
            count += 1
            if event["type"] == "agent_end":
                break
        worker.join()
    return event, count


def _overhead(url: str, sizes: Any, report: Report) -> None:
    answer = "abcd" * sizes.remote_answer_tokens
    counter = [0]

    def in_process() -> None:
        agent = _agent(answer)
        agent.subscribe(lambda event: None)
        counter[0] += 1
        result = agent.prompt("go")
        assert result.text == answer

    def remote() -> None:
        counter[0] += 1
        end, _ = _remote_run(url, f"bench-run-{counter[0]}", _agent(answer), "go")
        assert end["messages"][-1]["content"][0]["text"] == answer

    rounds = Rounds({"in process": in_process, "redis": remote}, sizes.remote_runs)
    local, through = rounds.median("in process"), rounds.median("redis")
    report.check("remote", "each run through Redis got its answer", True)
    report.add(
        Row(
            "remote",
            f"wall per run ({sizes.remote_answer_tokens}-token answer), Redis vs in process",
            ms(through.wall),
            f"in process {ms(local.wall)}",
            times(rounds.ratio("redis", "in process")),
        )
    )
    report.add(Row("remote", "overhead per run through Redis", ms(through.wall - local.wall)))


def _event_rate(url: str, sizes: Any, report: Report) -> None:
    """The same long answer in process (a listener counting events) and through Redis (the
    client counting the events it reads), run in rounds: rates from the median times."""
    answer = "abcd" * sizes.remote_stream_tokens
    seen, reads = [0], []

    def in_process() -> None:
        agent = _agent(answer)
        seen[0] = 0
        agent.subscribe(lambda event: seen.__setitem__(0, seen[0] + 1))
        agent.prompt("go")

    def remote() -> None:
        reads.append(_remote_run(url, f"bench-stream-{len(reads)}", _agent(answer), "go"))

    rounds = Rounds({"in process": in_process, "redis": remote}, sizes.repeats)
    ok = all(end["messages"][-1]["content"][0]["text"] == answer and count == seen[0] for end, count in reads)
    counts = sorted({count for _, count in reads})
    report.check("remote", f"the client read all {seen[0]} events of each run", ok, failure=f"{counts}/{seen[0]}")
    local_rate, remote_rate = seen[0] / rounds.median("in process").wall, seen[0] / rounds.median("redis").wall
    report.add(
        Row(
            "remote",
            f"events/s: worker -> Redis stream -> client (median of {sizes.repeats})",
            rate(remote_rate),
            f"listener {rate(local_rate)}",
            times(remote_rate / local_rate),
        )
    )


def _abort_latency(url: str, sizes: Any, report: Report) -> None:
    from piagent.remote import RunHandle, attach, run_pending

    latencies = []
    for i in range(sizes.remote_aborts):
        run_id = f"bench-abort-{i}"
        agent = _agent("abcd" * 10_000, tokens_per_second=200.0)  # ~50 s of paced streaming
        with RunHandle(url, run_id) as handle:
            handle.follow_up("go")

            def work(agent: Any = agent, run_id: str = run_id) -> None:
                with attach(agent, url, run_id):
                    run_pending(agent)

            worker = threading.Thread(target=work)
            worker.start()
            events = handle.events(timeout=60)
            for event in events:
                if event["type"] == "message_update":
                    break
            sent = time.perf_counter()
            handle.abort()
            for event in events:
                if event["type"] == "agent_end":
                    latencies.append(time.perf_counter() - sent)
                    break
            worker.join()
    report.check("remote", f"{sizes.remote_aborts} runs aborted from a handle", len(latencies) == sizes.remote_aborts)
    report.add(
        Row(
            "remote",
            "abort(): median (max) until agent_end read",
            ms(statistics.median(latencies)),
            f"max {ms(max(latencies))}",
            target="<= 100 ms",
            passed=max(latencies) <= 0.1,
        )
    )
