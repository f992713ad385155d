"""The scenarios of ``make bench``: piagent and the floor on the same bytes, and piagent traced vs not.

piagent always runs through a real :class:`piagent.Agent` with one listener attached, talking
to the scripted server with the ``openai-completions`` provider (the ``turns`` scenario also
runs on the faux provider, with no network). Each scenario checks its own result (the text,
the tool arguments, the order of tool results, the markers) and records the check as a row.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import floor, wire
from .compaction import bench_compaction
from .effects import bench_effects
from .measure import Report, Rounds, Row, kib, median_timing, mib, ms, peak_memory, rate, timed, times
from .remote import bench_remote
from .server import BenchServer
from .sessions import bench_sessions


@dataclass(frozen=True)
class Sizes:
    """How big each scenario is; :data:`FULL` is the issue's, :data:`TINY` the smoke test's."""

    repeats: int = 9
    stream_deltas: int = 20_000
    args_deltas: tuple[int, int] = (5_000, 10_000)
    args_repeats: int = 15  # the linearity check compares best runs: more runs, steadier minimum
    turns: int = 30
    parallel_tools: int = 8
    parallel_sleep: float = 0.2
    sequential_repeats: int = 3
    fanout_agents: int = 32
    fanout_threads: int = 8
    fanout_deltas: int = 40
    concurrent_runs: int = 200  # runs at once in one process, each on a thread of its own
    concurrent_turns: int = 3  # tool turns per run (then an answer)
    concurrent_repeats: int = 5
    memory: bool = True
    import_repeats: int = 5
    otel_repeats: int = 31  # five runs of ~0.1 s CPU each compared round by round: more rounds, steadier median
    session_sizes: tuple[int, int] = (100, 10_000)
    session_appends: int = 30
    output_items: tuple[int, int] = (1_000, 2_000)  # list items of a structured output (~60 and ~120 KB)
    remote_runs: int = 30
    remote_answer_tokens: int = 200
    remote_stream_tokens: int = 5_000
    remote_aborts: int = 10


FULL = Sizes()
TINY = Sizes(
    repeats=1,
    stream_deltas=200,
    args_deltas=(200, 400),
    args_repeats=1,
    turns=3,
    parallel_tools=3,
    parallel_sleep=0.02,
    sequential_repeats=1,
    fanout_agents=4,
    fanout_threads=2,
    fanout_deltas=10,
    concurrent_runs=4,
    concurrent_turns=1,
    concurrent_repeats=1,
    memory=False,
    import_repeats=1,
    otel_repeats=1,
    session_sizes=(10, 100),
    session_appends=2,
    output_items=(20, 40),
    remote_runs=2,
    remote_answer_tokens=20,
    remote_stream_tokens=200,
    remote_aborts=2,
)

API_KEY = "bench-key"
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where ``-m benchmarks.<x>`` runs
PROMPT = [{"role": "user", "content": "go"}]


def _schema(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": sorted(properties)}


WRITE_SCHEMA = _schema({"path": {"type": "string"}, "content": {"type": "string"}})
NOOP_SCHEMA = _schema({"turn": {"type": "integer"}, "note": {"type": "string"}})
SLEEP_SCHEMA = _schema({"index": {"type": "integer"}})


def _openai_tool(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": f"the {name} tool", "parameters": schema}}


# --------------------------------------------------------------------------- piagent side


def http_model(base_url: str) -> Any:
    from piagent.ai import Model

    return Model(
        id=wire.MODEL,
        api="openai-completions",
        provider="bench",
        base_url=base_url,
        context_window=128_000,
        max_tokens=4_096,
    )


def new_agent(model: Any, tools: Sequence[Any] = (), **options: Any) -> Any:
    from piagent import Agent

    return Agent(model=model, tools=list(tools), get_api_key=lambda provider: API_KEY, **options)


def make_tool(name: str, schema: dict[str, Any], execute: Callable[..., Any]) -> Any:
    from piagent import AgentTool

    return AgentTool(name, f"the {name} tool", schema, execute)


def ok_result(terminate: bool = False) -> Any:
    from piagent import AgentToolResult, TextContent

    return AgentToolResult([TextContent("ok")], None, terminate)


def tool_results(result: Any) -> list[Any]:
    return [m for m in result.messages if getattr(m, "role", None) == "toolResult"]


# --------------------------------------------------------------------------- 1. stream


def bench_stream(server: BenchServer, sizes: Sizes, report: Report) -> None:
    n = sizes.stream_deltas
    base = server.base_url("text", n)
    expected = "".join(wire.text_deltas(n))
    session = floor.new_session()
    model = http_model(base)
    seen: dict[str, Any] = {}

    def run_floor() -> None:
        reply = floor.call(session, base, PROMPT)
        seen["floor"] = reply.text == expected and reply.text_deltas == n

    def run_piagent() -> None:
        count = [0]

        def listener(event: Any) -> None:
            if event.type == "message_update" and event.assistant_message_event.type == "text_delta":
                count[0] += 1

        agent = new_agent(model)
        agent.subscribe(listener)
        result = agent.prompt("stream")
        seen["piagent"] = (result.text == expected, count[0], result.stop_reason, result.error_message)

    rounds = Rounds({"floor": run_floor, "piagent": run_piagent}, sizes.repeats)
    floor_t, piagent_t = rounds.median("floor"), rounds.median("piagent")
    ok = seen["piagent"][:3] == (True, n, "stop")
    report.check("stream", f"piagent: full text, {n:,} deltas to the listener", ok, failure=seen["piagent"])
    report.check("stream", "floor: full text", bool(seen["floor"]))
    piagent_rate, floor_rate = n / piagent_t.wall, n / floor_t.wall
    ratio = rounds.ratio("floor", "piagent")  # piagent's rate / the floor's
    report.add(
        Row(
            "stream",
            f"text deltas/s ({n:,} deltas)",
            rate(piagent_rate),
            rate(floor_rate),
            times(ratio),
            ">= 0.50x floor",
            ratio >= 0.5,
        )
    )
    report.add(
        Row(
            "stream",
            "client CPU per delta",
            f"{piagent_t.cpu / n * 1e6:.1f} us",
            f"{floor_t.cpu / n * 1e6:.1f} us",
            times(rounds.ratio("piagent", "floor", cpu=True)),
        )
    )
    if sizes.memory:
        piagent_peak, floor_peak = peak_memory(run_piagent), peak_memory(run_floor)
        report.add(
            Row(
                "stream",
                "peak memory (tracemalloc)",
                mib(piagent_peak),
                mib(floor_peak),
                times(piagent_peak / floor_peak),
            )
        )


# --------------------------------------------------------------------------- 2. args


def _args_runs(
    server: BenchServer, n: int, report: Report
) -> tuple[Callable[[], None], Callable[[], None], Callable[[], None], Callable[[], None]]:
    """The bare floor's run, the floor's run reading partial arguments, piagent's run and the
    correctness checks for arguments in ``n`` deltas."""
    base = server.base_url("args", n)
    expected = wire.big_arguments(n)
    session = floor.new_session()
    model = http_model(base)
    tools = [_openai_tool("write", WRITE_SCHEMA)]
    seen: dict[str, Any] = {}

    def floor_run(key: str, partial_arguments: bool) -> None:
        reply = floor.call(session, base, PROMPT, tools, partial_arguments=partial_arguments)
        args = json.loads(reply.tool_calls[0]["arguments"])
        seen[key] = args == expected and reply.tool_deltas == n

    def run_floor() -> None:
        floor_run("floor", False)

    def run_floor_partials() -> None:
        floor_run("floor partials", True)

    def run_piagent() -> None:
        received: list[Any] = []
        count = [0]
        grew = [True]
        last = [0]

        def write(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
            received.append(args)
            return ok_result(terminate=True)

        def listener(event: Any) -> None:
            # A UI showing the tool call as it streams reads the partial arguments every delta.
            if event.type == "message_update" and event.assistant_message_event.type == "toolcall_delta":
                count[0] += 1
                partial = event.message.content[event.assistant_message_event.content_index].arguments
                size = len(partial.get("content", ""))
                grew[0] = grew[0] and size >= last[0]
                last[0] = size

        agent = new_agent(model, [make_tool("write", WRITE_SCHEMA, write)])
        agent.subscribe(listener)
        result = agent.prompt("write it")
        seen["piagent"] = (received == [expected], count[0], grew[0], result.stop_reason, result.error_message)

    def check() -> None:
        ok = seen["piagent"][:3] == (True, n, True)
        report.check(
            "args", f"piagent: exact arguments after {n:,} deltas, partials growing", ok, failure=seen["piagent"]
        )
        report.check("args", f"floor: exact arguments after {n:,} deltas", bool(seen["floor"]))
        report.check(
            "args", f"floor reading partials: exact arguments after {n:,} deltas", bool(seen["floor partials"])
        )

    return run_floor, run_floor_partials, run_piagent, check


def bench_args(server: BenchServer, sizes: Sizes, report: Report) -> None:
    small, large = sizes.args_deltas
    floor_small, partials_small, piagent_small, check_small = _args_runs(server, small, report)
    floor_large, partials_large, piagent_large, check_large = _args_runs(server, large, report)
    rounds = Rounds(
        {
            "floor small": floor_small,
            "partials small": partials_small,
            "piagent small": piagent_small,
            "floor large": floor_large,
            "partials large": partials_large,
            "piagent large": piagent_large,
        },
        sizes.args_repeats,
    )
    check_small()
    check_large()
    # The listener reads the partial arguments after every delta: the fair floor does that too
    # (benchmarks/floor.py), so its ratio is what piagent adds around the incremental parse.
    for floor_name, what, target in (("floor", "", 2.0), ("partials", ", floor reading partials", 1.15)):
        for n, key in ((small, "small"), (large, "large")):
            ratio = rounds.ratio(f"piagent {key}", f"{floor_name} {key}")
            size = len(wire.args_json(n))
            report.add(
                Row(
                    "args",
                    f"time, {size / 1000:,.0f} KB in {n:,} deltas{what}",
                    ms(rounds.median(f"piagent {key}").wall),
                    ms(rounds.median(f"{floor_name} {key}").wall),
                    times(ratio),
                    f"<= {target:.2f}x floor",
                    ratio <= target,
                )
            )
    cpu_piagent, cpu_floor = rounds.median("piagent large").cpu, rounds.median("floor large").cpu
    report.add(
        Row(
            "args",
            f"client CPU per delta, {large:,} deltas",
            f"{cpu_piagent / large * 1e6:.1f} us",
            f"{cpu_floor / large * 1e6:.1f} us",
            times(rounds.ratio("piagent large", "floor large", cpu=True)),
        )
    )
    growth = rounds.best_ratio("piagent large", "piagent small")
    report.add(
        Row(
            "args",
            f"time growth (best runs), {small:,} -> {large:,} deltas",
            times(growth),
            times(rounds.best_ratio("floor large", "floor small")),
            target="<= 2.00x (linear)",
            passed=growth <= 2.0,
        )
    )
    # The floor's own growth (beside it) shows how much the machine adds: on a shared 2-core
    # machine even the bare loop's growth wanders across 2.00x. Client CPU is piagent's work.
    report.add(
        Row(
            "args",
            f"client CPU growth, {small:,} -> {large:,} deltas",
            times(rounds.ratio("piagent large", "piagent small", cpu=True)),
            times(rounds.ratio("floor large", "floor small", cpu=True)),
        )
    )
    if sizes.memory:
        piagent_peak, floor_peak = peak_memory(piagent_small), peak_memory(floor_small)
        report.add(
            Row(
                "args",
                f"peak memory, {small:,} deltas",
                mib(piagent_peak),
                mib(floor_peak),
                times(piagent_peak / floor_peak),
            )
        )


# --------------------------------------------------------------------------- 3. turns


def _faux_turns(turns: int) -> list[Any]:
    """The HTTP turns again, for the faux provider (4-character chunks): 40 text chunks and
    arguments of 80 characters (20 chunks) per turn, then the final answer."""
    from piagent.testing import faux_message, faux_text, faux_tool_call

    script = []
    for turn in range(turns):
        args: dict[str, Any] = {"turn": turn, "note": ""}
        args["note"] = "x" * (80 - len(json.dumps(args)))
        script.append(faux_message([faux_text("abcd" * 40), faux_tool_call("noop", args, id=f"call_turn_{turn}")]))
    script.append(faux_message(wire.final_text()))
    return script


def bench_turns(server: BenchServer, sizes: Sizes, report: Report) -> None:
    from piagent.testing import register_faux_provider

    turns = sizes.turns
    calls = turns + 1  # the last call answers with text
    base = server.base_url("turns", turns)
    session = floor.new_session()
    model = http_model(base)
    tools = [_openai_tool("noop", NOOP_SCHEMA)]
    seen: dict[str, Any] = {}

    def noop(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
        return ok_result()

    def run_floor() -> None:
        replies = floor.run_tools(session, base, "go", tools)
        seen["floor"] = len(replies) == calls and replies[-1].text == wire.final_text()

    def run_agent(agent_model: Any, key: str) -> None:
        events = [0]

        def listener(event: Any) -> None:
            events[0] += 1

        agent = new_agent(agent_model, [make_tool("noop", NOOP_SCHEMA, noop)])
        agent.subscribe(listener)
        result = agent.prompt("go")
        ids = [m.tool_call_id for m in tool_results(result)]
        seen[key] = (
            ids == [f"call_turn_{t}" for t in range(turns)],
            result.text == wire.final_text(),
            result.error_message,
        )

    rounds = Rounds({"floor": run_floor, "piagent": lambda: run_agent(model, "piagent")}, sizes.repeats)
    floor_t, piagent_t = rounds.median("floor"), rounds.median("piagent")

    faux = register_faux_provider(chunk_tokens=(1, 1))
    try:
        faux_model = faux.get_model()

        def run_faux() -> None:
            faux.set_responses(_faux_turns(turns))
            run_agent(faux_model, "faux")

        run_faux()
        faux_t = median_timing([timed(run_faux)[0] for _ in range(sizes.repeats)])
    finally:
        faux.unregister()

    for key, how in (("piagent", "HTTP"), ("faux", "faux")):
        ok = seen[key][:2] == (True, True)
        report.check("turns", f"piagent ({how}): {turns} tool results in order, final answer", ok, failure=seen[key])
    report.check("turns", f"floor: {calls} calls, final answer", bool(seen["floor"]))
    ratio = rounds.ratio("piagent", "floor")
    report.add(
        Row(
            "turns",
            f"HTTP wall per model call ({calls} calls)",
            ms(piagent_t.wall / calls),
            ms(floor_t.wall / calls),
            times(ratio),
            "<= 3.00x floor",
            ratio <= 3.0,
        )
    )
    cpu_ratio = rounds.ratio("piagent", "floor", cpu=True)
    report.add(
        Row(
            "turns",
            "HTTP client CPU per model call",
            ms(piagent_t.cpu / calls),
            ms(floor_t.cpu / calls),
            times(cpu_ratio),
            "<= 1.50x floor",
            cpu_ratio <= 1.5,
        )
    )
    report.add(Row("turns", "faux provider wall per model call", ms(faux_t.wall / calls)))
    report.add(Row("turns", "faux provider CPU per model call", ms(faux_t.cpu / calls)))


# --------------------------------------------------------------------------- 4. parallel


def bench_parallel(server: BenchServer, sizes: Sizes, report: Report) -> None:
    n, sleep = sizes.parallel_tools, sizes.parallel_sleep
    model = http_model(server.base_url("parallel", n))
    expected_ids = [f"call_sleep_{i}" for i in range(n)]

    def sleeper(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
        time.sleep(sleep)
        return ok_result()

    def run(mode: str) -> tuple[float, bool]:
        starts: list[float] = []
        ends: list[float] = []

        def listener(event: Any) -> None:
            if event.type == "tool_execution_start":
                starts.append(time.perf_counter())
            elif event.type == "tool_execution_end":
                ends.append(time.perf_counter())

        agent = new_agent(model, [make_tool("sleep", SLEEP_SCHEMA, sleeper)], tool_execution=mode)
        agent.subscribe(listener)
        result = agent.prompt("sleep")
        in_order = [m.tool_call_id for m in tool_results(result)] == expected_ids and len(ends) == n
        return (max(ends) - min(starts) if starts and ends else float("nan")), in_order

    run("parallel")  # warm-up
    parallel = [run("parallel") for _ in range(sizes.repeats)]
    sequential = [run("sequential") for _ in range(sizes.sequential_repeats)]
    phase = sorted(p for p, _ in parallel)[len(parallel) // 2]
    baseline = sorted(s for s, _ in sequential)[len(sequential) // 2]
    limit = sleep + 0.010  # what the batch adds to its slowest call
    report.check(
        "parallel", "tool results in call order (parallel and sequential)", all(ok for _, ok in parallel + sequential)
    )
    report.add(
        Row(
            "parallel",
            f"tool phase, {n} tools x {sleep * 1000:.0f} ms",
            ms(phase),
            f"seq {ms(baseline)}",
            times(baseline / phase),
            f"<= {limit * 1000:.0f} ms",
            phase <= limit,
        )
    )


# --------------------------------------------------------------------------- 5. fan-out


def bench_fanout(server: BenchServer, sizes: Sizes, report: Report) -> None:
    runs, threads, deltas = sizes.fanout_agents, sizes.fanout_threads, sizes.fanout_deltas
    base = server.base_url("echo", deltas)
    model = http_model(base)
    session = floor.new_session()
    markers = [f"marker-{i:03d}" for i in range(runs)]

    def agent_run(marker: str) -> bool:
        agent = new_agent(model)
        agent.subscribe(lambda event: None)
        result = agent.prompt(marker)
        return result.text == "".join(wire.echo_deltas(deltas, marker))

    def floor_run(marker: str) -> bool:
        reply = floor.call(session, base, [{"role": "user", "content": marker}])
        return reply.text == "".join(wire.echo_deltas(deltas, marker))

    outcome: dict[str, list[bool]] = {}

    def fan(name: str, fn: Callable[[str], bool]) -> Callable[[], None]:
        def run() -> None:
            with ThreadPoolExecutor(threads) as pool:
                outcome[name] = list(pool.map(fn, markers))

        return run

    rounds = Rounds({"floor": fan("floor", floor_run), "piagent": fan("piagent", agent_run)}, sizes.repeats)
    floor_t, piagent_t = rounds.median("floor"), rounds.median("piagent")
    report.check(
        "fan-out",
        f"piagent: each of {runs} agents got its own marker",
        all(outcome["piagent"]),
        f"{sum(outcome['piagent'])}/{runs}",
    )
    report.check(
        "fan-out", "floor: each run got its own marker", all(outcome["floor"]), f"{sum(outcome['floor'])}/{runs}"
    )
    report.add(
        Row(
            "fan-out",
            f"total, {runs} runs on {threads} threads",
            ms(piagent_t.wall),
            ms(floor_t.wall),
            times(rounds.ratio("piagent", "floor")),
        )
    )
    overhead = (piagent_t.wall - floor_t.wall) * threads / runs
    report.add(Row("fan-out", "per-run latency over the floor", ms(overhead)))
    report.add(
        Row(
            "fan-out",
            "client CPU per run",
            ms(piagent_t.cpu / runs),
            ms(floor_t.cpu / runs),
            times(rounds.ratio("piagent", "floor", cpu=True)),
        )
    )


# --------------------------------------------------------------------------- 6. concurrent runs


def concurrent_runs(
    base: str, runs: int, turns: int, tool: Optional[Callable[[str], None]] = None
) -> dict[str, Callable[[], list[bool]]]:
    """``runs`` runs of ``turns`` tool turns started at once, a thread each, by piagent (an Agent
    per run) and by the floor (a bare tool loop per run); each returns which runs came out right.
    ``tool``, if given, is called with the call's id in each side's tool."""
    model = http_model(base)
    # room for a kept connection per thread; piagent's pool keeps 64 per host (the runs held ~20 at once here)
    session = floor.new_session(pool_maxsize=runs)
    tools = [_openai_tool("noop", NOOP_SCHEMA)]
    expected_ids = [f"call_turn_{t}" for t in range(turns)]

    def noop(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
        if tool is not None:
            tool(tool_call_id)
        return ok_result()

    def agent_run() -> bool:
        agent = new_agent(model, [make_tool("noop", NOOP_SCHEMA, noop)])
        agent.subscribe(lambda event: None)
        result = agent.prompt("go")
        return [m.tool_call_id for m in tool_results(result)] == expected_ids and result.text == wire.final_text()

    def floor_run() -> bool:
        replies = floor.run_tools(session, base, "go", tools, tool)
        return len(replies) == turns + 1 and replies[-1].text == wire.final_text()

    def at_once(fn: Callable[[], bool]) -> Callable[[], list[bool]]:
        def run() -> list[bool]:
            results = [False] * runs

            def one(index: int) -> None:
                results[index] = fn()

            threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(runs)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            return results

        return run

    return {"piagent": at_once(agent_run), "floor": at_once(floor_run)}


def bench_concurrent(server: BenchServer, sizes: Sizes, report: Report) -> None:
    """Many runs at once in one process, as a web server's request threads would start them:
    wall time and client CPU side by side in this process, and the peak memory each side adds
    to a fresh process of its own (benchmarks/concurrent.py: resident memory, thread stacks and
    all, which tracemalloc does not see)."""
    import subprocess
    import sys

    runs, turns = sizes.concurrent_runs, sizes.concurrent_turns
    base = server.base_url("turns", turns)
    sides = concurrent_runs(base, runs, turns)
    outcome: dict[str, list[bool]] = {}

    def timed_side(name: str) -> Callable[[], None]:
        return lambda: outcome.__setitem__(name, sides[name]())

    rounds = Rounds({"floor": timed_side("floor"), "piagent": timed_side("piagent")}, sizes.concurrent_repeats)
    for name in ("piagent", "floor"):
        done = sum(outcome[name])
        report.check(
            "concurrent",
            f"{name}: each of {runs} runs got its {turns} tool results and the answer",
            done == runs,
            f"{done}/{runs}",
        )
    ratio = rounds.ratio("piagent", "floor")
    report.add(
        Row(
            "concurrent",
            f"wall, {runs} runs at once ({turns} tool turns each, a thread each)",
            ms(rounds.median("piagent").wall),
            ms(rounds.median("floor").wall),
            times(ratio),
            "<= 1.30x floor",
            ratio <= 1.3,
        )
    )
    report.add(
        Row(
            "concurrent",
            "client CPU per run",
            ms(rounds.median("piagent").cpu / runs),
            ms(rounds.median("floor").cpu / runs),
            times(rounds.ratio("piagent", "floor", cpu=True)),
        )
    )
    if not sizes.memory:
        return

    def added_memory(side: str, *mode: str) -> int:
        argv = [sys.executable, "-m", "benchmarks.concurrent", side, base, str(runs), str(turns), *mode]
        out = subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120, cwd=_ROOT)
        return int(out.stdout.split()[-1])

    def median_of_three(*mode: str) -> tuple[int, int]:
        """The median of three fresh processes per side, in turns: piagent's, the floor's."""
        added: dict[str, list[int]] = {"piagent": [], "floor": []}
        for _ in range(3):
            for side in added:
                added[side].append(added_memory(side, *mode))
        return sorted(added["piagent"])[1], sorted(added["floor"])[1]

    piagent_peak, floor_peak = median_of_three()
    ratio = piagent_peak / floor_peak
    report.add(
        Row(
            "concurrent",
            f"peak memory added by {runs} runs at once (resident, fresh process)",
            mib(piagent_peak),
            mib(floor_peak),
            times(ratio),
            "<= 1.50x floor",
            ratio <= 1.5,
        )
    )
    piagent_held, floor_held = median_of_three("held")
    report.add(
        Row(
            "concurrent",
            f"memory per run, all {runs} in flight (held in a tool call; resident, fresh process)",
            kib(piagent_held / runs),
            kib(floor_held / runs),
            times(piagent_held / floor_held),
        )
    )
    python_peak = peak_memory(sides["piagent"]), peak_memory(sides["floor"])
    report.add(
        Row(
            "concurrent",
            f"peak Python memory, {runs} runs at once (tracemalloc)",
            mib(python_peak[0]),
            mib(python_peak[1]),
            times(python_peak[0] / python_peak[1]),
        )
    )


# --------------------------------------------------------------------------- 7. otel


def bench_otel(server: BenchServer, sizes: Sizes, report: Report) -> None:
    """The HTTP turns run with ``piagent.instrument()`` on against the same run with it off
    (not installed), round by round: spans recorded by the OpenTelemetry SDK (a batch span
    processor, an in-memory exporter), the same plus metrics (the SDK's meter provider and a
    reader), and installed with nothing recording (no SDK configured; a sampler that records
    no span)."""
    from opentelemetry.metrics import NoOpMeterProvider
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    import piagent

    turns = sizes.turns
    model = http_model(server.base_url("turns", turns))
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    unsampled = TracerProvider(sampler=ALWAYS_OFF)
    unsampled.add_span_processor(BatchSpanProcessor(exporter))
    metric_reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[metric_reader])
    providers: dict[str, Any] = {
        "spans": (tracer_provider, NoOpMeterProvider()),
        "metrics": (tracer_provider, meter_provider),
        "no sdk": (None, None),  # OpenTelemetry's global providers, no-ops until an SDK is set
        "unsampled": (unsampled, None),
    }
    seen: dict[str, bool] = {}

    def noop(tool_call_id: str, args: Any, signal: Any, on_update: Any) -> Any:
        return ok_result()

    def run(key: str) -> None:
        if key != "off":
            piagent.instrument(*providers[key])
        try:
            result = new_agent(model, [make_tool("noop", NOOP_SCHEMA, noop)]).prompt("go")
        finally:
            piagent.uninstrument()
        seen[key] = len(tool_results(result)) == turns and result.text == wire.final_text()

    rounds = Rounds({key: (lambda key=key: run(key)) for key in ("off", *providers)}, sizes.otel_repeats)
    tracer_provider.force_flush()
    unsampled.force_flush()
    spans = exporter.get_finished_spans()
    per_run = 1 + (turns + 1) + turns  # invoke_agent, a chat span per model call, an execute_tool per tool call
    runs = 2 * (sizes.otel_repeats + 1)  # spans and metrics, each with its warm-up round
    report.check("otel", "every run answers; one span tree per recorded run", all(seen.values()) and len(seen) == 5)
    report.check(
        "otel", f"{per_run} spans per recorded run, none unsampled", len(spans) == per_run * runs, failure=len(spans)
    )
    tracer_provider.shutdown()
    unsampled.shutdown()
    off = rounds.median("off")
    report.add(
        Row(
            "otel",
            f"run of {turns} tool turns, spans recorded vs off",
            ms(rounds.median("spans").wall),
            ms(off.wall),
            times(rounds.ratio("spans", "off")),
        )
    )
    # the targets are on CPU: the wall time of a run on a shared machine moves more than tracing adds
    rows = (
        ("spans", "CPU of that run, spans recorded (SDK) vs off", "<= 1.10x off", 1.1),
        ("no sdk", "CPU, instrumented with no SDK configured vs off", "<= 1.05x (not measurable)", 1.05),
        ("unsampled", "CPU, instrumented, the sampler records no span vs off", "<= 1.05x (not measurable)", 1.05),
    )
    for key, measure, target, bound in rows:
        ratio = rounds.ratio(key, "off", cpu=True)
        report.add(Row("otel", measure, ms(rounds.median(key).cpu), ms(off.cpu), times(ratio), target, ratio <= bound))
    # Metrics: the conventions record gen_ai.client.operation.time_per_output_chunk once per
    # streamed chunk (63 per turn here, one every ~30 us), and one SDK Histogram.record costs
    # about 10 us (it copies, cleans and hashes the attributes each time): most of what metrics
    # add is that, shown beside the ratio (no target: the SDK's cost per record is not piagent's).
    metrics = rounds.median("metrics")
    records = _histogram_records(metric_reader) / (sizes.otel_repeats + 1)
    record_cost = _histogram_record_cost()
    report.add(
        Row(
            "otel",
            "CPU, spans and metrics recorded (SDK) vs off",
            ms(metrics.cpu),
            ms(off.cpu),
            times(rounds.ratio("metrics", "off", cpu=True)),
        )
    )
    report.add(
        Row(
            "otel",
            "histogram records per run; one SDK Histogram.record alone",
            f"{records:,.0f}",
            f"{record_cost * 1e6:.1f} us",
        )
    )
    for key, what in (("spans", "2 spans"), ("metrics", f"2 spans, {records / turns:.0f} histogram records")):
        added = max(0.0, rounds.median(key).cpu - off.cpu) / turns
        report.add(Row("otel", f"CPU added per turn ({what})", ms(added)))


def _histogram_records(reader: Any) -> int:
    """The measurements piagent's histograms took so far (cumulative data points)."""
    data = reader.get_metrics_data()
    return sum(
        point.count
        for resource in (data.resource_metrics if data else ())
        for scope in resource.scope_metrics
        if scope.scope.name == "piagent"
        for metric in scope.metrics
        for point in metric.data.data_points
    )


