"""JSON text as JSON.parse reads it and JSON.stringify writes it (recorder.wire.jsontext)."""

from __future__ import annotations

import json
import math

import orjson
import pytest

from recorder.wire.events import decode, read_event_file
from recorder.wire.jsontext import Infinite, dump, parse, printable, split_array


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b'"\\ud83d"', "\ud83d"),  # half a pair: JSON.parse keeps it, orjson refuses it
        (b'"\\ud83d\\ude00"', "\U0001f600"),  # a whole pair is one character
        (b'["\\udc00x", 1]', ["\udc00x", 1]),
        (b"9007199254740993", 9007199254740993),  # exact: the log's bytes are exact too
        (b"-0", 0),
        (b'{"a": "caf\xc3\xa9"}', {"a": "café"}),
    ],
)
def test_parse_reads_what_json_parse_reads(text: bytes, expected: object) -> None:
    assert parse(text) == expected


def test_numbers_beyond_a_double_are_infinity() -> None:
    value = parse(b"[1e400, -1e400, 1E999, " + b"9" * 400 + b"]")
    assert [math.copysign(1, v) for v in value] == [1, -1, 1, 1]
    assert all(type(v) is Infinite and math.isinf(v) for v in value)


def test_bytes_that_are_not_utf8_read_as_replacement_characters() -> None:
    assert parse(b'{"a": "x\xff\xfey"}') == {"a": "x\ufffd\ufffdy"}


@pytest.mark.parametrize(
    "text", [b"NaN", b"Infinity", b"-Infinity", b"[1,]", b"{'a': 1}", b"01", b'"\\x"', b""]
)
def test_parse_refuses_what_json_parse_refuses(text: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        parse(text)


def test_dump_writes_what_json_stringify_writes() -> None:
    value = parse(b'{"s": "a\\ud83db", "n": [1e400, -1e400, 1.5], "big": 123456789012345678901}')
    written = dump(value)
    assert written == b'{"s":"a\\ud83db","n":[null,null,1.5],"big":1.2345678901234568e+20}'
    assert json.loads(written)["s"] == "a\ud83db"


def test_dump_exact_round_trips_infinity_and_lone_surrogates() -> None:
    value = {"s": ["\udc00", "x\ud83d"], "n": [Infinite("inf"), Infinite("-inf"), 2**70]}
    back = parse(dump(value, exact=True))
    assert back["s"] == value["s"] and back["n"][2] == 2**70
    assert math.isinf(back["n"][0]) and back["n"][1] < 0


def test_a_pair_split_in_two_is_written_and_read_back_as_one_character() -> None:
    joined = "x\ud83d" + "\ude00y"  # what appending two deltas gives
    assert parse(dump({"c": joined})) == {"c": "x\U0001f600y"}


def test_dump_indents_either_way() -> None:
    plain = {"a": [1, {"b": "x"}], "c": {}}
    assert dump(plain, indent=True) == orjson.dumps(plain, option=orjson.OPT_INDENT_2)
    odd = {"a": ["\ud83d"], "c": {}}
    assert dump(odd, indent=True) == b'{\n  "a": [\n    "\\ud83d"\n  ],\n  "c": {}\n}'


def test_printable_escapes_only_lone_surrogates() -> None:
    assert printable("id 'm\udbff' é") == "id 'm\\udbff' é"
    text = "no surrogate here"
    assert printable(text) is text


def test_split_array_keeps_each_items_text() -> None:
    text = '[ {"a": "\\ud83d"} ,1e400,\n  [1, 2],"x"]'
    assert split_array(text) == ['{"a": "\\ud83d"}', "1e400", "[1, 2]", '"x"']
    assert split_array("[]") == []
    with pytest.raises(ValueError):
        split_array('[{"a": 1},]')
    with pytest.raises(ValueError):
        split_array('{"a": 1}')


def test_decode_reads_frames_orjson_refuses() -> None:
    assert decode(b'{"type": "X", "delta": "\\ud83d"}') == {"type": "X", "delta": "\ud83d"}
    assert decode(b"1e400") is None  # JSON, but not an object
    assert decode(b"{nope") is None


def test_event_files_with_literals_orjson_cannot_read() -> None:
    events = [b'{"type":"A","d":"\\ud83d"}', b'{"type":"B","n":1e400}']
    array = b"[" + b",".join(events) + b"]"
    assert read_event_file(array) == events
    assert read_event_file(b"\n".join(events)) == events
    assert read_event_file(b"".join(b"data: " + e + b"\n\n" for e in events)) == events


def test_a_jsonl_file_whose_first_line_is_an_array_is_jsonl() -> None:
    assert read_event_file(b'[1,2]\n{"type":"A"}\n') == [b"[1,2]", b'{"type":"A"}']
    # One array over several lines is still one array.
    assert read_event_file(b'[\n{"type":"A"},\n{"type":"B"}\n]') == [
        b'{"type":"A"}',
        b'{"type":"B"}',
    ]
