"""iter_sse: the text/event-stream format, however the bytes are cut into chunks."""

from __future__ import annotations

import pytest

from piagent.ai.providers._sse import iter_sse

STREAM = (
    b": a comment\n"
    b"event: first\n"
    b'data: {"a": 1}\n\n'
    b"data: one line\n"
    b"data:  two lines, the second with a leading space kept\n\n"
    b"id: 7\nretry: 100\ndata:no space\r\n\r\n"
    b"event: named\r\n"
    b"data: crlf\r\n\r\n"
    b"data: [DONE]\n\n"
    b"\n\n"
    b"data: last, without a blank line"
)
EXPECTED = [
    ("first", b'{"a": 1}'),
    (None, b"one line\n two lines, the second with a leading space kept"),
    (None, b"no space"),
    ("named", b"crlf"),
    (None, b"[DONE]"),
    (None, b"last, without a blank line"),
]


def events(chunks: list[bytes]) -> list:
    return list(iter_sse(chunks))


def test_the_whole_stream_in_one_chunk() -> None:
    assert events([STREAM]) == EXPECTED


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13])
def test_any_chunk_size_gives_the_same_events(size: int) -> None:
    assert events([STREAM[i : i + size] for i in range(0, len(STREAM), size)]) == EXPECTED


def test_every_single_cut_gives_the_same_events() -> None:
    for cut in range(len(STREAM) + 1):
        assert events([STREAM[:cut], STREAM[cut:]]) == EXPECTED, cut


def test_one_event_per_chunk_keeps_a_name_sent_in_the_chunk_before() -> None:
    chunks = [b"event: delta\n", b'data: {"x": 1}\n\n', b'data: {"x": 2}\n\n', b"data: a\ndata: b\n\n"]
    assert events(chunks) == [("delta", b'{"x": 1}'), (None, b'{"x": 2}'), (None, b"a\nb")]


def test_a_data_line_cut_before_its_blank_line_waits_for_it() -> None:
    assert events([b"data: x\n", b"\n", b"data: y\n\n"]) == [(None, b"x"), (None, b"y")]


CR_STREAM = b"event: named\rdata: one\rdata: two\r\r: a comment\rdata: crlf\r\n\r\ndata: last\r\r"


def test_a_lone_cr_ends_a_line_as_lf_and_crlf_do_however_the_bytes_are_cut() -> None:
    expected = [("named", b"one\ntwo"), (None, b"crlf"), (None, b"last")]
    for cut in range(len(CR_STREAM) + 1):
        assert events([CR_STREAM[:cut], CR_STREAM[cut:]]) == expected, cut
    assert events([CR_STREAM[i : i + 1] for i in range(len(CR_STREAM))]) == expected


def test_a_crlf_cut_between_its_cr_and_its_lf_is_one_line_end() -> None:
    assert events([b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]) == [(None, b"a\nb")]
    assert events([b"data: a\r", b"", b"\n", b"data: b\r\n\r\n"]) == [(None, b"a\nb")]
