"""What was said in a run, as a thread's summary keeps it for searching threads: the text
of its posted messages, then the text its events streamed, up to ``SUMMARY_LIMIT``.

The proxy builds it as frames arrive (``proxy.segments.Summary``); an import and
``recorder rebuild`` build it from what is stored, with ``run_summary``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from recorder.wire.events import decode

SUMMARY_LIMIT = 20_000  # characters of a thread's text kept for searching it
TEXT_EVENTS = ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK")


def message_texts(posted: Mapping[str, Any]) -> list[str]:
    """The text of the posted messages, for searching threads by what was said."""
    texts: list[str] = []
    messages = posted.get("messages")
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            texts.append(content + "\n")
        elif isinstance(content, list):
            texts.extend(
                p["text"] + "\n"
                for p in content
                if isinstance(p, dict) and isinstance(p.get("text"), str)
            )
    return texts


class Said:
    """A run's text as the proxy's summary of it holds it (before redaction): ``parts``,
    the posted messages' text (``message_texts``), then what its events streamed."""

    __slots__ = ("parts", "size")

    def __init__(self, parts: list[str]) -> None:
        self.parts = parts
        self.size = sum(map(len, parts))

    @classmethod
    def of(cls, posted: Mapping[str, Any] | None) -> Said:
        """Begun with what a posted input (None: none) said."""
        return cls(message_texts(posted) if posted is not None else [])

    @property
    def full(self) -> bool:
        return self.size >= SUMMARY_LIMIT

    def feed(self, payload: bytes) -> None:
        if self.full:
            return
        obj = decode(payload)
        if obj is None or obj.get("type") not in TEXT_EVENTS:
            return
        delta = obj.get("delta")
        if type(delta) is str:
            self.parts.append(delta)
            self.size += len(delta)

    def text(self) -> str | None:
        """None when the run said nothing."""
        return "".join(self.parts)[:SUMMARY_LIMIT] if self.parts else None


def run_summary(posted: Mapping[str, Any] | None, payloads: Iterable[bytes]) -> str | None:
    said = Said.of(posted)
    for payload in payloads:
        if said.full:
            break
        said.feed(payload)
    return said.text()
