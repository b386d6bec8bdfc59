"""A purge removes every byte of the thread's data from the database's files.

SQLite: the file and its WAL after a checkpoint (``secure_delete`` zeroes freed space).
PostgreSQL: the files of the recorder's tables, their indexes and TOAST after VACUUM FULL
and a CHECKPOINT (a private cluster, whose data directory the test can read). The ids a
tombstone keeps on purpose are not the data looked for: the payloads, the posted input,
the summary, the checkpoints.
"""

from __future__ import annotations

import time
from pathlib import Path

import asyncpg
import pytest

from recorder.store import EventStore, NewRun, Note, PurgeSelection, SearchDoc, open_store
from tests.conftest import pg_available, require
from tests.pgcluster import pg_bin, private_cluster
from tests.store.spec.conftest import ev

GONE = b"ERASE-ME-7f3a"
KEPT = b"KEEP-ME-19c4"


async def _record(store: EventStore, thread: str, marker: bytes, big: bool) -> None:
    run = f"{thread}-run"
    text = marker.decode()
    await store.create_run(NewRun(run, thread, input=b'{"messages":"' + marker + b'-input"}'))
    padding = "p" * (6000 if big else 10)  # SQLite: overflow pages too
    await store.append(
        run, [ev(f'{{"n":{i},"text":"{text}-payload-{i}","pad":"{padding}"}}') for i in range(20)]
    )
    await store.save_checkpoint(run, 5, marker + b"-checkpoint")
    await store.set_status(run, "finished", summary=f"{text}-summary")
    # Derived and side data keyed by the thread: the search index and the annotations. The
    # word is one the index keeps whole (lower case, after every other term).
    word = "zzq" + text.lower().replace("-", "")
    doc = SearchDoc(thread, run, 0, 19, "message", f"the {word} text", time.time(), agent="a")
    await store.index_run(run, thread, [doc])
    await store.set_tags(thread, None, {"label": f"{text}-tag"})
    await store.add_note(Note(f"{thread}-note", thread, None, f"{text}-note", "me", time.time()))


async def test_sqlite_file_and_wal_hold_nothing_of_a_purged_thread(tmp_path: Path) -> None:
    """Right after the purge returns, the store still open: it checkpointed and emptied
    the WAL itself (a WAL left as it was holds the old pages until it starts over)."""
    path = tmp_path / "recorder.db"
    store = await open_store(f"sqlite+aiosqlite:///{path}", migrate=True)
    try:
        await _record(store, "gone", GONE, big=True)
        await _record(store, "kept", KEPT, big=True)
        await store.purge(PurgeSelection(thread_ids=("gone",)), actor="cli", reason="erasure")
        data = path.read_bytes()
        log = Path(f"{path}-wal").read_bytes()
        # A rewrite (a redaction after the fact) overwrites its payloads the same way.
        payload = b'{"n":3,"text":"' + KEPT + b'-payload-3","pad":"' + b"p" * 6000 + b'"}'
        assert (await store.read_events("kept-run", gt=2, limit=1))[0].payload == payload
        await store.rewrite(
            "kept-run", {3: payload.replace(KEPT, b"[REDACTED]")}, actor="cli", reason="x"
        )
        rewritten = path.read_bytes()
        rewritten_log = Path(f"{path}-wal").read_bytes()
    finally:
        await store.close()
    assert KEPT + b"-payload-3" in data  # the check can see what is there
    assert b"zzqkeepme19c4" in data
    assert log == b""
    for gone in (GONE, b"eraseme7f3a"):
        assert gone not in data
    assert KEPT + b"-payload-3" not in rewritten
    assert KEPT + b"-payload-4" in rewritten
    assert rewritten_log == b""


@pytest.mark.postgres
async def test_postgres_files_hold_nothing_of_a_purged_thread_after_vacuum() -> None:
    require(pg_available() and pg_bin() is not None, "PostgreSQL's server programs")
    async with private_cluster() as cluster:
        store = await open_store(cluster.url, migrate=True)
        try:
            await _record(store, "gone", GONE, big=False)
            await _record(store, "kept", KEPT, big=False)
            await store.purge(PurgeSelection(thread_ids=("gone",)), actor="cli", reason=None)
        finally:
            await store.close()
        conn = await asyncpg.connect(cluster.dsn)
        try:
            await conn.execute("VACUUM FULL")
            await conn.execute("CHECKPOINT")
            files = await conn.fetch(
                "SELECT pg_relation_filepath(c.oid) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname IN ('public', 'pg_toast') AND c.relkind IN ('r', 'i', 't') "
                "AND pg_relation_filepath(c.oid) IS NOT NULL"
            )
        finally:
            await conn.close()
        contents = b""
        for (relative,) in files:
            for segment in sorted(cluster.data.glob(f"{relative}*")):
                contents += segment.read_bytes()
    assert KEPT + b"-payload-3" in contents
    assert b"zzqkeepme19c4" in contents
    assert GONE not in contents
    assert b"eraseme7f3a" not in contents
