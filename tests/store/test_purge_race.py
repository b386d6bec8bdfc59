"""A purge on PostgreSQL against a chunk tree written at the same moment.

Chunks are content-addressed and shared between threads, and a tree's write stops at the
first chunk it finds present, trusting its subtree. A purge that read the remaining trees'
roots before such a write committed, then deleted the chunks only its threads reached,
would leave the new tree without them. The purge waits for tree writes in flight (and
holds new ones back) before it reads the roots.
"""

from __future__ import annotations

import asyncio

import asyncpg
import orjson
import pytest

from recorder.store import EventStore, NewRun, PurgeSelection, open_store
from recorder.store.inputs import HASH_BYTES

pytestmark = pytest.mark.postgres


def _posted(thread: str) -> bytes:
    messages = [{"id": f"m{i}", "role": "user", "content": f"words {i} " * 30} for i in range(40)]
    return orjson.dumps({"threadId": thread, "runId": f"{thread}-r", "messages": messages})


async def _run(store: EventStore, thread: str) -> str:
    run_id = f"{thread}-r"
    await store.create_run(NewRun(run_id, thread, input=_posted(thread)))
    await store.set_status(run_id, "finished")
    return run_id


async def _missing(conn: asyncpg.Connection, root: bytes) -> int:
    """How many chunks of the tree at ``root`` are not in the table."""
    missing, stack, seen = 0, [root], set()
    while stack:
        key = stack.pop()
        if key in seen:
            continue
        seen.add(key)
        row = await conn.fetchrow("SELECT level, data FROM input_chunks WHERE hash = $1", key)
        if row is None:
            missing += 1
        elif row["level"] > 0:
            data = bytes(row["data"])
            stack.extend(data[i : i + HASH_BYTES] for i in range(0, len(data), HASH_BYTES))
    return missing


async def test_a_tree_written_during_a_purge_keeps_every_chunk_it_shares(pg_url: str) -> None:
    store = await open_store(pg_url, migrate=True)
    writer = await asyncpg.connect(pg_url.replace("postgresql+asyncpg", "postgresql", 1))
    try:
        await _run(store, "gone")
        kept = await _run(store, "kept")
        root = await writer.fetchval("SELECT root FROM run_inputs WHERE run_id = 'gone-r'")
        assert root is not None and await _missing(writer, root) == 0
        level, data = await writer.fetchrow(
            "SELECT level, data FROM input_chunks WHERE hash = $1", root
        )
        # A tree write in flight, as the store makes one: its root's insert finds the
        # purged thread's chunk present and stops there.
        tx = writer.transaction()
        await tx.start()
        await writer.execute(
            "INSERT INTO input_chunks (hash, level, data) VALUES ($1, $2, $3) "
            "ON CONFLICT (hash) DO NOTHING",
            root,
            level,
            data,
        )
        purge = asyncio.create_task(
            store.purge(PurgeSelection(thread_ids=("gone",)), actor="cli", reason="erasure")
        )
        await asyncio.sleep(0.5)
        assert not purge.done(), "the purge did not wait for a tree write in flight"
        # The write commits a reference to the tree (a checkpoint of a run that stays).
        await writer.execute(
            "INSERT INTO checkpoints (run_id, seq, data, root) VALUES ($1, 0, NULL, $2)",
            kept,
            root,
        )
        await tx.commit()
        report = await asyncio.wait_for(purge, 30)
        assert [t.thread_id for t in report.threads] == ["gone"]
        assert await _missing(writer, root) == 0
        assert await writer.fetchval("SELECT count(*) FROM runs WHERE thread_id = 'gone'") == 0
        # and a tree write started after the purge took the table waits, then finds the
        # chunks the purge deleted gone and writes them again
        await _run(store, "again")
        again = await writer.fetchval("SELECT root FROM run_inputs WHERE run_id = 'again-r'")
        assert await _missing(writer, again) == 0
    finally:
        await writer.close()
        await store.close()


async def test_a_checkpoint_saved_while_a_purge_holds_its_run_waits_without_deadlock(
    pg_url: str,
) -> None:
    """The checkpoint's write locks its run before the chunk table: it waits for whoever
    holds the run, as a purge deleting it does, without holding the chunk table the purge
    then takes (a deadlock, one of the two aborted, before)."""
    store = await open_store(pg_url, migrate=True)
    holder = await asyncpg.connect(pg_url.replace("postgresql+asyncpg", "postgresql", 1))
    try:
        run_id = await _run(store, "gone")
        # The run's row held as a purge holds it while it deletes the thread.
        tx = holder.transaction()
        await tx.start()
        await holder.execute("SELECT 1 FROM runs WHERE run_id = $1 FOR UPDATE", run_id)
        save = asyncio.create_task(store.save_checkpoint(run_id, 0, _posted("c") * 2))
        await asyncio.sleep(0.3)
        assert not save.done()
        # Meanwhile the chunk table is free to be taken as a purge takes it.
        await asyncio.wait_for(holder.execute("LOCK TABLE input_chunks IN SHARE MODE"), 5)
        await tx.commit()
        await asyncio.wait_for(save, 10)
    finally:
        await holder.close()
        await store.close()