def _histogram_record_cost(calls: int = 2_000, batches: int = 7) -> float:
    """CPU of one ``Histogram.record`` of the OpenTelemetry SDK with a chat call's five metric
    attributes, inside a recording span (as piagent records them): the median of ``batches``."""
    import statistics

    from opentelemetry import trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    from piagent.otel._convention import DURATION_BUCKETS

    histogram = (
        MeterProvider(metric_readers=[InMemoryMetricReader()])
        .get_meter("bench")
        .create_histogram("bench.duration", unit="s", explicit_bucket_boundaries_advisory=DURATION_BUCKETS)
    )
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "bench",
        "gen_ai.request.model": wire.MODEL,
        "server.address": "127.0.0.1",
        "server.port": 8080,
    }
    costs = []
    with trace.use_span(TracerProvider().get_tracer("bench").start_span("bench"), end_on_exit=True):
        for _ in range(batches):
            started = time.process_time()
            for _ in range(calls):
                histogram.record(0.001, attributes)
            costs.append((time.process_time() - started) / calls)
    return statistics.median(costs)


# --------------------------------------------------------------------------- import time


def bench_import(sizes: Sizes, report: Report) -> None:
    import statistics
    import subprocess
    import sys

    def fresh(module: str) -> float:
        code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60)
        return float(out.stdout.strip())

    piagent = statistics.median(fresh("piagent") for _ in range(sizes.import_repeats))
    requests_ = statistics.median(fresh("requests") for _ in range(sizes.import_repeats))
    report.add(Row("import", "import piagent (fresh process)", ms(piagent), f"requests {ms(requests_)}"))


