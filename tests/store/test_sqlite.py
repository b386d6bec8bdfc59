"""SQLite's own ways of running the store: the loop's connection, the writer thread, the WAL."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from recorder.store import NewEvent, NewRun, open_store
from recorder.store import sqlite as sqlite_module
from recorder.store.sqlite_writer import SQLiteWriter
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
    # The writers' connections never checkpoint; the checkpoints' own connection does it
    # for them, and the WAL starts over even though the writes never pause.
    store = await open_store(sqlite_url, migrate=True)
    await store.create_run(NewRun("r1", "t1"))
    for i in range(3000):
        await store.append("r1", [ev(f'{{"i":{i},"pad":"{"x" * 2000}"}}')])
        await asyncio.sleep(0)  # as a recorder waits for its network between commits
    await asyncio.sleep(0.2)  # the last checkpoint runs on its thread
    size = Path(sqlite_url.split("///", 1)[1] + "-wal").stat().st_size
    await store.close()
    # Unchecked, 3,000 commits of a 2 KB event leave a WAL of about 60 MB; checkpointed
    # beside the writes alone (never under the write lock), it never starts over either.
    # Checked: the limit, plus what comes in while a checkpoint beside the writes runs
    # and while the one under the lock waits for it.
    limit = SQLiteWriter._WAL_FRAMES * 4096 + 2 * SQLiteWriter._CHECKPOINT_BYTES
    assert size < limit


async def test_sqlite_writes_go_on_while_the_wal_is_checkpointed(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A checkpoint (its copy and its syncs of both files) runs beside the writes, not
    # under their lock: held at its start, it holds no append up.
    started, release = threading.Event(), threading.Event()
    beside = SQLiteWriter._checkpoint_beside

    def held(writer: SQLiteWriter) -> int:
        started.set()
        release.wait(30)
        return beside(writer)

    monkeypatch.setattr(SQLiteWriter, "_checkpoint_beside", held)
    store = await open_store(sqlite_url, migrate=True)
    try:
        await store.create_run(NewRun("r1", "t1"))
        pad = "x" * 2000
        for i in range(3000):
            await store.append("r1", [ev(f'{{"i":{i},"pad":"{pad}"}}')])
            await asyncio.sleep(0)  # (the checkpoint's task starts at the loop's next turn)
            if started.is_set():
                break
        assert await asyncio.to_thread(started.wait, 10)
        for i in range(200):  # small appends on the loop, then large ones on the thread
            await asyncio.wait_for(store.append("r1", [ev(f'{{"j":{i}}}')]), 5)
        big = [ev(f'{{"k":{i},"pad":"{pad}"}}') for i in range(500)]
        await asyncio.wait_for(store.append("r1", big), 5)
    finally:
        release.set()
        await store.close()
    with sqlite3.connect(sqlite_url.split("///", 1)[1]) as conn:
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] > 700


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


def _batches() -> list[tuple[str, list[NewEvent]]]:
    """Blocks of every shape the one-statement insert must write as the rows do, or leave
    to them: plain types; types that are empty, non-ASCII, NUL-bearing or None; payloads
    that are empty, binary or large; two origins and two times in one batch."""
    plain = [
        NewEvent(
            b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"%d"}' % i,
            kind,
            recorded_at=1.5,
        )
        for i, kind in zip(range(700), itertools.cycle(["TEXT_MESSAGE_CONTENT", "", "X" * 300]))
    ]
    odd = [
        NewEvent(b"", "CUSTOM", recorded_at=2.0),
        NewEvent(b"\x00\xff\xfe binary \n\n", "RAW", recorded_at=2.0),
        NewEvent(b"x" * 100_000, "CUSTOM", recorded_at=2.0),
        *(NewEvent(b"%d" % i, "CUSTOM", recorded_at=2.0) for i in range(300)),
        *(NewEvent(b"%d" % i, "CUSTOM", origin="recorder", recorded_at=2.0) for i in range(300)),
        *(NewEvent(b"%d" % i, "CUSTOM", recorded_at=3.0) for i in range(300)),
    ]
    return [
        ("r1", plain),
        ("r2", odd),
        (
            "r1",
            [NewEvent(b"{}", None, recorded_at=1.5) if i == 150 else plain[i] for i in range(300)],
        ),
        (
            "r2",
            [
                NewEvent(b"{}", "TYPE_\u00e9" if i == 7 else "C", recorded_at=5.0)
                for i in range(300)
            ],
        ),
        ("r2", [NewEvent(b"{}", "A\x00B", recorded_at=6.0) for i in range(300)]),
    ]


async def test_large_blocks_in_one_statement_store_what_rows_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A block of 256 events or more is written by one INSERT that cuts each row out of the
    # joined columns (``_insert_whole``). What it stores must be byte for byte what binding
    # each row stores, where it takes a block and where it leaves one to the rows.
    whole: list[bool] = []
    taken = sqlite_module._insert_whole

    def spy(conn: sqlite3.Connection, block: Any) -> bool:
        whole.append(taken(conn, block))
        return whole[-1]

    monkeypatch.setattr(sqlite_module, "_insert_whole", spy)
    dumps: list[list[tuple[Any, ...]]] = []
    for limit in (sqlite_module._WHOLE_FROM, 10**9):  # one statement, then rows only
        monkeypatch.setattr(sqlite_module, "_WHOLE_FROM", limit)
        path = tmp_path / f"whole-{limit}.db"
        store = await open_store(f"sqlite+aiosqlite:///{path}", migrate=True)
        try:
            for run_id in ("r1", "r2"):
                await store.create_run(NewRun(run_id, "t1"))
            await store.append_batches(_batches())
            report = await store.verify_chains()
            assert report.ok, report
        finally:
            await store.close()
        with contextlib.closing(sqlite3.connect(path)) as conn:
            dumps.append(
                conn.execute(
                    "SELECT position, thread_id, run_id, seq, type, typeof(type), payload,"
                    " typeof(payload), recorded_at, origin, hash, length(hash)"
                    " FROM events ORDER BY position"
                ).fetchall()
            )
    # The plain and odd blocks went whole; the None and the non-ASCII types went by rows.
    assert whole.count(True) == 5 and whole.count(False) == 2
    assert len(dumps[0]) == 700 + 903 + 300 + 300 + 300
    assert dumps[0] == dumps[1]
    by_seq = {(row[2], row[3]): row for row in dumps[0]}
    assert by_seq["r2", 1][6] == b"\x00\xff\xfe binary \n\n" and by_seq["r2", 0][6] == b""
    assert by_seq["r2", 0][7] == "blob" and by_seq["r1", 1][4:6] == ("", "text")
    assert by_seq["r1", 850][4] is None and by_seq["r2", 910][4] == "TYPE_\u00e9"
    assert by_seq["r2", 1203][4] == "AB"  # NUL characters are dropped from a stored type
    assert {row[11] for row in dumps[0]} == {32}
