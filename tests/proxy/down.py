"""A store whose database is "down" at will: its writes raise ``StoreUnavailable`` (the
error a dead or full database gives at the store boundary); reads go on."""

from __future__ import annotations

import asyncio
from typing import Any

from recorder.errors import StoreUnavailable
from recorder.store import EventStore

_WRITES = {"create_run", "append", "append_batches", "set_status", "set_summary"}


class Switchable:
    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.down = False
        self.url = store.url
        self.append_survives_cancel = store.append_survives_cancel

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.store, name)
        if name not in _WRITES:
            return attr

        async def write(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise StoreUnavailable("the database is unavailable")
            return await attr(*args, **kwargs)

        return write


class Late:
    """A store whose writes, while ``slow`` is on, commit ``delay`` seconds late (past the
    recorder's deadline): they land in the database after their copies were journaled."""

    def __init__(self, store: EventStore, delay: float) -> None:
        self.store = store
        self.slow = False
        self.delay = delay
        self.late = 0
        self.url = store.url
        self.append_survives_cancel = store.append_survives_cancel

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.store, name)
        if name not in _WRITES:
            return attr

        async def write(*args: Any, **kwargs: Any) -> Any:
            if self.slow:
                self.late += 1
                await asyncio.sleep(self.delay)
            return await attr(*args, **kwargs)

        return write
