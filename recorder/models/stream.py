"""One event of a replayed or forked stream, as the client library and the CLI hand it out."""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson


class StreamedEvent(NamedTuple):
    """The frame's data exactly as sent, with its SSE id (``seq`` for a run's stream,
    ``runId:seq`` for a thread's; None for events the recorder adds to a thread's stream)."""

    data: bytes
    id: str | None = None

    @property
    def event(self) -> dict[str, Any] | None:
        """The event as a JSON object; None when the frame is not one."""
        try:
            value = orjson.loads(self.data)
        except orjson.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None

    @property
    def type(self) -> str | None:
        event = self.event
        kind = event.get("type") if event is not None else None
        return kind if isinstance(kind, str) else None

    @property
    def seq(self) -> int | None:
        """The event's seq in its run, when the stream gave it one."""
        if self.id is None:
            return None
        tail = self.id.rsplit(":", 1)[-1]
        return int(tail) if tail.lstrip("-").isdigit() else None
