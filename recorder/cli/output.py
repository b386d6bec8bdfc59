"""Where a command's answer goes: stdout (text, JSON or bytes), notes on stderr."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from recorder.wire.jsontext import dump


def json_text(value: Any, *, indent: bool = True) -> str:
    """A JSON value as JSON (``null``, ``"text"``), models as the API writes them."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True)
    return dump(value, indent=indent).decode()


class Output:
    """``--json`` picks JSON (the API's shapes) over text; ``-v`` lets notes through."""

    def __init__(self, *, json: bool = False, verbose: bool = False) -> None:
        self.json = json
        self.verbose = verbose

    def data(self, value: Any, text: Callable[[], str]) -> None:
        """The answer: ``value`` as JSON with ``--json``, else ``text()``."""
        self.line(json_text(value) if self.json else text())

    def line(self, text: str) -> None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def raw(self, data: bytes) -> None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()

    def note(self, text: str) -> None:
        """Said on stderr, whatever the flags (stdout stays the answer alone)."""
        sys.stderr.write(text + "\n")

    def detail(self, text: str) -> None:
        """Said on stderr with ``-v`` only."""
        if self.verbose:
            self.note(text)
