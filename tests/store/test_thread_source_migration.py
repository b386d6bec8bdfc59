"""Revision 0002 on a database recorded before it: threads forked into a new thread before
the source columns existed get their source from their first run, on both databases."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from recorder.store import ThreadSource, open_store
from recorder.store.migrations import upgrade

THREADS = [("orig", 1.0), ("fork", 5.0), ("spawned", 6.0), ("cont", 7.0)]
# run, thread, parent, parent_seq, parent_inferred, created_at
RUNS = [
    ("o1", "orig", None, None, False, 1.0),
    ("o2", "orig", "o1", None, True, 2.0),
    ("f1", "fork", "o1", 9, False, 5.0),  # a fork into a new thread, at seq 9 of o1
    ("f2", "fork", "f1", None, True, 5.5),
    ("s1", "spawned", "o2", None, False, 6.0),  # from the end of o2
    ("c1", "cont", None, None, False, 7.0),  # a thread of its own...
    ("c2", "cont", "o1", 3, False, 8.0),  # ...whose later run names a parent elsewhere
]


async def test_upgrade_fills_in_the_source_of_threads_recorded_before(db_url: str) -> None:
    engine = create_async_engine(db_url)
    try:
        await upgrade(engine, "0001")
        async with engine.begin() as conn:
            for thread, at in THREADS:
                await conn.execute(
                    text(
                        "INSERT INTO threads (thread_id, created_at, updated_at, run_count) "
                        "VALUES (:t, :at, :at, 1)"
                    ),
                    {"t": thread, "at": at},
                )
            for run, thread, parent, seq, inferred, at in RUNS:
                await conn.execute(
                    text(
                        "INSERT INTO runs (run_id, thread_id, status, parent_run_id, parent_seq,"
                        " parent_inferred, created_at) VALUES (:r, :t, 'finished', :p, :s, :i, :at)"
                    ),
                    {"r": run, "t": thread, "p": parent, "s": seq, "i": inferred, "at": at},
                )
        await upgrade(engine)
    finally:
        await engine.dispose()
    store = await open_store(db_url)
    try:
        sources = {t: (await store.get_thread(t)).source for t, _ in THREADS}
        assert sources == {
            "orig": None,
            "fork": ThreadSource("orig", "o1", 9),
            "spawned": ThreadSource("orig", "o2", None),
            "cont": None,
        }
        assert [t.thread_id for t in await store.list_forks("orig")] == ["fork", "spawned"]
    finally:
        await store.close()
