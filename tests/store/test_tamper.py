"""Tampering as an attacker with the database in hand would: every change is found.

The append-only triggers stop the application, not someone who can drop them; the hash
chains are what make such changes evident (``EventStore.verify_chains``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg
import pytest

from recorder.errors import AppendOnlyViolation
from recorder.store import EventStore, NewRun, open_store
from tests.conftest import raw_sql
from tests.store.spec.conftest import ev


async def _record(store: EventStore) -> None:
    for thread, run in (("t1", "r1"), ("t1", "r2"), ("t2", "r3")):
        await store.create_run(NewRun(run, thread))
        await store.append(
            run, [ev(f'{{"n":{i},"run":"{run}","secret":"s{run}{i}"}}') for i in range(4)]
        )
        await store.set_status(run, "finished")
    assert (await store.verify_chains()).ok


async def _drop_triggers(store: EventStore) -> None:
    if store.url.startswith("sqlite"):
        await raw_sql(store, "DROP TRIGGER events_no_update")
        await raw_sql(store, "DROP TRIGGER events_no_delete")
    else:
        await raw_sql(store, "DROP TRIGGER events_append_only ON events")


async def test_a_raw_update_or_delete_is_refused(store: EventStore) -> None:
    await _record(store)
    with pytest.raises(Exception) as refused:
        await raw_sql(store, "UPDATE events SET payload = ? WHERE run_id = 'r1'", b"{}")
    assert "append-only" in str(refused.value)
    with pytest.raises(Exception) as refused:
        await raw_sql(store, "DELETE FROM events WHERE run_id = 'r1'")
    assert "append-only" in str(refused.value)
    with pytest.raises(AppendOnlyViolation):  # through the store's own error boundary
        await _through_store(store, "DELETE FROM events")
    assert len(await store.read_events("r1")) == 4


async def _through_store(store: EventStore, sql: str) -> None:
    from recorder.store.errors import store_errors
    from recorder.store.sql import SqlStore

    assert isinstance(store, SqlStore)
    with store_errors(store.database.classify):
        await raw_sql(store, sql)


async def test_an_updated_payload_is_found(store: EventStore) -> None:
    await _record(store)
    await _drop_triggers(store)
    await raw_sql(
        store, "UPDATE events SET payload = ? WHERE run_id = 'r2' AND seq = 2", b'{"n":2}'
    )
    report = await store.verify_chains()
    assert [(p.thread_id, p.run_id, p.seq) for p in report.problems] == [("t1", "r2", 2)]
    assert "hash" in report.problems[0].what


async def test_a_deleted_and_renumbered_event_is_found(store: EventStore) -> None:
    await _record(store)
    await _drop_triggers(store)
    await raw_sql(store, "DELETE FROM events WHERE run_id = 'r3' AND seq = 1")
    await raw_sql(store, "UPDATE events SET seq = seq - 1 WHERE run_id = 'r3' AND seq > 1")
    await raw_sql(store, "UPDATE runs SET event_count = 3 WHERE run_id = 'r3'")
    report = await store.verify_chains(["t2"])
    assert [(p.run_id, p.seq) for p in report.problems] == [("r3", 1)]


async def test_a_deleted_last_event_is_found(store: EventStore) -> None:
    await _record(store)
    await _drop_triggers(store)
    await raw_sql(store, "DELETE FROM events WHERE run_id = 'r3' AND seq = 3")
    await raw_sql(store, "UPDATE runs SET event_count = 3 WHERE run_id = 'r3'")
    report = await store.verify_chains(run_ids=["r3"])
    assert [(p.run_id, p.seq) for p in report.problems] == [("r3", None)]
    assert "run head" in report.problems[0].what


async def test_two_runs_with_their_events_swapped_are_found(store: EventStore) -> None:
    await _record(store)
    await _drop_triggers(store)
    # r1 (thread t1) and r3 (thread t2) trade all their events, hashes included.
    await raw_sql(store, "UPDATE events SET seq = seq + 100 WHERE run_id = 'r1'")
    await raw_sql(store, "UPDATE events SET run_id = 'r1', thread_id = 't1' WHERE run_id = 'r3'")
    await raw_sql(
        store,
        "UPDATE events SET run_id = 'r3', thread_id = 't2', seq = seq - 100 "
        "WHERE run_id = 'r1' AND seq >= 100",
    )
    report = await store.verify_chains()
    assert [(p.thread_id, p.run_id, p.seq) for p in report.problems] == [
        ("t1", "r1", 0),
        ("t2", "r3", 0),
    ]


async def test_a_removed_run_breaks_its_thread_s_chain(store: EventStore) -> None:
    await _record(store)
    await _drop_triggers(store)
    await raw_sql(store, "DELETE FROM events WHERE run_id = 'r2'")
    await raw_sql(store, "DELETE FROM runs WHERE run_id = 'r2'")
    report = await store.verify_chains(["t1"])
    assert [(p.thread_id, p.run_id) for p in report.problems] == [("t1", None)]


async def test_bytes_edited_in_the_sqlite_file_are_found(tmp_path: Path) -> None:
    path = tmp_path / "recorder.db"
    url = f"sqlite+aiosqlite:///{path}"
    store = await open_store(url, migrate=True)
    try:
        await _record(store)
    finally:
        await store.close()  # the last connection to close checkpoints the WAL into the file
    data = path.read_bytes()
    assert data.count(b'"secret":"sr12"') == 1
    path.write_bytes(data.replace(b'"secret":"sr12"', b'"secret":"XXXX"'))
    store = await open_store(url)
    try:
        report = await store.verify_chains()
    finally:
        await store.close()
    assert [(p.thread_id, p.run_id, p.seq) for p in report.problems] == [("t1", "r1", 2)]


async def test_a_sanction_left_committed_is_found(store: EventStore) -> None:
    await _record(store)
    await raw_sql(store, "INSERT INTO sanctioned (kind) VALUES ('purge')")
    report = await store.verify_chains(["t2"])
    assert [p.what for p in report.problems] == [
        "a sanction (purge) was committed: the append-only triggers are open"
    ]


async def _without_foreign_keys(url: str, *statements: str) -> None:
    """Run ``statements`` as someone with the database in hand who turns the foreign keys
    (and, on PostgreSQL, every trigger) off for their session."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.split("///", 1)[1])  # foreign keys off by default
        try:
            for statement in statements:
                conn.execute(statement)
            conn.commit()
        finally:
            conn.close()
        return
    pg = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://", 1))
    try:
        await pg.execute("SET session_replication_role = replica")
        for statement in statements:
            await pg.execute(statement)
    finally:
        await pg.close()


