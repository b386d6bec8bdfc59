"""The recorded frames on their way to the client, who reads them at its own pace.

    HELD ──open()──► OPEN ──end()──► ENDED
      │                │               │
      └────────────────┴───────────────┴──leave()──► GONE

- HELD: the recording's first events are recorded on the request's task, before anybody
  reads; what they put is kept and handed over as one chunk by ``open()``.
- OPEN: at most ``QUEUED_BATCHES`` recorded batches wait for a slow client, then ``put``
  waits, and with it the recording (which holds the upstream back in turn).
- ENDED: the client's stream ends after what is queued.
- GONE: the client left (or finished reading). Nothing is queued any more; the recording
  is told once, and goes on without it unless it is configured to stop.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import AsyncIterator, Callable

QUEUED_BATCHES = 4  # recorded batches waiting for a slow client before recording waits


class OutputState(enum.Enum):
    HELD = "held"
    OPEN = "open"
    ENDED = "ended"
    GONE = "gone"


class ClientOutput:
    def __init__(self, on_leave: Callable[[], None]) -> None:
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=QUEUED_BATCHES)
        self._held: list[bytes] = []
        self._on_leave = on_leave
        self.state = OutputState.HELD

    async def put(self, chunk: bytes) -> None:
        if self.state is OutputState.OPEN:
            await self._queue.put(chunk)
        elif self.state is OutputState.HELD:
            self._held.append(chunk)

    def open(self) -> None:
        if self.state is not OutputState.HELD:
            return
        self.state = OutputState.OPEN
        if self._held:
            self._queue.put_nowait(b"".join(self._held))  # the queue is empty: it fits
            self._held = []

    async def end(self) -> None:
        if self.state is OutputState.OPEN:
            await self._queue.put(None)
            if self.state is OutputState.OPEN:  # (the client may have left meanwhile)
                self.state = OutputState.ENDED

    def end_now(self) -> None:
        """End at once, dropping what the client has not taken yet (a cancelled recording)."""
        if self.state in (OutputState.HELD, OutputState.OPEN):
            self.state = OutputState.ENDED
            self._drain()
            self._queue.put_nowait(None)

    def leave(self) -> None:
        """The client is gone (or done reading): drop what is queued, tell the recording."""
        if self.state is OutputState.GONE:
            return
        self.state = OutputState.GONE
        self._drain()
        self._on_leave()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The client's stream; closing it (the client left) is ``leave()``."""
        try:
            while (chunk := await self._queue.get()) is not None:
                yield chunk
        finally:
            self.leave()

    def _drain(self) -> None:
        while not self._queue.empty():
            self._queue.get_nowait()
