"""Group commit: one writer task turns everything that arrived during a commit into the next one.

Each stream hands its frames over and waits; the writer takes every waiting batch (from any
number of runs) and appends them in one transaction, with the closes of the runs whose
last events they are. Under load, commits grow instead of
multiplying, so the cost per event falls as traffic rises. When nothing is being committed
and the store's appends cannot be cut short by their caller's cancellation
(``append_survives_cancel``: SQLite's), a batch is committed by its own caller: an idle
recorder pays no hand-over. The observer hears of every commit: how long it took and how
many events it held.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from recorder.store import Appended, Closing, EventStore, NewEvent
from recorder.telemetry import NO_OBSERVER, Observer

_MAX_GROUP = 5000  # events per commit; a batch larger on its own is committed alone
IN_FLIGHT = 2  # batches of one stream handed over at a time where appends run off the loop


@dataclass(slots=True)
class _Batch:
    run_id: str
    events: Sequence[NewEvent]
    close: Closing | None = None  # the run's close, in the same commit as its events
    done: asyncio.Future[list[Appended]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class GroupCommitter:
    def __init__(self, store: EventStore, observer: Observer = NO_OBSERVER) -> None:
        self._store = store
        self._observer = observer
        self._queue: deque[_Batch] = deque()
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._busy = False  # a commit is under way (the writer's or a caller's own)
        self._direct = bool(getattr(store, "append_survives_cancel", False))
        # How many batches of one stream may be handed over at a time (``RunRecording``).
        # Two where appends run off the loop (SQLite: the stores whose appends survive a
        # cancelled caller), which keeps the loop observing while the writer works; one
        # on PostgreSQL, whose client side of a commit runs on the loop itself: there,
        # two measured 0.86x-0.94x one.
        self.in_flight = IN_FLIGHT if self._direct else 1

    async def append(
        self, run_id: str, events: Sequence[NewEvent], close: Closing | None = None
    ) -> list[Appended]:
        """Append ``events`` to ``run_id`` (then ``close`` it, in the same commit); returns
        once they are committed."""
        if self._direct and not self._busy and not self._queue:
            self._busy = True
            started = time.perf_counter()
            try:
                closes = () if close is None else (close,)
                appended = (await self._store.append_batches([(run_id, events)], closes))[0]
                self._observer.committed(time.perf_counter() - started, len(events))
                return appended
            finally:
                self._busy = False
                if self._queue:
                    self._ready.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="group-commit")
        batch = _Batch(run_id, events, close)
        self._queue.append(batch)
        self._ready.set()
        return await batch.done

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        while True:
            await self._ready.wait()
            self._ready.clear()
            while self._queue and not self._busy:
                group = self._take()
                self._busy = True
                try:
                    await self._commit(group)
                finally:
                    self._busy = False

    def _take(self) -> list[_Batch]:
        group: list[_Batch] = []
        count = 0
        while self._queue and (not group or count + len(self._queue[0].events) <= _MAX_GROUP):
            batch = self._queue.popleft()
            group.append(batch)
            count += len(batch.events)
        return group

    async def _commit(self, group: list[_Batch]) -> None:
        started = time.perf_counter()
        try:
            results = await self._store.append_batches(
                [(b.run_id, b.events) for b in group],
                [b.close for b in group if b.close is not None],
            )
            count = sum(len(b.events) for b in group)
            self._observer.committed(time.perf_counter() - started, count)
        except Exception as exc:
            if len(group) == 1:
                _settle(group[0], exc=exc)
                return
            # One run's problem (closed, unknown) must not fail its neighbours: retry alone.
            for batch in group:
                await self._commit([batch])
            return
        for batch, appended in zip(group, results, strict=True):
            _settle(batch, result=appended)


def _settle(
    batch: _Batch, *, result: list[Appended] | None = None, exc: BaseException | None = None
) -> None:
    if batch.done.done():
        return
    if exc is not None:
        batch.done.set_exception(exc)
    else:
        batch.done.set_result(result or [])
