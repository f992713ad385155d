"""piagent._threads: jobs run at once on another thread, idle threads are reused, then retire."""

from __future__ import annotations

import threading

from piagent._threads import _CachedThreads
from tests.support.waits import WAIT, wait_until  # polls what the pool offers no event for


def test_a_job_runs_on_another_daemon_thread() -> None:
    threads = _CachedThreads("test")
    ran: list[threading.Thread] = []
    done = threading.Event()
    threads.submit(lambda: (ran.append(threading.current_thread()), done.set()))
    assert done.wait(WAIT)
    assert ran[0] is not threading.current_thread() and ran[0].daemon


def test_jobs_never_queue_behind_blocked_jobs() -> None:
    threads = _CachedThreads("test")
    barrier = threading.Barrier(9, timeout=WAIT)
    for _ in range(8):
        threads.submit(barrier.wait)
    barrier.wait()  # would time out if any job waited for another to finish


def test_an_idle_thread_takes_the_next_job() -> None:
    threads = _CachedThreads("test")
    seen: list[int] = []
    first = threading.Event()
    threads.submit(lambda: (seen.append(threading.get_ident()), first.set()))
    assert first.wait(WAIT) and wait_until(lambda: threads._idle == 1)
    second = threading.Event()
    threads.submit(lambda: (seen.append(threading.get_ident()), second.set()))
    assert second.wait(WAIT)
    assert seen[0] == seen[1]


def test_an_idle_thread_exits_after_the_idle_time() -> None:
    threads = _CachedThreads("test", idle_seconds=0.01)
    ran: list[threading.Thread] = []
    done = threading.Event()
    threads.submit(lambda: (ran.append(threading.current_thread()), done.set()))
    assert done.wait(WAIT)
    ran[0].join(WAIT)
    assert not ran[0].is_alive() and threads._idle == 0


def test_a_raising_job_does_not_kill_its_thread() -> None:
    threads = _CachedThreads("test")
    seen: list[int] = []

    def boom() -> None:
        seen.append(threading.get_ident())
        raise RuntimeError("boom")

    threads.submit(boom)
    assert wait_until(lambda: threads._idle == 1)
    done = threading.Event()
    threads.submit(lambda: (seen.append(threading.get_ident()), done.set()))
    assert done.wait(WAIT) and seen[0] == seen[1]


def test_idle_threads_lists_a_thread_between_jobs_and_not_while_it_works() -> None:
    threads = _CachedThreads("test")
    worker: list[threading.Thread] = []
    release = threading.Event()
    started = threading.Event()

    def job() -> None:
        worker.append(threading.current_thread())
        started.set()
        release.wait(WAIT)

    threads.submit(job)
    assert started.wait(WAIT)
    assert worker[0] not in threads.idle_threads()
    release.set()
    assert wait_until(lambda: worker[0] in threads.idle_threads())
