"""Compaction's cost (docs/compaction.md): the token accounting before every request (the
``turns`` scenario on the faux provider, compaction on against off), and one compaction of a
long transcript with an instant summariser (the model's time left out)."""

from __future__ import annotations

import time
from typing import Any

from .measure import Report, Rounds, Row, ms, times

#: The transcript compacted: turns of a user message, a tool call, a 2,000-character result, an answer.
COMPACTION_TURNS = 250


def _transcript(turns: int) -> list[Any]:
    from piagent.ai.types import TextContent, ToolResultMessage, Usage, UserMessage
    from piagent.testing import faux_message, faux_tool_call

    messages: list[Any] = []
    for turn in range(turns):
        messages.append(UserMessage(f"question {turn}: " + "q" * 200))
        messages.append(faux_message([faux_tool_call("read", {"path": f"f{turn}.txt"}, f"call_{turn}")]))
        messages.append(ToolResultMessage(f"call_{turn}", "read", [TextContent("r" * 2000)]))
        messages.append(faux_message("answer " + "a" * 300, usage=Usage(input=1000 * turn, output=80)))
    return messages


def bench_compaction(sizes: Any, report: Report) -> None:
    from piagent.compaction import (
        Compaction,
        CompactionSummary,
        estimate_context_tokens,
        plan_compaction,
        run_compaction,
    )
    from piagent.testing import faux_message, register_faux_provider

    from .scenarios import NOOP_SCHEMA, _faux_turns, make_tool, new_agent, ok_result

    turns = sizes.turns
    faux = register_faux_provider(chunk_tokens=(1, 1))
    seen: dict[str, Any] = {}
    try:
        model = faux.get_model()

        def run(key: str, compaction: Any) -> None:
            faux.set_responses(_faux_turns(turns))
            tool = make_tool("noop", NOOP_SCHEMA, lambda *args: ok_result())
            result = new_agent(model, [tool], compaction=compaction).prompt("go")
            seen[key] = result.error_message is None and len(result.messages) == 2 * turns + 2

        variants = {"on": lambda: run("on", Compaction()), "off": lambda: run("off", None)}
        rounds = Rounds(variants, sizes.repeats * 3)  # a small difference: more rounds, steadier minimum
    finally:
        faux.unregister()
    report.check("compaction", "faux turns with and without compaction end alike", seen == {"on": True, "off": True})
    on, off = (min(t.cpu for t in rounds.timings[name]) for name in ("on", "off"))  # the least disturbed runs
    ratio = on / off
    calls = turns + 1
    report.add(
        Row(
            "compaction",
            f"faux turns CPU per call, accounting on vs off ({calls} calls)",
            ms(on / calls),
            ms(off / calls),
            times(ratio),
            "<= 1.05x (not measurable)",
            ratio <= 1.05,
        )
    )

    messages = _transcript(COMPACTION_TURNS if sizes.repeats > 1 else 20)
    counted = []
    started = time.perf_counter()
    for _ in range(1000):
        counted.append(estimate_context_tokens(messages).tokens)
    per_count = (time.perf_counter() - started) / 1000
    report.add(
        Row("compaction", f"token count before a request ({len(messages)} messages)", f"{per_count * 1e6:,.1f} us")
    )

    def summarizer(model: Any, context: Any) -> Any:
        return faux_message("## Goal\nRead the files")

    settings = Compaction(keep_recent_tokens=5000)
    durations, results = [], []
    for _ in range(max(3, sizes.repeats)):
        started = time.perf_counter()
        plan = plan_compaction(messages, settings, 200_000)
        assert plan is not None
        results.append(run_compaction(plan, model, summarizer))
        durations.append(time.perf_counter() - started)
    done = results[-1]
    report.check(
        "compaction",
        "one compaction keeps the recent turns whole behind the summary",
        isinstance(done.messages[0], CompactionSummary)
        and done.messages[1:] == messages[done.first_kept_index :]
        and done.tokens_after < 8000,
        failure=(len(done.messages), done.tokens_after),
    )
    best = min(durations)
    report.add(
        Row(
            "compaction",
            f"one compaction, model time excluded ({len(messages)} messages)",
            ms(best),
            target="< 50 ms",
            passed=best < 0.05,
        )
    )
