"""The upstream's answer read into SSE frames, on a task of its own, a bounded way ahead.

The reader splits whatever arrives into frames and leaves them pending; the recording takes
all that is pending at once (what arrived during one commit becomes the next). Once
``READ_AHEAD`` frames are pending the reader waits for them to be taken: memory stays
bounded whatever the run's length or the client's pace, and a fast upstream is committed
and forwarded while it streams instead of being read whole first. The upstream client
stops reading the socket in turn, so the agent itself is slowed down.
"""

from __future__ import annotations

import asyncio
import contextlib

from recorder.proxy.legs import Answer
from recorder.wire.sse import FrameSplitter

READ_AHEAD = 2000  # frames the reader may hold before it waits for them to be taken
_END_TURNS = 3  # turns of the loop an answer's end already received takes to be read


class FrameReader:
    def __init__(self, response: Answer, max_frame_bytes: int | None) -> None:
        self._response = response
        self._splitter = FrameSplitter(max_frame_bytes)
        self._pending: list[bytes] = []  # each frame's data
        self._arrived = asyncio.Event()
        self._taken = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def first(self, seconds: float) -> list[bytes]:
        """The frames (their data) in what the upstream sends within ``seconds``, read on
        the caller's task; raises the client's ``UpstreamError`` or ``FrameTooLarge``."""
        return self._splitter.datas(await self._response.read_within(seconds) or b"")

    def start(self, name: str) -> None:
        """Read the rest on a task of its own."""
        self._task = asyncio.create_task(self._read(), name=name)
        # However the task ends (done, broken, cancelled), a take() waiting must wake.
        self._task.add_done_callback(lambda _task: self._arrived.set())

    async def take(self) -> list[bytes] | None:
        """Every frame (its data) read since the last take (waiting for one); None once
        the answer is over or broke (``failure()`` says which)."""
        # Check before waiting: a wake-up that came while the last batch was being recorded
        # is never lost.
        while not self._pending:
            if self._task is None or self._task.done():
                return None
            await self._arrived.wait()
            self._arrived.clear()
        batch, self._pending = self._pending, []
        self._taken.set()
        return batch

    def waiting(self) -> bool:
        """Whether frames were read that nobody took yet."""
        return bool(self._pending)

    async def ended(self) -> bool:
        """Whether the answer is over, whole, with every frame taken: nothing more will
        come. Asked, once reading started, after a batch that ended its run, whose close can
        then go in the same commit. An end already received but not yet read is found:
        the loop is given a turn or two."""
        task = self._task
        if task is None:
            return False
        for _ in range(_END_TURNS):
            if self._pending or task.done():
                break
            await asyncio.sleep(0)
        return not self._pending and task.done() and not task.cancelled() and not task.exception()

    def failure(self) -> BaseException | None:
        """Why reading stopped before the answer's end, if it did (``UpstreamError``,
        ``FrameTooLarge``, or anything else that broke it)."""
        task = self._task
        if task is None or not task.done() or task.cancelled():
            return None
        return task.exception()

    async def stop(self) -> None:
        """Stop reading and let the connection go (back to the pool, if it was read whole)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        self._response.close()

    def stop_now(self) -> None:
        """``stop()`` from a callback: nothing awaited."""
        if self._task is not None:
            self._task.cancel()
        self._response.close()

    async def _read(self) -> None:
        splitter = self._splitter
        while chunk := await self._response.readany():
            frames = splitter.datas(chunk)
            if frames:
                self._pending.extend(frames)
                self._arrived.set()
                if len(self._pending) >= READ_AHEAD:
                    self._taken.clear()
                    await self._taken.wait()
        self._pending.extend(frame.data for frame in splitter.close())
