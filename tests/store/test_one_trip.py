"""PostgreSQL's one-call writes (migration 0008_one_trip, ``recorder.store.calls``): a run
created and a batch appended in one round trip each, and the statements' way wherever a
call cannot be trusted to do the same (a head another writer moved, a database migrated
only so far). What the log holds is the same either way: the spec (``tests/store/spec``)
runs every method on PostgreSQL through these calls."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from functools import partial
from typing import Any

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from recorder.errors import Conflict, RunClosed
from recorder.store import Closing, EventStore, NewEvent, NewRun, calls, chain, open_store
from recorder.store.migrations import upgrade
from recorder.store.sql import SqlStore
from recorder.store.writes import Head, Kept
from tests.conftest import raw_sql

pytestmark = pytest.mark.postgres


@pytest.fixture
async def store(pg_url: str) -> AsyncIterator[EventStore]:
    opened = await open_store(pg_url, migrate=True)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The statements sent to PostgreSQL, one per round trip."""
    sent: list[str] = []
    for name in ("execute", "fetch"):
        original = getattr(asyncpg.Connection, name)

        def counted(self: Any, query: str, *args: Any, _original: Any = original, **kw: Any) -> Any:
            sent.append(query)
            return _original(self, query, *args, **kw)

        monkeypatch.setattr(asyncpg.Connection, name, counted)
    yield sent


async def sql(url: str, query: str, *args: Any) -> list[Any]:
    """One transaction on its own connection, as another client of the database."""
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://", 1))
    try:
        async with conn.transaction():
            rows: list[Any] = await conn.fetch(query, *args)
            return rows
    finally:
        await conn.close()


def events(*payloads: bytes) -> list[NewEvent]:
    return [NewEvent(p, "CUSTOM") for p in payloads]


async def chained(store: EventStore, run_id: str) -> None:
    """Each stored hash is the link from the one before it (the run's chain is whole)."""
    report = await store.verify_chains(run_ids=[run_id])
    assert report.problems == []


async def test_a_run_and_each_append_take_one_round_trip(
    store: EventStore, trips: list[str]
) -> None:
    await store.create_run(
        NewRun("r1", "t1", agent="a", input=b'{"messages":[]}', infer_parent=True)
    )
    assert len(trips) == 1 and "recorder_create_run" in trips[0]
    trips.clear()
    first = await store.append("r1", events(b'{"a":1}', b'{"a":2}'))
    second = await store.append("r1", events(b'{"a":3}'))
    assert len(trips) == 2 and all("recorder_append" in sql for sql in trips)
    assert [a.seq for a in first + second] == [0, 1, 2]
    positions = [a.position for a in first + second]
    assert positions == list(range(positions[0], positions[0] + 3))
    stored = await store.read_events("r1")
    assert [(e.seq, e.position, e.payload) for e in stored] == [
        (0, positions[0], b'{"a":1}'),
        (1, positions[1], b'{"a":2}'),
        (2, positions[2], b'{"a":3}'),
    ]
    await store.set_status("r1", "finished")
    await chained(store, "r1")


async def test_runs_of_one_group_commit_go_in_one_call(store: EventStore, trips: list[str]) -> None:
    for run_id in ("g1", "g2"):
        await store.create_run(NewRun(run_id, "tg", infer_parent=True))
    trips.clear()
    results = await store.append_batches(
        [("g1", events(b"1", b"2")), ("g2", events(b"x")), ("g1", events(b"3"))]
    )
    assert len(trips) == 1
    assert [[a.seq for a in batch] for batch in results] == [[0, 1], [0], [2]]
    flat = [a.position for batch in results for a in batch]
    assert flat == list(range(flat[0], flat[0] + 4))
    assert [e.payload for e in await store.read_events("g1")] == [b"1", b"2", b"3"]
    assert (await store.get_run("g2")).parent_run_id == "g1"  # inferred, in the call
    for run_id in ("g1", "g2"):
        await store.set_status(run_id, "finished")
        await chained(store, run_id)


async def test_a_head_another_writer_moved_takes_the_statements(
    store: EventStore, pg_url: str, trips: list[str]
) -> None:
    await store.create_run(NewRun("m1", "tm"))
    await store.append("m1", events(b"1", b"2"))
    other = await open_store(pg_url)
    try:
        await other.append("m1", events(b"3"))  # unknown to this store's heads
    finally:
        await other.close()
    trips.clear()
    appended = await store.append("m1", events(b"4"))
    assert appended[0].seq == 3
    assert len(trips) > 1  # the call wrote nothing; the statements read where the run is
    trips.clear()
    assert (await store.append("m1", events(b"5")))[0].seq == 4
    assert len(trips) == 1  # the head is known again
    assert [e.payload for e in await store.read_events("m1")] == [b"1", b"2", b"3", b"4", b"5"]
    await store.set_status("m1", "finished")
    await chained(store, "m1")


async def test_a_last_hash_changed_elsewhere_is_never_chained_from(
    store: EventStore, pg_url: str
) -> None:
    await store.create_run(NewRun("h1", "th"))
    await store.append("h1", events(b"1", b"2"))
    forged = b"\x07" * 32
    await sql(
        pg_url,
        "WITH s AS (SELECT set_config('recorder.sanctioned', 'rewrite', true)) "
        "UPDATE events SET hash = $1 FROM s WHERE run_id = 'h1' AND seq = 1 RETURNING 1",
        forged,
    )
    await store.append("h1", events(b"3"))
    last = (await store.read_events("h1", gt=1))[0]
    stored = await raw_sql(store, "SELECT hash FROM events WHERE run_id = 'h1' AND seq = 2")
    assert bytes(stored[0][0]) == chain.event_link(forged, 2, last.type, last.payload)


