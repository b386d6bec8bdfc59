"""EventStore.wait."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from recorder.store import EventStore, NewRun, open_store
from tests.store.spec.conftest import ev


async def _woken(store: EventStore, commit: Callable[[], Awaitable[object]]) -> float:
    """How long ``wait(5)`` took when ``commit`` ran once it was waiting."""
    started = time.monotonic()
    waiting = asyncio.create_task(store.wait(5))
    await asyncio.sleep(0.05)
    await commit()
    await waiting
    return time.monotonic() - started


async def test_an_append_wakes_a_waiter(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.wait(0.01)  # starts listening, where there is something to listen to
    woke = await _woken(store, lambda: store.append("r1", [ev("{}")]))
    assert woke < 2


async def test_a_status_wakes_a_waiter(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.wait(0.01)
    woke = await _woken(store, lambda: store.set_status("r1", "finished"))
    assert woke < 2


async def test_without_commits_it_waits_out_its_timeout(store: EventStore) -> None:
    started = time.monotonic()
    await store.wait(0.3)
    assert 0.25 <= time.monotonic() - started < 3


@pytest.mark.postgres
async def test_another_process_wakes_a_waiter_on_postgresql(pg_url: str) -> None:
    # Only PostgreSQL tells other processes of commits; on SQLite, readers poll.
    waiter = await open_store(pg_url, migrate=True)
    writer = await open_store(pg_url)
    try:
        await writer.create_run(NewRun("r1", "t1"))
        await waiter.wait(0.01)
        woke = await _woken(waiter, lambda: writer.append("r1", [ev("{}")]))
        assert woke < 2
    finally:
        await writer.close()
        await waiter.close()