async def test_runs_and_events_whose_rows_above_were_removed_are_found(
    store: EventStore, db_url: str
) -> None:
    await _record(store)
    await _drop_triggers(store)
    await raw_sql(
        store, "UPDATE events SET payload = ? WHERE run_id = 'r1' AND seq = 2", b'{"n":2}'
    )
    await _without_foreign_keys(
        db_url,
        "DELETE FROM threads WHERE thread_id = 't1'",
        "DELETE FROM runs WHERE run_id = 'r3'",
    )
    report = await store.verify_chains()
    assert [(p.thread_id, p.run_id, p.seq) for p in report.problems] == [
        ("t2", None, None),  # its chain covers a run it no longer has
        ("t1", None, None),
        ("t1", "r1", 2),
        ("t2", "r3", None),
    ]
    assert report.problems[1].what.startswith("runs of this thread have no thread row")
    assert report.problems[3].what == "4 events of a run that has no row (it was removed)"
    assert (report.runs, report.events) == (2, 12)


async def test_a_payload_edited_into_text_is_found_not_a_failure(tmp_path: Path) -> None:
    """SQLite keeps any value in any column: a payload edited with ``replace()`` comes
    back as text. It is a problem found at its seq, not an error of the verification."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'recorder.db'}"
    store = await open_store(url, migrate=True)
    try:
        await _record(store)
        await _drop_triggers(store)
        await raw_sql(
            store,
            "UPDATE events SET payload = replace(CAST(payload AS TEXT), 'sr11', 'XXXX') "
            "WHERE run_id = 'r1' AND seq = 1",
        )
        report = await store.verify_chains()
    finally:
        await store.close()
    assert [(p.thread_id, p.run_id, p.seq) for p in report.problems] == [("t1", "r1", 1)]
    assert report.problems[0].what == (
        "the event's payload is stored as text, which the log never writes"
    )
