"""Streaming tool-call JSON (docs/llm.md#partial-tool-call-json): parse_streaming_json,
repair_json, IncrementalJsonParser."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from piagent.ai.json_stream import IncrementalJsonParser, parse_streaming_json, repair_json


def same(a: Any, b: Any) -> bool:
    """Equal including types and key order (1 vs 1.0 vs True differ)."""
    return repr(a) == repr(b)


def feed_all(deltas: list[str]) -> IncrementalJsonParser:
    parser = IncrementalJsonParser()
    for delta in deltas:
        parser.feed(delta)
    return parser


# --------------------------------------------------------------------------- step 1 and 2


@pytest.mark.parametrize("text", ["", None, " ", "\n\t \r", "\u00a0"])
def test_empty_or_whitespace_text_gives_empty_dict(text):
    assert parse_streaming_json(text) == {}


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1, "b": [true, false, null], "c": {"d": "x"}}', {"a": 1, "b": [True, False, None], "c": {"d": "x"}}),
        ('  {"a": 1.5e3}\n', {"a": 1500.0}),
        ("[1, 2]", [1, 2]),
        ("42", 42),
        ('"text"', "text"),
        ("true", True),
    ],
)
def test_strict_json_is_returned_as_parsed(text, expected):
    assert same(parse_streaming_json(text), expected)


@pytest.mark.parametrize("text", ["null", "  null \n"])
def test_strict_null_is_passed_through(text):
    assert parse_streaming_json(text) is None


def test_strict_parse_keeps_last_duplicate_key_in_first_position():
    assert same(parse_streaming_json('{"a": 1, "b": 2, "a": 3}'), {"a": 3, "b": 2})


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": Infinity}', "[-Infinity]", "NaN"])
def test_nan_and_infinity_are_not_json(text):
    assert parse_streaming_json(text) == {}


# --------------------------------------------------------------------------- repair


@pytest.mark.parametrize(
    "raw, escaped",
    [("\b", "\\b"), ("\f", "\\f"), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")],
)
def test_repair_escapes_named_control_characters_by_name(raw, escaped):
    assert repair_json('{"a": "x' + raw + 'y"}') == '{"a": "x' + escaped + 'y"}'


@pytest.mark.parametrize("code", [0x00, 0x01, 0x0B, 0x1F])
def test_repair_escapes_other_control_characters_as_u00xx(code):
    assert repair_json('"' + chr(code) + '"') == f'"\\u{code:04x}"'


@pytest.mark.parametrize("escape", ['\\"', "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u00e9", "\\uD83D"])
def test_repair_keeps_valid_escapes(escape):
    text = '{"a": "x' + escape + 'y"}'
    assert repair_json(text) == text


@pytest.mark.parametrize(
    "text, repaired", [('"C:\\dir"', '"C:\\\\dir"'), ('"\\x41"', '"\\\\x41"'), ('"\\ "', '"\\\\ "')]
)
def test_repair_doubles_backslash_before_invalid_escape(text, repaired):
    assert repair_json(text) == repaired


@pytest.mark.parametrize(
    "text, repaired", [('"\\u12"', '"\\\\u12"'), ('"\\u00g9"', '"\\\\u00g9"'), ('"\\u12', '"\\\\u12')]
)
def test_repair_doubles_backslash_of_u_without_four_hex_digits(text, repaired):
    assert repair_json(text) == repaired


def test_repair_doubles_backslash_at_end_of_input():
    assert repair_json('{"a": "x\\') == '{"a": "x\\\\'


def test_repair_leaves_text_outside_strings_unchanged():
    text = '{\n\t"a" : [1, \\q, \x01]}  \\'
    assert repair_json(text) == text


def test_repair_tracks_escaped_quotes_as_inside_the_string():
    assert repair_json('["a\\"\n", "\n"]') == '["a\\"\\n", "\\n"]'


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": "line1\nline2"}', {"a": "line1\nline2"}),
        ('{"path": "C:\\dir\\new"}', {"path": "C:\\dir\new"}),  # \n is a valid escape: kept
        ('{"a": "\\u12"}', {"a": "\\u12"}),
        ('"tab\there"', "tab\there"),
    ],
)
def test_repaired_text_is_parsed_strictly(text, expected):
    assert same(parse_streaming_json(text), expected)


# --------------------------------------------------------------------------- step 3: partial JSON


def test_unterminated_string_is_completed():
    assert parse_streaming_json('{"a": "he') == {"a": "he"}


def test_empty_unterminated_string_value_is_kept():
    assert parse_streaming_json('{"a": "') == {"a": ""}


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a":', {}),
        ('{"a": ', {}),
        ('{"a"', {}),
        ('{"a', {}),
        ('{"', {}),
        ("{", {}),
        ('{"a": 1, "b', {"a": 1}),
        ('{"a": 1, "b"', {"a": 1}),
        ('{"a": 1, "b":', {"a": 1}),
        ('{"a": 1,', {"a": 1}),
        ('{"a": 1, ', {"a": 1}),
    ],
)
def test_unfinished_key_value_pair_is_dropped(text, expected):
    assert same(parse_streaming_json(text), expected)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[", []),
        ("[1, 2", [1, 2]),
        ("[1, 2,", [1, 2]),
        ('{"a": [1, {"b": [', {"a": [1, {"b": []}]}),
        ('{"a": {', {"a": {}}),
        ('{"a": {"b": 1}, "c": [{"d": "e', {"a": {"b": 1}, "c": [{"d": "e"}]}),
    ],
)
def test_unterminated_arrays_and_objects_are_closed(text, expected):
    assert same(parse_streaming_json(text), expected)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("t", True),
        ("tru", True),
        ("[fa", [False]),
        ('{"a": f', {"a": False}),
        ('{"a": n', {"a": None}),
        ('{"a": nul', {"a": None}),
        ("[nu", [None]),
    ],
)
def test_partial_literal_is_completed(text, expected):
    assert same(parse_streaming_json(text), expected)


@pytest.mark.parametrize("text", ["n", "nul"])
def test_partial_result_none_becomes_empty_dict(text):
    assert parse_streaming_json(text) == {}


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": -', {}),
        ("[1, -", [1]),
        ("-", {}),
        ('{"a": 12', {"a": 12}),
        ('{"a": -0', {"a": 0}),
        ('{"a": 1.', {"a": 1}),
        ("1.", 1),
        ('{"a": 1.5', {"a": 1.5}),
        ('{"a": 1e', {"a": 1}),
        ('{"a": 1E+', {"a": 1}),
        ('{"a": 1.5e-', {"a": 1.5}),
        ('{"a": 1.5e-3', {"a": 0.0015}),
    ],
)
def test_truncated_number_is_completed_or_dropped(text, expected):
    assert same(parse_streaming_json(text), expected)


@pytest.mark.parametrize("text", ['{"a": "x\\', '{"a": "x\\u', '{"a": "x\\u00', '{"a": "x\\u00e'])
def test_escape_cut_short_is_left_out(text):
    assert parse_streaming_json(text) == {"a": "x"}


def test_high_surrogate_at_the_cut_waits_for_its_low_half():
    assert parse_streaming_json('{"a": "x\\ud83d') == {"a": "x"}
    assert parse_streaming_json('{"a": "x\\ud83d\\ude00') == {"a": "x\U0001f600"}


def test_lone_surrogate_in_complete_string_is_kept_like_json_loads():
    assert parse_streaming_json('{"a": "\\ud83dx"}') == json.loads('{"a": "\\ud83dx"}')


def test_partial_result_that_is_not_a_dict_is_returned():
    assert parse_streaming_json("[1, 2") == [1, 2]
    assert parse_streaming_json('"abc') == "abc"


@pytest.mark.parametrize("text, expected", [('{"a": 1}}', {"a": 1}), ('{"a": 1} {"b": 2}', {"a": 1}), ("null x", {})])
def test_text_after_complete_top_level_value_is_ignored(text, expected):
    assert parse_streaming_json(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{"a" 1}',
        "[1 2]",
        '{"a": tx}',
        '{"a": 01}',
        "[1,]",
        '{"a": 1,}',
        "{,}",
        "x",
        '{"a": 1.e5}',
        '{"a": -x}',
        "{'a': 1}",
    ],
)
def test_syntax_error_gives_empty_dict(text):
    assert parse_streaming_json(text) == {}


# --------------------------------------------------------------------------- step 4: partial repaired


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": "x\ny', {"a": "x\ny"}),
        ('{"a": "x\\qy', {"a": "x\\qy"}),
        ('{"a": "\n", "b": "x\\', {"a": "\n", "b": "x\\"}),
        ('{"a": "\n", "b": "x\\u00', {"a": "\n", "b": "x\\u00"}),
        ('{"a": "\n", "b": [1, {"c": tr', {"a": "\n", "b": [1, {"c": True}]}),
    ],
)
def test_truncated_text_needing_repair_is_partially_parsed_after_repair(text, expected):
    assert same(parse_streaming_json(text), expected)


def test_unrepairable_text_gives_empty_dict():
    assert parse_streaming_json('{"a": "\n", "b" 1') == {}


def test_never_raises_on_arbitrary_text():
    rnd = random.Random(7)
    alphabet = '{}[]:,"\\ntrufalse0123456789.-eE \n\tu\x01é'
    for _ in range(2000):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 30)))
        parse_streaming_json(text)


def test_deep_nesting_does_not_raise_and_every_level_is_closed():
    value, depth = parse_streaming_json("[" * 100_000), 0
    while value:  # [[[...[]...]]]: one list per level, the innermost empty
        value, depth = value[0], depth + 1
    assert (value, depth) == ([], 99_999)


# --------------------------------------------------------------------------- IncrementalJsonParser


DOCUMENTS = [
    '{"path": "src/main.py", "content": "def f():\\n    return \\"x\\"\\n", "overwrite": true}',
    '{"a": {"b": [1, -2.5e-3, 0, 1E+2, {"c": null}], "d": []}, "e": {}, "f": false}',
    '  [ {"k": "v"} , [ [ ] ], "s" , 12 , true , null ]  ',
    '{"emoji": "\\ud83d\\ude00 and \\uD83D\\uDE01", "lone": "\\ud83d!", "bmp": "\\u00e9\\u4e2d"}',
    '{"quote": "she said \\"hi\\" \\\\ back\\\\", "slash": "\\/"}',
    '{"raw": "line1\nline2\ttab", "bad": "C:\\dir", "u": "\\u12z"}',
    '{"n": -0.0, "big": 123456789012345678901234567890, "small": 1e-7, "neg": -12}',
    '{"unicode": "\u00e9\u4e2d\U0001f600", "a": 1}',
    "null",
    '"top-level string"',
    "-12.5e+3",
    '{"a": 1}} trailing',
    '{"a": [1 2]}',
    "true",
]


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_incremental_matches_parse_streaming_json_on_every_prefix_one_char_at_a_time(doc):
    parser = IncrementalJsonParser()
    for i, char in enumerate(doc, 1):
        parser.feed(char)
        assert same(parser.value(), parse_streaming_json(doc[:i])), doc[:i]


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_incremental_matches_parse_streaming_json_with_random_splits(doc):
    rnd = random.Random(doc)
    for _ in range(20):
        parser = IncrementalJsonParser()
        i = 0
        while i < len(doc):
            j = min(len(doc), i + rnd.randint(1, 7))
            parser.feed(doc[i:j])
            i = j
            assert same(parser.value(), parse_streaming_json(doc[:i])), doc[:i]


@pytest.mark.parametrize("doc", DOCUMENTS)
def test_incremental_matches_parse_streaming_json_when_cut_once_anywhere(doc):
    """Long deltas: whole runs of escapes are decoded at once, wherever the one cut falls."""
    for cut in range(len(doc) + 1):
        parser = IncrementalJsonParser()
        parser.feed(doc[:cut])
        assert same(parser.value(), parse_streaming_json(doc[:cut])), doc[:cut]
        parser.feed(doc[cut:])
        assert same(parser.value(), parse_streaming_json(doc)), (doc, cut)


def test_incremental_value_before_any_text_is_empty_dict():
    parser = IncrementalJsonParser()
    assert parser.value() == {}
    parser.feed("")
    parser.feed("  ")
    assert parser.value() == {}


def test_incremental_surrogate_pair_split_across_deltas():
    parser = IncrementalJsonParser()
    for delta in ['{"e": "a\\ud8', "3d", "\\", "u", "de", "00", 'b"}']:
        parser.feed(delta)
        value = parser.value()
        assert "\ud83d" not in value.get("e", "")  # the high half is never shown alone
    assert parser.value() == {"e": "a\U0001f600b"}


def test_incremental_escaped_quote_split_across_deltas():
    parser = feed_all(['{"q": "say \\', '"hi\\', '"', '", "n": 1}'])
    assert parser.value() == {"q": 'say "hi"', "n": 1}


def test_incremental_strict_null_document_is_passed_through():
    parser = feed_all(["nu", "ll", " "])
    assert parser.value() is None


def test_incremental_syntax_error_is_final():
    parser = feed_all(['{"a": 1', " 2"])
    assert parser.value() == {}
    parser.feed("}")
    assert parser.value() == {}


def test_incremental_reads_text_needing_repair_without_reparsing():
    parser = feed_all(['{"a": "x', "\n", 'y", "b": "C:\\', 'dir"}'])
    assert parser.value() == {"a": "x\ny", "b": "C:\\dir"}


def test_incremental_value_is_the_live_container():
    parser = feed_all(['{"a": [1, 2', ", 3"])
    first = parser.value()
    parser.feed('], "b": "x')
    second = parser.value()
    assert second is first
    assert first == {"a": [1, 2, 3], "b": "x"}


def test_incremental_text_is_everything_fed():
    parser = feed_all(['{"a"', ": 1", "}"])
    assert parser.text == '{"a": 1}'
    assert IncrementalJsonParser().text == ""


def _random_value(rnd: random.Random, depth: int = 0) -> Any:
    alphabet = ["a", "é", '"', "\\", "\n", "\x01", "\U0001f600", " ", "/", "u", "\u2028"]
    roll = rnd.random()
    if depth > 3 or roll < 0.4:
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 6)))
        return rnd.choice([None, True, False, 0, -1, 12, 1.5, -0.25, 1e300, 3e-7, text])
    if roll < 0.7:
        return [_random_value(rnd, depth + 1) for _ in range(rnd.randint(0, 4))]
    return {"".join(rnd.choice(alphabet) for _ in range(3)): _random_value(rnd, depth + 1) for _ in range(3)}


def test_incremental_matches_parse_streaming_json_on_random_and_corrupted_documents():
    rnd = random.Random(2024)
    damage = ["\\q", "\n", "\x00", "\\u12", "\\", ",", "]", "}", '"', "x", "-", ".", "e", "\\ud83d", " ", "01"]
    for _ in range(300):
        doc = json.dumps(_random_value(rnd), ensure_ascii=rnd.random() < 0.5, indent=rnd.choice([None, 1]))
        if rnd.random() < 0.5:
            for _ in range(rnd.randint(1, 3)):
                at = rnd.randint(0, len(doc))
                doc = doc[:at] + rnd.choice(damage) + doc[at:]
        parser = IncrementalJsonParser()
        i = 0
        while i < len(doc):
            j = min(len(doc), i + rnd.randint(1, 5))
            parser.feed(doc[i:j])
            i = j
            assert same(parser.value(), parse_streaming_json(doc[:i])), doc[:i]


def _large_document() -> Any:
    return {
        "items": [
            {"id": i, "name": f'item "{i}" \u00e9\U0001f600', "tags": ["a", "b\n"], "v": i * 1.5, "ok": i % 2 == 0}
            for i in range(1000)
        ],
        "note": "x" * 5000,
    }


@pytest.mark.parametrize("n_deltas", [5000, 10000])
def test_incremental_large_document_in_many_deltas(n_deltas):
    source = _large_document()
    doc = json.dumps(source)
    assert len(doc) > 90_000
    step = len(doc) / n_deltas
    cuts = [round(k * step) for k in range(1, n_deltas)] + [len(doc)]
    parser = IncrementalJsonParser()
    start, seen = 0, 0
    checkpoints = set(cuts[:: n_deltas // 10])
    for cut in cuts:
        parser.feed(doc[start:cut])
        start = cut
        value = parser.value()
        assert isinstance(value, dict)
        items = value.get("items", [])
        assert len(items) >= seen  # entries are only ever added
        seen = len(items)
        if len(items) >= 2:
            assert items[-2] == source["items"][len(items) - 2]  # completed entries are exact
        if cut in checkpoints:
            assert same(value, parse_streaming_json(doc[:cut]))
    assert same(parser.value(), json.loads(doc))


@pytest.mark.parametrize("n_deltas", [5000, 10000])
def test_incremental_large_string_grows_by_prefix(n_deltas):
    content = "".join(chr(32 + (i * 7) % 90) for i in range(100_000)) + "\n\u00e9\U0001f600"
    doc = json.dumps({"path": "big.txt", "content": content})
    step = max(1, len(doc) // n_deltas)
    parser = IncrementalJsonParser()
    for i in range(0, len(doc), step):
        parser.feed(doc[i : i + step])
        got = parser.value().get("content", "")
        assert content.startswith(got)
    assert parser.value() == {"path": "big.txt", "content": content}
