"""Shared pieces of the reliability suite: a misbehaving server, the four wires, thread checks."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from piagent._threads import idle_threads
from tests.reliability.wires import WIRES, Wire
from tests.support.scripted_server import ScriptedServer

ENV_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite never sees the developer's real keys."""
    for name in ENV_KEYS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


@pytest.fixture(params=WIRES, ids=str)
def wire(request: pytest.FixtureRequest) -> Wire:
    return request.param


def _is_test_server_thread(thread: threading.Thread) -> bool:
    return thread.name.startswith("scripted-server") or "process_request_thread" in thread.name


@dataclass(frozen=True)
class ThreadSnapshot:
    threads: frozenset[threading.Thread]
    idle_workers: frozenset[threading.Thread]


def threads_now() -> ThreadSnapshot:
    return ThreadSnapshot(frozenset(threading.enumerate()), idle_threads())


def leftover_threads(before: ThreadSnapshot, timeout: float = 5.0) -> list[str]:
    """Names of threads still busy after a bounded wait: those started since ``before``, and
    piagent's reusable workers that were idle then (a test's job may have run on one).

    Pool and helper threads that are just finishing get ``timeout`` seconds in total; the
    test server's own threads are not counted, nor are piagent's reusable worker threads once
    they are idle (their job is over; they wait for the next one).
    """
    deadline = time.monotonic() + timeout
    alive = []
    for thread in (set(threading.enumerate()) - before.threads) | before.idle_workers:
        if _is_test_server_thread(thread):
            continue
        while thread.is_alive() and thread not in idle_threads() and time.monotonic() < deadline:
            thread.join(0.005)
        if thread.is_alive() and thread not in idle_threads():
            alive.append(thread.name)
    return sorted(alive)
