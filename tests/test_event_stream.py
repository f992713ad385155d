"""EventStream push/pull semantics (docs/llm.md#event-streams), and where piagent differs from
pi (no hang, errors delivered)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from piagent import StreamEndedWithoutResult
from piagent.ai import AssistantMessage, AssistantMessageEvent, AssistantMessageEventStream, EventStream
from tests.support.loop import WAIT, assistant, block_events, terminal


def numbers() -> EventStream[int, str]:
    """Ints; a negative int completes the stream with result ``"done:<n>"``."""
    return EventStream(lambda n: n < 0, lambda n: f"done:{n}")


def test_push_then_iterate_yields_in_order_and_stops_at_end() -> None:
    stream = numbers()
    for n in (1, 2, 3):
        stream.push(n)
    stream.end()
    assert list(stream) == [1, 2, 3]


def test_the_completing_event_is_delivered_and_resolves_the_result() -> None:
    stream = numbers()
    stream.push(1)
    stream.push(-7)
    assert stream.done
    assert list(stream) == [1, -7]
    assert stream.result() == "done:-7"


def test_events_after_completion_are_dropped() -> None:
    stream = numbers()
    stream.push(-1)
    stream.push(2)
    stream.push(-3)
    assert list(stream) == [-1]
    assert stream.result() == "done:-1"


def test_events_after_end_are_dropped() -> None:
    stream = numbers()
    stream.push(1)
    stream.end("finished")
    stream.push(2)
    assert list(stream) == [1]


def test_end_result_first_resolution_wins() -> None:
    stream = numbers()
    stream.end("first")
    stream.end("second")
    stream.end(error=RuntimeError("late"))
    assert stream.result() == "first"


def test_end_after_a_completing_event_keeps_the_events_result() -> None:
    stream = numbers()
    stream.push(-2)
    stream.end("ignored")
    assert stream.result() == "done:-2"


def test_a_consumer_blocked_on_an_empty_stream_is_woken_by_a_push_from_another_thread() -> None:
    stream = numbers()
    got: list[int] = []
    waiting = threading.Event()

    def consume() -> None:
        waiting.set()
        got.extend(stream)

    consumer = threading.Thread(target=consume)
    consumer.start()
    assert waiting.wait(WAIT)
    stream.push(5)
    stream.push(-1)
    consumer.join(WAIT)
    assert not consumer.is_alive()
    assert got == [5, -1]


def test_each_event_goes_to_exactly_one_of_two_concurrent_consumers() -> None:
    stream = numbers()
    received: list[list[int]] = [[], []]
    ready = threading.Barrier(3)

    def consume(slot: int) -> None:
        ready.wait(WAIT)
        for n in stream:
            received[slot].append(n)

    consumers = [threading.Thread(target=consume, args=(slot,)) for slot in (0, 1)]
    for consumer in consumers:
        consumer.start()
    ready.wait(WAIT)
    for n in range(1, 2001):
        stream.push(n)
    stream.end()
    for consumer in consumers:
        consumer.join(WAIT)
    assert sorted(received[0] + received[1]) == list(range(1, 2001))
    for slot in (0, 1):
        assert received[slot] == sorted(received[slot])  # each consumer sees push order


def test_result_of_a_generic_stream_ended_with_nothing_raises_instead_of_hanging() -> None:
    stream = numbers()
    stream.push(1)
    stream.end()
    with pytest.raises(StreamEndedWithoutResult):
        stream.result(timeout=WAIT)


def test_result_with_a_timeout_raises_timeout_error_while_the_stream_is_open() -> None:
    stream = numbers()
    stream.push(1)
    with pytest.raises(TimeoutError):
        stream.result(timeout=0.01)
    stream.push(-1)
    assert stream.result(timeout=0) == "done:-1"


def test_result_waits_for_a_producer_thread() -> None:
    stream = numbers()
    go = threading.Event()

    def produce() -> None:
        go.wait(WAIT)
        stream.push(-4)

    threading.Thread(target=produce).start()
    go.set()
    assert stream.result(timeout=WAIT) == "done:-4"


def test_end_with_an_error_raises_it_after_the_queued_events_and_from_result() -> None:
    stream = numbers()
    stream.push(1)
    stream.end(error=ValueError("producer broke"))
    seen: list[int] = []
    with pytest.raises(ValueError, match="producer broke"):
        for n in stream:
            seen.append(n)
    assert seen == [1]
    with pytest.raises(ValueError, match="producer broke"):
        stream.result()


# --------------------------------------------------------------------------- pull mode


def test_pull_mode_produces_each_event_on_the_consuming_thread() -> None:
    threads: list[int] = []

    def source() -> Iterator[int]:
        for n in (1, 2, -3):
            threads.append(threading.get_ident())
            yield n

    stream = EventStream(lambda n: n < 0, lambda n: f"done:{n}", source=source())
    assert threads == []  # nothing runs before the consumer asks
    assert list(stream) == [1, 2, -3]
    assert threads == [threading.get_ident()] * 3
    assert stream.result() == "done:-3"


def test_pull_mode_stops_pulling_after_the_completing_event() -> None:
    pulled: list[int] = []

    def source() -> Iterator[int]:
        for n in (1, -2, 3, 4):
            pulled.append(n)
            yield n

    stream = EventStream(lambda n: n < 0, lambda n: f"done:{n}", source=source())
    assert list(stream) == [1, -2]
    assert stream.result() == "done:-2"
    assert pulled == [1, -2]


def test_pull_mode_result_drains_the_source() -> None:
    stream = EventStream(lambda n: n < 0, lambda n: f"done:{n}", source=iter([1, 2, -9]))
    assert stream.result() == "done:-9"
    assert list(stream) == []


def test_pull_mode_source_exception_is_delivered_to_the_consumer() -> None:
    def source() -> Iterator[int]:
        yield 1
        raise OSError("connection reset")

    stream = EventStream(lambda n: n < 0, lambda n: f"done:{n}", source=source())
    seen: list[int] = []
    with pytest.raises(OSError, match="connection reset"):
        for n in stream:
            seen.append(n)
    assert seen == [1]
    assert stream.done
    with pytest.raises(OSError, match="connection reset"):
        stream.result()


def test_pull_mode_source_exception_reaches_result_without_iterating() -> None:
    def source() -> Iterator[int]:
        raise OSError("refused")
        yield 1  # pragma: no cover

    stream = EventStream(lambda n: n < 0, lambda n: f"done:{n}", source=source())
    with pytest.raises(OSError, match="refused"):
        stream.result()


def test_pull_mode_source_ending_without_a_completing_event_raises_stream_ended() -> None:
    stream = EventStream(lambda n: n < 0, lambda n: f"done:{n}", source=iter([1, 2]))
    assert list(stream) == [1, 2]
    with pytest.raises(StreamEndedWithoutResult):
        stream.result()


# --------------------------------------------------------------------------- assistant message streams


def test_assistant_stream_result_is_the_done_message() -> None:
    answer = assistant("Hi")
    stream = AssistantMessageEventStream()
    for event in block_events(answer) + [terminal(answer)]:
        stream.push(event)
    assert stream.result() is answer


def test_assistant_stream_result_is_the_error_events_message() -> None:
    failed = assistant("partial", stop_reason="aborted", error_message="Request was aborted")
    stream = AssistantMessageEventStream(source=iter([terminal(failed)]))
    assert stream.result() is failed


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_assistant_stream_ended_without_terminal_resolves_to_an_error_message_keeping_the_partial(mode: str) -> None:
    events = block_events(assistant("Hello world"))[:4]  # start, text_start, two deltas; no end, no done
    if mode == "push":
        stream = AssistantMessageEventStream()
        for event in events:
            stream.push(event)
        stream.end()
    else:
        stream = AssistantMessageEventStream(source=iter(events))
    message = stream.result(timeout=WAIT)
    assert message.stop_reason == "error"
    assert message.error_message == "Stream ended without a terminal event"
    assert message.text == "Hello world"
    assert (message.api, message.provider, message.model) == ("openai-responses", "openai", "mock")
    assert message is not events[-1].partial  # the producer's partial is left alone
    assert events[-1].partial.stop_reason == "stop"
    assert stream.result() is message


def test_assistant_stream_ended_with_no_events_resolves_to_an_empty_error_message() -> None:
    stream = AssistantMessageEventStream()
    stream.end()
    message = stream.result(timeout=WAIT)
    assert (message.stop_reason, message.content) == ("error", [])
    assert message.error_message == "Stream ended without a terminal event"


def test_assistant_stream_end_with_a_result_uses_it() -> None:
    answer = assistant("given")
    stream = AssistantMessageEventStream()
    stream.push(AssistantMessageEvent("start", assistant("")))
    stream.end(answer)
    assert stream.result() is answer


def test_closing_a_pull_stream_closes_its_source_and_ends_it() -> None:
    closed = []

    def source():
        try:
            yield AssistantMessageEvent("start", AssistantMessage())
            yield AssistantMessageEvent("text_start", AssistantMessage(), 0)
        finally:
            closed.append(True)

    stream = AssistantMessageEventStream(source())
    with stream:
        assert next(stream).type == "start"
    assert closed == [True]
    assert list(stream) == []
    assert stream.result().stop_reason == "error"