# --------------------------------------------------------------------------- 8. structured output


def _output_runs(items: int, repeats: int) -> tuple[Rounds, dict[str, Any]]:
    """The same JSON answer streamed by the faux provider (4-character chunks), read as text, as
    a structured output (validation, conversion) by a listener of every update that does not
    read ``partial_output``, and by one that reads it at every update."""
    from piagent.testing import faux_message, register_faux_provider

    data = [{"name": f"item {i}", "amount": i * 1.5, "tags": ["a", "b"]} for i in range(items)]
    answer = json.dumps({"value": data})
    faux = register_faux_provider(chunk_tokens=(1, 1))
    seen: dict[str, Any] = {"chars": len(answer)}

    def run(key: str, output_type: Any) -> None:
        partials = [0]
        read = key == "read"

        def listener(event: Any) -> None:
            if event.type == "message_update" and read and event.partial_output is not None:
                partials[0] += 1

        faux.set_responses([faux_message(answer)])
        agent = new_agent(faux.get_model())
        agent.subscribe(listener)
        result = agent.prompt("go", output_type=output_type) if output_type else agent.prompt("go")
        seen[key] = (result.text == answer, output_type is None or result.output == data, partials[0])

    output_type = list[dict[str, Any]]
    runs = {
        "text": lambda: run("text", None),
        "output": lambda: run("output", output_type),
        "read": lambda: run("read", output_type),
    }
    try:
        rounds = Rounds(runs, repeats)
    finally:
        faux.unregister()
    return rounds, seen


