"""Where a command's answer goes: stdout (text, JSON or bytes), notes on stderr."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from recorder.wire.jsontext import dump

T = TypeVar("T")

# What a terminal would act on rather than show: C0 controls but newline and tab, DEL, C1,
# and the marks that reorder text (bidirectional overrides and isolates).
_UNSHOWN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` for a terminal: what recorded traffic holds (escape sequences that recolour,
    clear or retitle it, a carriage return that overwrites a line, text reversed) is shown
    as an escape (``\\x1b``, ``\\u202e``), not acted on."""
    return _UNSHOWN.sub(_escape, text)


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def json_text(value: Any, *, indent: bool = True) -> str:
    """A JSON value as JSON (``null``, ``"text"``), models as the API writes them."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True)
    return dump(value, indent=indent).decode()


@contextlib.asynccontextmanager
async def closing_stream(stream: AsyncIterator[T]) -> AsyncIterator[AsyncIterator[T]]:
    """``stream``, closed on the way out whatever stops the writing (a reader that closed
    the pipe): left to the collector, its connection would be closed after the loop is
    gone, with a traceback."""
    try:
        yield stream
    finally:
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


class Output:
    """``--json`` picks JSON (the API's shapes) over text; ``-v`` lets notes through."""

    def __init__(self, *, json: bool = False, verbose: bool = False) -> None:
        self.json = json
        self.verbose = verbose

    def data(self, value: Any, text: Callable[[], str]) -> None:
        """The answer: ``value`` as JSON with ``--json``, else ``text()`` (shown as text:
        ``visible``)."""
        self.line(json_text(value) if self.json else visible(text()))

    def line(self, text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def raw(self, data: bytes) -> None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()

    def note(self, text: str) -> None:
        """Said on stderr, whatever the flags (stdout stays the answer alone)."""
        sys.stderr.write(visible(text) + "\n")

    def detail(self, text: str) -> None:
        """Said on stderr with ``-v`` only."""
        if self.verbose:
            self.note(text)
