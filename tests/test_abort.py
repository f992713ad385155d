"""AbortController / AbortSignal: idempotent, thread-safe, listeners exactly once."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

import piagent.abort as abort_module
from piagent import AbortController, AbortedError
from tests.support.loop import WAIT


def test_a_fresh_signal_is_not_aborted() -> None:
    signal = AbortController().signal
    assert signal.aborted is False
    assert signal.reason is None
    signal.throw_if_aborted()  # does not raise


def test_abort_from_many_threads_at_once_is_idempotent_and_calls_listeners_once() -> None:
    controller = AbortController()
    calls: list[int] = []
    lock = threading.Lock()

    def listener() -> None:
        with lock:
            calls.append(threading.get_ident())

    controller.signal.add_listener(listener)
    start = threading.Barrier(16)

    def abort(n: int) -> None:
        start.wait(WAIT)
        controller.abort(f"reason-{n}")

    threads = [threading.Thread(target=abort, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert controller.signal.aborted
    assert len(calls) == 1
    first_reason = controller.signal.reason
    assert first_reason in {f"reason-{n}" for n in range(16)}
    controller.abort("later")
    assert controller.signal.reason == first_reason
    assert len(calls) == 1


def test_listeners_run_once_in_order_on_the_aborting_thread() -> None:
    controller = AbortController()
    seen: list[Any] = []
    for name in ("a", "b", "c"):
        controller.signal.add_listener(lambda name=name: seen.append((name, threading.get_ident())))
    aborter = threading.Thread(target=controller.abort)
    aborter.start()
    aborter.join(WAIT)
    assert [name for name, _ in seen] == ["a", "b", "c"]
    assert {ident for _, ident in seen} == {aborter.ident}
    controller.abort()
    assert len(seen) == 3


def test_add_listener_after_abort_calls_it_at_once() -> None:
    controller = AbortController()
    controller.abort("stop")
    seen: list[int] = []
    remove = controller.signal.add_listener(lambda: seen.append(threading.get_ident()))
    assert seen == [threading.get_ident()]
    remove()  # a no-op, never an error
    controller.abort()
    assert len(seen) == 1


def test_a_removed_listener_is_not_called() -> None:
    controller = AbortController()
    seen: list[str] = []
    remove = controller.signal.add_listener(lambda: seen.append("removed"))
    controller.signal.add_listener(lambda: seen.append("kept"))
    remove()
    remove()  # twice is fine
    controller.abort()
    assert seen == ["kept"]


def test_a_raising_listener_does_not_stop_the_others() -> None:
    controller = AbortController()
    seen: list[str] = []

    def broken() -> None:
        raise RuntimeError("listener broke")

    controller.signal.add_listener(broken)
    controller.signal.add_listener(lambda: seen.append("after"))
    controller.abort()
    assert seen == ["after"]
    assert controller.signal.aborted


def test_wait_times_out_while_not_aborted() -> None:
    assert AbortController().signal.wait(0.01) is False


def test_wait_returns_true_when_another_thread_aborts() -> None:
    controller = AbortController()
    waiting = threading.Event()
    result: list[bool] = []

    def waiter() -> None:
        waiting.set()
        result.append(controller.signal.wait(WAIT))

    thread = threading.Thread(target=waiter)
    thread.start()
    assert waiting.wait(WAIT)
    controller.abort()
    thread.join(WAIT)
    assert result == [True]
    assert controller.signal.wait(0) is True


def test_an_abort_while_the_first_wait_makes_its_event_still_wakes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The abort comes while the first wait() is making its Event (it is tried there, and may only
    go through once the Event is made): the wait returns True, not after its timeout."""
    controller, real_event = AbortController(), threading.Event
    aborter = threading.Thread(target=controller.abort)
    calls: list[None] = []

    def event_while_aborting() -> threading.Event:
        calls.append(None)
        if len(calls) == 1:  # the wait's Event (the aborter's start() makes another)
            aborter.start()
            aborter.join(0.2)  # a signal that makes its Event under its lock holds the abort back
        return real_event()

    monkeypatch.setattr(abort_module.threading, "Event", event_while_aborting)
    assert controller.signal.wait(WAIT) is True
    assert controller.signal.aborted and calls
    aborter.join(WAIT)


def test_throw_if_aborted_raises_aborted_error_with_the_reason() -> None:
    controller = AbortController()
    controller.abort("user pressed stop")
    with pytest.raises(AbortedError, match="user pressed stop"):
        controller.signal.throw_if_aborted()


def test_throw_if_aborted_without_a_reason_says_operation_aborted() -> None:
    controller = AbortController()
    controller.abort()
    with pytest.raises(AbortedError, match="Operation aborted"):
        controller.signal.throw_if_aborted()


def test_throw_if_aborted_raises_an_exception_reason_itself() -> None:
    controller = AbortController()
    reason = TimeoutError("deadline passed")
    controller.abort(reason)
    with pytest.raises(TimeoutError) as raised:
        controller.signal.throw_if_aborted()
    assert raised.value is reason


def test_repr_shows_the_state() -> None:
    controller = AbortController()
    assert "aborted=False" in repr(controller.signal)
    controller.abort()
    assert "aborted=True" in repr(controller.signal)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals reach the main thread")
def test_a_sigint_handler_that_aborts_while_wait_makes_its_event_does_not_deadlock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import signal

    controller = AbortController()
    previous = signal.signal(signal.SIGINT, lambda *_: controller.abort("Ctrl-C"))
    real_event = threading.Event

    def event_interrupted_by_a_sigint() -> threading.Event:
        signal.raise_signal(signal.SIGINT)  # the handler runs on this thread, within wait()
        return real_event()

    monkeypatch.setattr(abort_module, "threading", SimpleNamespace(Event=event_interrupted_by_a_sigint))
    try:
        assert controller.signal.wait(WAIT) and controller.signal.reason == "Ctrl-C"
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals reach the main thread")
def test_an_abort_from_a_signal_handler_that_interrupted_a_holder_of_the_signals_lock_does_not_deadlock() -> None:
    """The handler runs on the thread it interrupted: were it to take the signal's lock (held
    there, while a listener is added) it would wait for itself. The flag is set at once; the
    listeners and the wait's wake-up follow on a thread of their own."""
    import signal

    controller = AbortController()
    called = threading.Event()
    controller.signal.add_listener(called.set)
    previous = signal.signal(signal.SIGINT, lambda *_: controller.abort_from_signal_handler("Ctrl-C"))
    try:
        with controller.signal._lock:  # as add_listener() holds it
            signal.raise_signal(signal.SIGINT)  # the handler runs here, before raise_signal returns
            assert controller.signal.aborted and controller.signal.reason == "Ctrl-C"
            assert not called.is_set()  # its thread waits for the lock this thread holds
        assert called.wait(WAIT) and controller.signal.wait(WAIT)
    finally:
        signal.signal(signal.SIGINT, previous)
