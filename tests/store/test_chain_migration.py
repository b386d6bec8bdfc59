"""Revision 0004_chain on a database recorded before it: every event gets its hash, every
closed run its head and seal (in the order the runs finished), every thread its chain, on
both databases; the triggers then refuse as before and let the purge through."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from recorder.store import NewEvent, PurgeSelection, chain, open_store
from recorder.store.migrations import upgrade
from tests.conftest import raw_sql

# run, thread, status, finished_at, events (type, payload)
RUNS = [
    ("a1", "ta", "finished", 3.0, [("RUN_STARTED", b'{"a":1}'), (None, b"\xff")]),
    ("a2", "ta", "error", 2.0, [("X", b"{}")]),  # finished before a1: sealed first
    ("a3", "ta", "running", None, [("Y", b"[1]"), ("Z", b"[2]")]),
    ("b1", "tb", "cancelled", 4.0, []),
]


async def test_upgrade_computes_the_chains_of_what_was_recorded(db_url: str) -> None:
    engine = create_async_engine(db_url)
    position = 0
    try:
        await upgrade(engine, "0002")
        async with engine.begin() as conn:
            for thread in ("ta", "tb"):
                await conn.execute(
                    text(
                        "INSERT INTO threads (thread_id, created_at, updated_at, run_count) "
                        "VALUES (:t, 1, 1, 1)"
                    ),
                    {"t": thread},
                )
            for run, thread, status, finished, events in RUNS:
                await conn.execute(
                    text(
                        "INSERT INTO runs (run_id, thread_id, status, created_at, finished_at, "
                        "event_count) VALUES (:r, :t, :s, 1, :f, :n)"
                    ),
                    {"r": run, "t": thread, "s": status, "f": finished, "n": len(events)},
                )
                for seq, (kind, payload) in enumerate(events):
                    position += 1
                    await conn.execute(
                        text(
                            "INSERT INTO events (position, thread_id, run_id, seq, type, payload,"
                            " recorded_at, origin) VALUES (:p, :t, :r, :s, :k, :d, 1, 'upstream')"
                        ),
                        {"p": position, "t": thread, "r": run, "s": seq, "k": kind, "d": payload},
                    )
        await upgrade(engine)
    finally:
        await engine.dispose()
    store = await open_store(db_url)
    try:
        report = await store.verify_chains()
        assert report.ok, report.problems
        assert (report.threads, report.runs, report.events) == (2, 4, 5)
        heads = await store.heads()
        a1 = chain.event_links(chain.run_genesis("ta", "a1"), 0, RUNS[0][4])[-1]
        a2 = chain.event_links(chain.run_genesis("ta", "a2"), 0, RUNS[1][4])[-1]
        assert heads.threads["ta"] == (chain.thread_head("ta", [("a2", a2), ("a1", a1)]), 2)
        assert heads.threads["tb"][1] == 1
        a3 = chain.event_links(chain.run_genesis("ta", "a3"), 0, RUNS[2][4])[-1]
        assert heads.running == {"a3": ("ta", 1, a3)}
        # The running run goes on from its migrated chain.
        await store.append("a3", [NewEvent(b"{}", "W")])
        await store.set_status("a3", "finished")
        assert (await store.verify_chains()).ok
        with pytest.raises(Exception, match="append-only"):
            await raw_sql(store, "DELETE FROM events WHERE run_id = 'a1'")
        await store.purge(PurgeSelection(thread_ids=("tb",)), actor="cli", reason=None)
        assert (await store.verify_chains()).threads == 1
    finally:
        await store.close()
