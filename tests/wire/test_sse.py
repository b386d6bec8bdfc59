"""SSE framing per the specification, with the recorder's end-of-stream extension."""

from __future__ import annotations

import pytest

from recorder.wire.events import read_event_file
from recorder.wire.sse import Frame, FrameSplitter, FrameTooLarge, encode_frame


def split(*chunks: bytes) -> list[Frame]:
    splitter = FrameSplitter()
    frames: list[Frame] = []
    for chunk in chunks:
        frames += splitter.feed(chunk)
    return frames + splitter.close()


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_line_endings(eol: bytes) -> None:
    stream = b'data: {"a":1}' + eol + eol + b'data: {"b":2}' + eol + eol
    assert [f.data for f in split(stream)] == [b'{"a":1}', b'{"b":2}']


def test_multi_line_data_comments_ids_and_events() -> None:
    stream = b': keep-alive\nid: 7\nevent: message\ndata: {"a":\ndata:  1}\nretry: 10\n\n'
    (frame,) = split(stream)
    assert frame == Frame(b'{"a":\n 1}', "7", "message")


def test_frames_split_across_chunks_at_every_byte() -> None:
    stream = b'data: {"x":"\xc3\xa9"}\r\n\r\ndata: second\r\n\r\n'
    for cut in range(1, len(stream)):
        assert [f.data for f in split(stream[:cut], stream[cut:])] == [
            b'{"x":"\xc3\xa9"}',
            b"second",
        ]


def test_many_frames_in_one_chunk_and_no_trailing_blank_line() -> None:
    stream = b"".join(b"data: %d\n\n" % i for i in range(100)) + b"data: last"
    assert [f.data for f in split(stream)] == [b"%d" % i for i in range(100)] + [b"last"]


def test_empty_data_and_field_without_colon() -> None:
    assert [f.data for f in split(b"data\n\ndata:\n\n")] == [b"", b""]
    assert split(b"\n\n: only a comment\n\n") == []


def test_frame_size_limit() -> None:
    splitter = FrameSplitter(max_frame_bytes=100)
    with pytest.raises(FrameTooLarge):
        splitter.feed(b"data: " + b"x" * 200)
    splitter = FrameSplitter(max_frame_bytes=100)
    with pytest.raises(FrameTooLarge):
        for _ in range(20):
            splitter.feed(b"data: " + b"x" * 10 + b"\n")


@pytest.mark.parametrize("data", [b'{"a":1}', b"multi\nline", b" leading space", b""])
def test_encode_round_trips(data: bytes) -> None:
    (frame,) = split(encode_frame(data, 42))
    assert (frame.data, frame.id) == (data, "42")


def test_event_files_in_three_shapes() -> None:
    array = b'[{"type":"A"}, {"type":"B"}]'
    jsonl = b'{"type":"A"}\n\n{"type":"B"}\n'
    sse = b'data: {"type":"A"}\n\ndata: {"type":"B"}\n\n'
    for blob in (array, jsonl, sse):
        assert [f.replace(b" ", b"") for f in read_event_file(blob)] == [
            b'{"type":"A"}',
            b'{"type":"B"}',
        ]


def test_one_event_per_chunk_matches_the_general_parser() -> None:
    # Chunks holding exactly one single-line event take a shortcut; whatever the chunking,
    # the frames (data, id, event type) and the size limit must come out the same.
    stream = (
        b'data: {"a":1}\n\nid: 9\n\ndata: {"b":2}\n\nevent: x\n\ndata: {"c":3}\n\n'
        b"data: \n\ndata: x\r\n\r\ndata:y\n\n: c\n\ndata: " + b"z" * 99 + b"\n\n"
    )
    events = [e + b"\n\n" for e in stream.split(b"\n\n")[:-1]]
    assert split(*events) == split(stream) == split(*[bytes([b]) for b in stream])
    assert split(*events)[1] == Frame(b'{"b":2}', "9")
    for limit in (98, 99, 100):
        whole, chunked = FrameSplitter(limit), FrameSplitter(limit)
        outcome = []
        for splitter, chunks in ((whole, [stream]), (chunked, events)):
            try:
                for chunk in chunks:
                    splitter.feed(chunk)
                outcome.append("ok")
            except FrameTooLarge:
                outcome.append("too large")
        assert outcome[0] == outcome[1], limit


class _GeneralOnly(FrameSplitter):
    """The specification's line-by-line reading, with no shortcut."""

    def feed(self, chunk: bytes) -> list[Frame]:
        return self._general(chunk)


def _read(splitter: FrameSplitter, chunks: list[bytes]) -> list[Frame] | str:
    frames: list[Frame] = []
    try:
        for chunk in chunks:
            frames += splitter.feed(chunk)
        return frames + splitter.close()
    except FrameTooLarge:
        return "too large"


def _read_datas(splitter: FrameSplitter, chunks: list[bytes]) -> list[bytes] | str:
    datas: list[bytes] = []
    try:
        for chunk in chunks:
            datas += splitter.datas(chunk)
        return datas + [frame.data for frame in splitter.close()]
    except FrameTooLarge:
        return "too large"


def test_many_events_per_chunk_match_the_general_parser() -> None:
    # Chunks of many single-line events (what a fast agent's writes coalesce into) take a
    # shortcut too: cut anywhere, mixed with every other kind of line, and near the size
    # limit, the outcome is the general parser's.
    import random

    rng = random.Random(7)
    pieces = [
        b'data: {"type":"TEXT_MESSAGE_CONTENT","delta":"hi"}\n\n',
        b"data: " + b"w" * 40 + b"\n\n",
        b"data: two\ndata: lines\n\n",
        b"id: 12\n",
        b"event: note\n",
        b": comment\n",
        b"\n",
        b"data:no-space\n\n",
        b"data: cr\r\n\r\n",
        b"data: \n\n",
        b"retry: 5\n",
    ]
    for _ in range(400):
        stream = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
        cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randint(0, 6))))
        chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        for limit in (None, 40, 41, 42, 60):
            general = _read(_GeneralOnly(limit), chunks)
            assert _read(FrameSplitter(limit), chunks) == general
            # The data alone (what the proxy reads) is the general parser's frames' data.
            datas = general if isinstance(general, str) else [frame.data for frame in general]
            assert _read_datas(FrameSplitter(limit), chunks) == datas
