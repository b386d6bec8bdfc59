"""Writes of derived data (checkpoints, search documents) on PostgreSQL against a purge or
a rewrite of their run.

Both are written in transactions of their own, apart from the reads they were derived
from, and lock their run before they write anything (a checkpoint ``FOR KEY SHARE``, the
indexer ``FOR UPDATE``). The purge and the rewrite lock the runs they change
(``FOR UPDATE``) before they delete what was derived from them: a write in flight is
waited for and then deleted with the rest; one arriving later waits for them and then
finds its run gone, or changed, and writes nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import pytest

from recorder.errors import RunNotFound, ThreadNotFound
from recorder.store import EventStore, NewEvent, NewRun, Note, PurgeSelection, open_store
from tests.store.pglocks import waiting_on_locks

pytestmark = pytest.mark.postgres


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[EventStore]:
    opened = await open_store(pg_url, migrate=True)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def other(pg_url: str) -> AsyncIterator[asyncpg.Connection]:
    """Another client of the database: a writer in flight, a lock held."""
    conn = await asyncpg.connect(pg_url.replace("postgresql+asyncpg", "postgresql", 1))
    try:
        yield conn
    finally:
        await conn.close()


async def _closed(store: EventStore, thread: str) -> str:
    run_id = f"{thread}-r"
    await store.create_run(NewRun(run_id, thread))
    events = [NewEvent(b'{"n":%d,"email":"a%d@x.org"}' % (i, i), "CUSTOM") for i in range(4)]
    await store.append(run_id, events)
    await store.set_status(run_id, "finished")
    return run_id


async def _held(conn: asyncpg.Connection, run_id: str) -> asyncpg.transaction.Transaction:
    """A checkpoint's write in flight: its run locked as the store locks it, nothing
    inserted yet."""
    tx = conn.transaction()
    await tx.start()
    await conn.execute("SELECT 1 FROM runs WHERE run_id = $1 FOR KEY SHARE", run_id)
    return tx


async def test_a_purge_waits_for_a_checkpoint_in_flight_and_deletes_it(
    store: EventStore, other: asyncpg.Connection
) -> None:
    """Before, the purge deleted the thread's checkpoints, then its runs, and the run's
    delete waited for the checkpoint's commit: it then failed on the foreign key of the
    checkpoint just committed, and nothing was purged."""
    run_id = await _closed(store, "gone")
    tx = await _held(other, run_id)
    purge = asyncio.create_task(
        store.purge(PurgeSelection(thread_ids=("gone",)), actor="cli", reason="erasure")
    )
    await waiting_on_locks(other, 1)
    assert not purge.done(), "the purge did not wait for the checkpoint's write"
    await other.execute(
        "INSERT INTO checkpoints (run_id, seq, data) VALUES ($1, 3, 'derived')", run_id
    )
    await tx.commit()
    report = await asyncio.wait_for(purge, 30)
    assert [t.thread_id for t in report.threads] == ["gone"]
    assert await other.fetchval("SELECT count(*) FROM checkpoints") == 0
    assert await other.fetchval("SELECT count(*) FROM runs") == 0
    # and a checkpoint saved once the purge is done finds its run gone
    with pytest.raises(Exception, match="gone-r"):
        await store.save_checkpoint(run_id, 3, b"late")


async def test_a_rewrite_waits_for_a_checkpoint_in_flight_and_drops_it(
    store: EventStore, other: asyncpg.Connection
) -> None:
    """Before, the rewrite neither waited nor saw the checkpoint (not yet committed when
    it dropped the run's checkpoints): folded over the replaced text, it stayed, and the
    state of the run answered with what a redaction had removed."""
    run_id = await _closed(store, "t")
    tx = await _held(other, run_id)
    rewrite = asyncio.create_task(
        store.rewrite(run_id, {1: b'{"n":1,"email":"[REDACTED]"}'}, actor="cli", reason=None)
    )
    await waiting_on_locks(other, 1)
    assert not rewrite.done(), "the rewrite did not wait for the checkpoint's write"
    await other.execute(
        "INSERT INTO checkpoints (run_id, seq, data) VALUES ($1, 3, 'holds a1@x.org')",
        run_id,
    )
    await tx.commit()
    await asyncio.wait_for(rewrite, 30)
    assert await store.nearest_checkpoint(run_id, 3) is None


async def test_a_checkpoint_saved_while_a_rewrite_runs_waits_and_is_turned_away(
    store: EventStore, other: asyncpg.Connection
) -> None:
    """The other order: the rewrite holds the run when the checkpoint, folded before it,
    comes to be saved. The write waits for the rewrite's commit, then sees the run's new
    head and keeps nothing."""
    run_id = await _closed(store, "t")
    seen = await store.get_run(run_id, input=False)
    # The rewrite's first hold on the run, then its new head, as it writes them.
    tx = other.transaction()
    await tx.start()
    await other.execute("SELECT 1 FROM runs WHERE run_id = $1 FOR UPDATE", run_id)
    save = asyncio.create_task(store.save_checkpoint(run_id, 3, b"holds a1", seen=seen))
    await waiting_on_locks(other, 1)
    assert not save.done()
    await other.execute("UPDATE runs SET head = $1 WHERE run_id = $2", b"\x01" * 32, run_id)
    await tx.commit()
    await asyncio.wait_for(save, 10)
    assert await store.nearest_checkpoint(run_id, 3) is None


async def test_a_rewrite_waits_for_the_indexer_holding_its_run_and_drops_what_it_wrote(
    store: EventStore, other: asyncpg.Connection
) -> None:
    run_id = await _closed(store, "t")
    tx = other.transaction()
    await tx.start()
    await other.execute("SELECT head FROM runs WHERE run_id = $1 FOR UPDATE", run_id)
    rewrite = asyncio.create_task(
        store.rewrite(run_id, {1: b'{"n":1,"email":"[REDACTED]"}'}, actor="cli", reason=None)
    )
    await waiting_on_locks(other, 1)
    assert not rewrite.done(), "the rewrite did not wait for the other"
    await other.execute(
        "INSERT INTO search_docs (thread_id, run_id, seq_from, seq_to, kind, text, "
        "recorded_at, terms) VALUES ('t', $1, 1, 1, 'message', 'a1@x.org', 0, "
        "to_tsvector('simple', 'a1@x.org'))",
        run_id,
    )
    await other.execute(
        "INSERT INTO search_runs (run_id, thread_id, indexed_at) VALUES ($1, 't', 0)", run_id
    )
    await tx.commit()
    await asyncio.wait_for(rewrite, 30)
    assert await other.fetchval("SELECT count(*) FROM search_docs") == 0
    assert await store.runs_to_index(10) == [run_id]


async def test_a_note_added_while_its_thread_is_purged_is_refused_not_left_behind(
    store: EventStore, other: asyncpg.Connection
) -> None:
    """Annotations have no foreign key: a note whose thread was checked before a purge
    committed, and inserted after the purge had deleted the thread's notes, stayed behind
    the purge. Now an annotation locks its thread (as the purge does first) and waits."""
    posted = b'{"threadId":"t","runId":"t-r","messages":[' + b'{"x":1},' * 400 + b"{}]}"
    await store.create_run(NewRun("t-r", "t", input=posted))
    await store.set_status("t-r", "finished")
    # A chunk tree being written elsewhere: the purge, past its deletes, waits for it.
    tx = other.transaction()
    await tx.start()
    await other.execute(
        "INSERT INTO input_chunks (hash, level, data) VALUES ($1, 0, 'x')", b"\x07" * 16
    )
    purge = asyncio.create_task(
        store.purge(PurgeSelection(thread_ids=("t",)), actor="cli", reason="erasure")
    )
    await waiting_on_locks(other, 1)
    note = asyncio.create_task(
        store.add_note(Note("n1", "t", None, "bob@example.com called", "ann", time.time()))
    )
    tags = asyncio.create_task(store.set_tags("t", "t-r", {"who": "bob@example.com"}))
    await waiting_on_locks(other, 3)
    await tx.rollback()
    await asyncio.wait_for(purge, 30)
    with pytest.raises(ThreadNotFound):
        await asyncio.wait_for(note, 10)
    with pytest.raises(RunNotFound):
        await asyncio.wait_for(tags, 10)
    for table in ("notes", "tags", "threads", "runs"):
        assert await other.fetchval(f"SELECT count(*) FROM {table}") == 0, table
