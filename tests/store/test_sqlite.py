"""SQLite's own ways of running the store: the loop's connection, the writer thread, the WAL."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from recorder.store import NewRun, open_store
from tests.store.spec.conftest import ev


async def test_sqlite_writes_wait_for_another_process_holding_the_lock(sqlite_url: str) -> None:
    # Small transactions run on the event loop with busy_timeout 0; when another process
    # holds the write lock they must wait for it on the writer thread, not fail.
    store = await open_store(sqlite_url, migrate=True)
    other = sqlite3.connect(sqlite_url.split("///", 1)[1], isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        create = asyncio.create_task(store.create_run(NewRun("r1", "t1")))
        await asyncio.sleep(0.3)
        assert not create.done()  # waiting on the lock
        other.execute("ROLLBACK")
        await asyncio.wait_for(create, 10)
        other.execute("BEGIN IMMEDIATE")
        appends = asyncio.create_task(store.append("r1", [ev("{}"), ev("{}")]))
        await asyncio.sleep(0.3)
        assert not appends.done()
        other.execute("COMMIT")
        assert [a.seq for a in await asyncio.wait_for(appends, 10)] == [0, 1]
    finally:
        other.close()
        await store.close()


async def test_sqlite_small_commits_keep_the_wal_checkpointed(sqlite_url: str) -> None:
    # The event loop's connection never checkpoints; the writer thread does it for them.
    store = await open_store(sqlite_url, migrate=True)
    await store.create_run(NewRun("r1", "t1"))
    for i in range(3000):
        await store.append("r1", [ev(f'{{"i":{i},"pad":"{"x" * 2000}"}}')])
        await asyncio.sleep(0)  # as a recorder waits for its network between commits
    await asyncio.sleep(0.2)  # the last checkpoint runs on the writer thread
    size = Path(sqlite_url.split("///", 1)[1] + "-wal").stat().st_size
    await store.close()
    # Unchecked, 3,000 commits of a 2 KB event leave a WAL of well over 12 MB.
    assert size < 8 * 1024 * 1024


async def test_reads_go_on_while_another_process_writes(sqlite_url: str) -> None:
    # Reads have connections of their own (WAL): a writer holding the lock stops no reader.
    store = await open_store(sqlite_url, migrate=True)
    await store.create_run(NewRun("r1", "t1"))
    other = sqlite3.connect(sqlite_url.split("///", 1)[1], isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("UPDATE runs SET owner = 'other' WHERE run_id = 'r1'")
        run = await asyncio.wait_for(store.get_run("r1"), 5)
        assert run.owner is None  # not committed yet
        other.execute("COMMIT")
        assert (await store.get_run("r1")).owner == "other"
    finally:
        other.close()
        await store.close()