async def test_a_run_closed_elsewhere_takes_nothing_more(store: EventStore, pg_url: str) -> None:
    await store.create_run(NewRun("c1", "tc"))
    await store.append("c1", events(b"1"))
    other = await open_store(pg_url)
    try:
        await other.set_status("c1", "finished")
    finally:
        await other.close()
    with pytest.raises(RunClosed):
        await store.append("c1", events(b"2"))
    assert [e.payload for e in await store.read_events("c1")] == [b"1"]


async def test_a_database_migrated_only_so_far_takes_the_statements(
    pg_url: str, trips: list[str]
) -> None:
    engine = create_async_engine(pg_url)
    try:
        await upgrade(engine, "0007_turns")
    finally:
        await engine.dispose()
    store = await open_store(pg_url)
    try:
        trips.clear()
        await store.create_run(NewRun("o1", "to", input=b"{}", infer_parent=True))
        assert not any("recorder_create_run" in sql for sql in trips)
        assert [a.seq for a in await store.append("o1", events(b"1", b"2"))] == [0, 1]
        assert not any("recorder_append" in sql for sql in trips)
        await store.set_status("o1", "finished")
        await chained(store, "o1")
        await store.migrate()  # the functions come with 0008, and the store uses them
        await store.create_run(NewRun("o2", "to", infer_parent=True))
        assert "recorder_create_run" in trips[-1]
        assert (await store.get_run("o2")).parent_run_id == "o1"
    finally:
        await store.close()


async def test_downgrading_drops_the_functions(pg_url: str) -> None:
    engine = create_async_engine(pg_url)
    try:
        await upgrade(engine)
        found = (
            "SELECT to_regproc('recorder_append')::text, to_regproc('recorder_create_run')::text, "
            "to_regproc('recorder_append_close')::text"
        )
        assert tuple((await sql(pg_url, found))[0]) == (
            "recorder_append",
            "recorder_create_run",
            "recorder_append_close",
        )
        async with engine.begin() as conn:
            from alembic import command

            from recorder.store.migrations import alembic_config

            await conn.run_sync(lambda sync: command.downgrade(alembic_config(sync), "0007_turns"))
        assert tuple((await sql(pg_url, found))[0]) == (None, None, None)
    finally:
        await engine.dispose()


async def test_a_call_sent_again_writes_once(store: EventStore) -> None:
    """A call whose connection broke before its answer came is sent again: it may have
    committed, and the functions know their own work when they meet it again."""
    assert isinstance(store, SqlStore)
    await store.create_run(NewRun("s0", "ts", infer_parent=True))
    run = NewRun("s1", "ts", infer_parent=True, input=b'{"x":1}', created_at=1700000000.0)
    create = partial(calls.create_run, run, Kept(), 1700000001.0)
    first = await store.database.write(create, alone=True)
    again = await store.database.write(create, alone=True)
    assert first is not None and again is not None
    assert (first.parent_run_id, again.parent_run_id) == ("s0", "s0")
    thread = await store.get_thread("ts")
    assert (thread.run_count, thread.latest_run_id) == (2, "s1")
    assert (await store.get_run("s1")).input == b'{"x":1}'

    genesis = chain.run_genesis("ts", "s1")
    heads = {"s1": Head(0, genesis)}
    batches = [("s1", events(b"a", b"b"))]
    append = partial(calls.append_batches, batches, dict(heads))
    done = await store.database.write(append, alone=True)
    resent = await store.database.write(
        partial(calls.append_batches, batches, dict(heads)), alone=True
    )
    assert done == resent and [a.seq for a in done[0]] == [0, 1]
    assert [e.payload for e in await store.read_events("s1")] == [b"a", b"b"]
    assert (await store.get_run("s1")).event_count == 2
    # Another writer's run with the id is still a duplicate, not the call's own.
    with pytest.raises(Conflict):
        await store.create_run(NewRun("s1", "ts", infer_parent=True))


async def test_last_events_and_their_close_take_one_round_trip(
    store: EventStore, trips: list[str]
) -> None:
    await store.create_run(NewRun("e1", "te", infer_parent=True))
    await store.append("e1", events(b"1"))
    trips.clear()
    close = Closing("e1", "finished", "success", summary="said")
    appended = await store.append_batches([("e1", events(b"2", b"3"))], [close])
    assert len(trips) == 1 and "recorder_append_close" in trips[0]
    assert [a.seq for a in appended[0]] == [1, 2]
    run = await store.get_run("e1")
    assert (run.status, run.outcome, run.event_count) == ("finished", "success", 3)
    assert (await store.get_thread("te")).summary == "said"
    assert (await store.verify_chains(["te"])).ok
    with pytest.raises(RunClosed):  # the head it left is forgotten: the run is closed
        await store.append("e1", events(b"4"))


async def test_an_append_and_close_sent_again_writes_once(store: EventStore) -> None:
    assert isinstance(store, SqlStore)
    await store.create_run(NewRun("a1", "ta", infer_parent=True))
    heads = {"a1": Head(0, chain.run_genesis("ta", "a1"))}
    batches = [("a1", events(b"a", b"b"))]
    closes = [Closing("a1", "error", "error", "boom", [{"seq": 1, "message": "m"}], "text")]
    done = await store.database.write(
        partial(calls.append_batches, batches, dict(heads), closes), alone=True
    )
    resent = await store.database.write(
        partial(calls.append_batches, batches, dict(heads), closes), alone=True
    )
    assert done == resent and [a.seq for a in done[0]] == [0, 1]
    run = await store.get_run("a1")
    assert (run.status, run.error, run.event_count) == ("error", "boom", 2)
    assert (await store.heads()).threads["ta"][1] == 1  # sealed once
    assert (await store.verify_chains(["ta"])).ok