def bench_output(server: BenchServer, sizes: Sizes, report: Report) -> None:
    small, large = sizes.output_items
    small_rounds, small_seen = _output_runs(small, sizes.repeats)
    large_rounds, large_seen = _output_runs(large, sizes.repeats)
    for items, seen in ((small, small_seen), (large, large_seen)):
        ok = all(seen[key][:2] == (True, True) for key in ("text", "output", "read")) and seen["read"][2] > items
        report.check(
            "output", f"{items:,} items: the output equals the data, partial output streamed", ok, failure=seen
        )
    for rounds, seen in ((small_rounds, small_seen), (large_rounds, large_seen)):
        ratio = rounds.ratio("output", "text", cpu=True)
        report.add(
            Row(
                "output",
                f"CPU, {seen['chars'] / 1000:,.0f} KB output vs the same text (faux)",
                ms(rounds.median("output").cpu),
                f"text {ms(rounds.median('text').cpu)}",
                times(ratio),
                "<= 1.30x text",
                ratio <= 1.3,
            )
        )
    # A listener reading partial_output at every update has every 4-character delta parsed
    # on its own (the incremental parser's cost per call); the whole answer is still parsed once.
    read_ratio = small_rounds.ratio("read", "text", cpu=True)
    report.add(
        Row(
            "output",
            f"the same, {small_seen['chars'] / 1000:,.0f} KB, partial_output read at every update",
            ms(small_rounds.median("read").cpu),
            f"text {ms(small_rounds.median('text').cpu)}",
            times(read_ratio),
            "<= 2.50x text",
            read_ratio <= 2.5,
        )
    )
    # The faux text run's own growth (beside it) is what the machine and the loop add; the
    # structured output must not grow faster than that (no copy of the value per update, no
    # re-parse of the text read so far).
    text_growth = large_rounds.median("text").cpu / small_rounds.median("text").cpu
    for key, how in (("output", ""), ("read", ", partial_output read")):
        growth = large_rounds.median(key).cpu / small_rounds.median(key).cpu
        report.add(
            Row(
                "output",
                f"CPU growth, {small:,} -> {large:,} items{how} (text's beside it)",
                times(growth),
                f"text {times(text_growth)}",
                times(growth / text_growth),
                "<= 1.10x text's",
                growth <= 1.1 * text_growth,
            )
        )


