"""Server-sent events framing: split a byte stream into frames, and write frames.

Follows the SSE specification (LF, CRLF or CR line ends; several ``data:`` lines joined
with LF; comment lines; an event ends at a blank line), with one deliberate extension:
``close()`` hands out a last event that was not followed by a blank line, because agents
that end their stream without one still sent that event and the recorder must keep it.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

from recorder.errors import InputError


class FrameTooLarge(InputError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"SSE frame larger than the limit of {limit} bytes")
        self.limit = limit


class Frame(NamedTuple):
    """One event: its data lines joined, and the id and event type in force."""

    data: bytes
    id: str | None = None
    event: str | None = None


# A Frame from a (data, id, event) tuple, without the keyword handling of Frame(...).
_frame = partial(tuple.__new__, Frame)


class FrameSplitter:
    """Incremental SSE parser: ``feed`` chunks as they arrive, ``close`` at end of stream."""

    __slots__ = ("_buf", "_data", "_event", "_id", "_max", "_size")

    def __init__(self, max_frame_bytes: int | None = None) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._id: str | None = None
        self._event: str | None = None
        self._max = max_frame_bytes
        self._size = 0

    def feed(self, chunk: bytes) -> list[Frame]:
        datas = self._plain(chunk)
        if datas is None:
            return self._general(chunk)
        event_id = self._id
        return [_frame((data, event_id, None)) for data in datas]

    def datas(self, chunk: bytes) -> list[bytes]:
        """The data of each event ``feed`` would hand out, alone: for a reader that keeps
        nothing else of a frame (the proxy), with no ``Frame`` made per event."""
        datas = self._plain(chunk)
        if datas is None:
            return [frame[0] for frame in self._general(chunk)]
        return datas

    def _plain(self, chunk: bytes) -> list[bytes] | None:
        """The common case, quickly: events of one ``data: `` line each (token streams),
        one or many to a chunk, maybe the last one cut short; their data. None when the
        stream holds anything else here (other fields, comments, lines of one event, blank
        lines in a row, CRs): the general path reads it."""
        if self._data or self._event is not None or b"\r" in chunk:
            return None
        if (
            not self._buf
            and chunk[:6] == b"data: "
            and chunk[-2:] == b"\n\n"
            and chunk.count(b"\n") == 2
        ):
            # One event to a chunk, as a token stream is often written: nothing to split.
            if self._max is not None and len(chunk) - 7 > self._max:
                raise FrameTooLarge(self._max)
            return [chunk[6:-2]]
        buf = self._buf + chunk if self._buf else chunk
        if buf[:6] != b"data: ":
            return None
        end = buf.rfind(b"\n\n")  # the blank line after the last whole event
        if end < 0:
            return None
        datas = buf[6:end].split(b"\n\ndata: ")
        # Exactly two LFs per event (its line end and the blank line): every event is one
        # line, and each but the first began "data: " right after a blank line.
        if buf.count(b"\n", 0, end + 2) != 2 * len(datas):
            return None
        rest = buf[end + 2 :]
        limit = self._max
        if limit is not None and (len(rest) > limit or max(map(len, datas)) + 1 > limit):
            return None  # the general path raises FrameTooLarge where it should
        self._buf = rest
        return datas

    def _general(self, chunk: bytes) -> list[Frame]:
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf:
            # A CR at the very end may be the first half of a CRLF split across chunks.
            held = b""
            if buf.endswith(b"\r"):
                buf, held = buf[:-1], b"\r"
            buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
            lines = buf.split(b"\n")
            self._buf = lines.pop() + held
        else:
            lines = buf.split(b"\n")
            self._buf = lines.pop()
        frames: list[Frame] = []
        for line in lines:
            frame = self._line(line)
            if frame is not None:
                frames.append(frame)
        # What is left after this chunk: the event under way and its unfinished line.
        if self._max is not None and len(self._buf) + self._size > self._max:
            raise FrameTooLarge(self._max)
        return frames

    def close(self) -> list[Frame]:
        """What the stream left: a last line without its end, an event without its blank line."""
        frames: list[Frame] = []
        rest, self._buf = self._buf, b""
        if rest:
            frame = self._line(rest.rstrip(b"\r"))
            if frame is not None:
                frames.append(frame)
        frame = self._line(b"")
        if frame is not None:
            frames.append(frame)
        return frames

    def _line(self, line: bytes) -> Frame | None:
        if not line:
            return self._dispatch()
        if line[0] == 0x3A:  # ":" starts a comment
            return None
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
            self._size += len(value) + 1
            if self._max is not None and self._size > self._max:
                raise FrameTooLarge(self._max)
        elif name == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        return None

    def _dispatch(self) -> Frame | None:
        if not self._data:
            self._event = None
            return None
        data = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
        frame = Frame(data, self._id, self._event)
        self._data = []
        self._size = 0
        self._event = None
        return frame


def encode_frame(data: bytes, event_id: int | str | None = None) -> bytes:
    """One SSE event carrying ``data`` unchanged (LFs inside become extra ``data:`` lines)."""
    head = b"id: %s\n" % str(event_id).encode() if event_id is not None else b""
    if b"\n" in data:
        body = b"".join(b"data: " + part + b"\n" for part in data.split(b"\n"))
    else:
        body = b"data: " + data + b"\n"
    return head + body + b"\n"


def encode_frames(datas: list[bytes], first_seq: int) -> bytes:
    """``encode_frame(data, seq)`` of each of ``datas``, seq counting from ``first_seq``,
    joined: what the proxy forwards of one recorded batch."""
    count = len(datas)
    if not count:
        return b""
    pieces: list[bytes] = [b""] * (2 * count)
    pieces[0::2] = [b"\n\nid: %d\ndata: " % seq for seq in range(first_seq, first_seq + count)]
    pieces[0] = pieces[0][2:]
    pieces[1::2] = datas
    pieces.append(b"\n\n")
    out = b"".join(pieces)
    # Three LFs to a frame unless some data holds an LF (more ``data:`` lines): the slow way.
    if out.count(b"\n") == 3 * count:
        return out
    return b"".join([encode_frame(data, seq) for seq, data in enumerate(datas, first_seq)])
