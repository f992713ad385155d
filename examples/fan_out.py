"""Fan-out: many agents at once on a ``concurrent.futures`` thread pool.

    python examples/fan_out.py

Each question gets its own agent on a worker thread; ``pool.map`` collects the answers in
order. Agents share nothing but the process: no event loop, no locks in your code. (With
the embedded model the answers are generated one at a time, since the threads share one
in-process model; with an HTTP provider the requests really run side by side.)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Optional, Union

from piagent import Agent, RunResult
from piagent.ai import Model

QUESTIONS = (
    "What is the capital of Japan?",
    "What is the capital of Italy?",
    "What is the capital of Spain?",
    "What is the capital of Canada?",
    "What colour is the sky on a clear day?",
)


def ask(question: str, model: Union[Model, str]) -> RunResult:
    agent = Agent(model=model, system_prompt="Answer in one short sentence.")
    return agent.prompt(question)


def main(
    questions: Sequence[str] = QUESTIONS, model: Union[Model, str, None] = None, max_workers: Optional[int] = None
) -> list[RunResult]:
    chosen = model or os.environ.get("PIAGENT_MODEL") or "local:smollm2-135m"
    with ThreadPoolExecutor(max_workers=max_workers or len(questions)) as pool:
        results = list(pool.map(lambda question: ask(question, chosen), questions))
    for question, result in zip(questions, results):
        print(f"{question} -> {result.text.strip() or result.error_message}")
    return results


if __name__ == "__main__":
    answers = main()
    sys.exit(1 if any(r.stop_reason in ("error", "aborted") for r in answers) else 0)
