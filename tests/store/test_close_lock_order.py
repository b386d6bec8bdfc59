"""On PostgreSQL an append that closes runs takes their threads' rows before anything else
(migration 0011_close_lock_order, ``closing.then_close``), as every other writer does.

Taken after the run's row, a run id posted again while its first run was closing
deadlocked: the duplicate's creation held the thread's row and waited on the run's key,
the closing append held the run's row and waited for the thread. PostgreSQL failed one of
them: the duplicate answered "a concurrent write collided" instead of "exists already", or
the first run's close failed. Both ways of appending are run: the one-call function and
the statements.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable

import asyncpg
import pytest
from asyncpg.transaction import Transaction

from recorder.errors import Conflict
from recorder.store import Closing, EventStore, NewEvent, NewRun, open_store
from recorder.store.sql import SqlStore
from tests.store.pglocks import waiting_on_locks

pytestmark = pytest.mark.postgres

FINISHED = b'{"type":"RUN_FINISHED","threadId":"t","runId":"r"}'


@pytest.fixture(params=["one call", "statements"])
async def store(request: pytest.FixtureRequest, pg_url: str) -> AsyncIterator[EventStore]:
    opened = await open_store(pg_url, migrate=True)
    assert isinstance(opened, SqlStore) and opened.database.one_trip
    if request.param == "statements":
        opened.database.one_trip = False
    try:
        yield opened
    finally:
        await opened.close()


def _connect(pg_url: str) -> Awaitable[asyncpg.Connection]:
    return asyncpg.connect(pg_url.replace("postgresql+asyncpg://", "postgresql://", 1))


@pytest.fixture
async def other(pg_url: str) -> AsyncIterator[asyncpg.Connection]:
    """Another client of the database."""
    conn = await _connect(pg_url)
    try:
        yield conn
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def thread_held(store: EventStore, pg_url: str) -> AsyncIterator[Transaction]:
    """Run ``r`` of thread ``t`` started, and the thread's row held by another client (as
    a run being created on it holds it) until the transaction given ends."""
    await store.create_run(NewRun("r", "t", infer_parent=True))
    await store.append_batches([("r", [NewEvent(b'{"type":"RUN_STARTED"}', "RUN_STARTED")])])
    holder = await _connect(pg_url)
    try:
        tx = holder.transaction()
        await tx.start()
        await holder.execute("SELECT 1 FROM threads WHERE thread_id = 't' FOR UPDATE")
        yield tx
    finally:
        await holder.close()
    run = await store.get_run("r")
    assert run is not None and run.status == "finished" and run.event_count == 2


def _close(store: EventStore) -> asyncio.Task[object]:
    batch = [("r", [NewEvent(FINISHED, "RUN_FINISHED")])]
    return asyncio.create_task(store.append_batches(batch, [Closing("r", "finished", "success")]))


async def test_a_closing_append_waiting_for_its_thread_holds_nothing_of_its_run(
    store: EventStore, other: asyncpg.Connection, pg_url: str
) -> None:
    async with thread_held(store, pg_url) as tx:
        closing = _close(store)
        await asyncio.sleep(0.3)
        assert not closing.done(), "the close did not wait for its thread's row"
        # Neither the run's row nor the events lock is taken while it waits.
        async with other.transaction():
            await other.execute("SELECT 1 FROM runs WHERE run_id = 'r' FOR UPDATE NOWAIT")
            await other.execute("LOCK TABLE events IN EXCLUSIVE MODE NOWAIT")
        await tx.rollback()
        await asyncio.wait_for(closing, 10)


async def test_a_run_id_posted_again_while_its_run_closes_is_a_duplicate_and_the_close_stands(
    store: EventStore, pg_url: str
) -> None:
    async with thread_held(store, pg_url) as tx:
        # The duplicate's creation lines up for the thread's row first, the closing append
        # second. Taking the run's row before the thread's, the append would hold it when
        # the duplicate, let in first, checks the run's key: each would wait for the other.
        again = asyncio.create_task(store.create_run(NewRun("r", "t", infer_parent=True)))
        await asyncio.sleep(0.2)
        closing = _close(store)
        await asyncio.sleep(0.2)
        assert not again.done() and not closing.done()
        await tx.rollback()
        with pytest.raises(Conflict) as raised:
            await asyncio.wait_for(again, 10)
        assert str(raised.value) == "run 'r' already exists"
        await asyncio.wait_for(closing, 10)


async def test_the_reaper_and_an_append_closing_runs_of_two_threads_take_them_in_one_order(
    store: EventStore, other: asyncpg.Connection
) -> None:
    """The reaper closes stale runs in thread id order, as an append that closes runs
    takes their threads. Here the run ids sort the other way round (thread A's stale run
    is ``z``, B's is ``a``): going by run id, the reaper held B and waited for A while the
    append held A and waited for B, and PostgreSQL failed one of the two."""
    for run_id, thread_id in (("z", "A"), ("a", "B"), ("a-live", "A"), ("b-live", "B")):
        await store.create_run(NewRun(run_id, thread_id))
    await other.execute("UPDATE runs SET heartbeat_at = 0 WHERE run_id IN ('z', 'a')")
    async with other.transaction():
        # B's stale run held (as an append to it would): the reaper stops there, holding
        # what it took before.
        await other.execute("SELECT 1 FROM runs WHERE run_id = 'a' FOR UPDATE")
        reaping = asyncio.create_task(store.mark_incomplete(stale_before=time.time() - 60))
        await waiting_on_locks(other, 1)
        assert not reaping.done()
        batch = [(r, [NewEvent(FINISHED, "RUN_FINISHED")]) for r in ("a-live", "b-live")]
        closes = [Closing(r, "finished", "success") for r in ("a-live", "b-live")]
        closing = asyncio.create_task(store.append_batches(batch, closes))
        await waiting_on_locks(other, 2)
        assert not closing.done()
    assert sorted(await asyncio.wait_for(reaping, 10)) == ["a", "z"]
    await asyncio.wait_for(closing, 10)
    for run_id, status in (("z", "incomplete"), ("a", "incomplete"), ("a-live", "finished")):
        assert (await store.get_run(run_id)).status == status