_FIRST_REQUEST = """
import sys, time
started = time.perf_counter()
from piagent import Agent, tool
from piagent.ai import Model
imported = time.perf_counter()

@tool
def add(a: int, b: int = 1) -> int:
    'Add two integers.'
    return a + b

model = Model(id="bench", api="openai-completions", provider="bench", base_url=sys.argv[1])
agent = Agent(model=model, tools=[add], get_api_key=lambda provider: "k")
built = time.perf_counter()
first = []
agent.subscribe(lambda e: first or e.type != "message_update" or first.append(time.perf_counter()))
called = time.perf_counter()
agent.prompt("hi")
print(imported - started, built - imported, first[0] - called)
"""


def bench_first_request(server: BenchServer, sizes: Sizes, report: Report) -> None:
    """A fresh process: import, build an Agent with one @tool, then ``prompt()`` until the first
    streamed token is back (the server answers at once: the time is the client's)."""
    import statistics
    import subprocess
    import sys
    import tempfile

    url = server.base_url("text", 200)
    runs = []
    for _ in range(sizes.import_repeats):
        out = subprocess.run(
            [sys.executable, "-c", _FIRST_REQUEST, url],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tempfile.gettempdir(),  # the installed piagent, not a directory named so here
        )
        runs.append([float(x) for x in out.stdout.split()])
    imported, built, first = (statistics.median(column) for column in zip(*runs))
    report.add(
        Row(
            "first request",
            "prompt() to the first streamed token (fresh process)",
            ms(first),
            f"import {ms(imported)}, Agent() {ms(built)}",
            target="< 30 ms",
            passed=first < 0.030,
        )
    )


SCENARIOS = (
    bench_stream,
    bench_args,
    bench_turns,
    bench_parallel,
    bench_fanout,
    bench_concurrent,
    bench_otel,
    bench_output,
    bench_first_request,
)


def run_all(sizes: Sizes = FULL, only: Sequence[str] = ()) -> Report:
    """Start the server, run every scenario (or those named in ``only``) and return the report."""
    report = Report()
    started = time.perf_counter()
    with BenchServer() as server:
        for scenario in SCENARIOS:
            name = scenario.__name__[len("bench_") :]
            if not only or name in only:
                scenario(server, sizes, report)
    if not only or "sessions" in only:
        bench_sessions(sizes, report)
    if not only or "effects" in only:
        bench_effects(sizes, report)
    if not only or "compaction" in only:
        bench_compaction(sizes, report)
    if not only or "import" in only:
        bench_import(sizes, report)
    if not only or "remote" in only:
        bench_remote(sizes, report)
    elapsed = time.perf_counter() - started
    report.add(Row("total", "make bench run time", f"{elapsed:,.1f} s", target="< 300 s", passed=elapsed < 300))
    return report
