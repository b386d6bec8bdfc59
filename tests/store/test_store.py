"""The backend-agnostic store suite: every test runs on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import random

import pytest
from sqlalchemy import text

from recorder.errors import (
    AppendOnlyViolation,
    ConfigError,
    Conflict,
    RunClosed,
    RunNotFound,
    StoreError,
    StoreUnavailable,
    ThreadNotFound,
)
from recorder.store import EventStore, NewEvent, NewRun, ThreadFilter, open_store
from recorder.store.sql import SqlStore


def ev(payload: bytes | str, kind: str | None = "CUSTOM") -> NewEvent:
    data = payload.encode() if isinstance(payload, str) else payload
    return NewEvent(data, kind)


async def test_create_and_get_run(store: EventStore) -> None:
    posted = b'{"threadId":"t1","runId":"r1","messages":[],  "state":{"b":1,"a":2}}'
    run = await store.create_run(NewRun("r1", "t1", agent="echo", input=posted))
    assert run.status == "running"
    assert run.input == posted
    again = await store.get_run("r1")
    assert again == run
    (listed,) = await store.list_runs("t1", inputs=True)
    assert listed.input == posted
    thread = await store.get_thread("t1")
    assert (thread.run_count, thread.latest_run_id, thread.agent) == (1, "r1", "echo")


async def test_unknown_ids(store: EventStore) -> None:
    with pytest.raises(RunNotFound):
        await store.get_run("nope")
    with pytest.raises(RunNotFound):
        await store.append("nope", [ev("{}")])
    with pytest.raises(RunNotFound):
        await store.set_status("nope", "finished")
    with pytest.raises(ThreadNotFound):
        await store.get_thread("nope")
    with pytest.raises(RunNotFound):
        await store.lineage("nope")


async def test_duplicate_run_id_is_a_conflict(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    with pytest.raises(Conflict, match="already exists"):
        await store.create_run(NewRun("r1", "t2"))
    assert (await store.get_run("r1")).thread_id == "t1"


async def test_seq_is_gap_free_and_positions_increase(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.create_run(NewRun("r2", "t1"))
    first = await store.append("r1", [ev('{"n":0}'), ev('{"n":1}')])
    other = await store.append("r2", [ev('{"n":0}')])
    second = await store.append("r1", [ev('{"n":2}')])
    assert [a.seq for a in first + second] == [0, 1, 2]
    assert other[0].seq == 0
    positions = [a.position for a in first + other + second]
    assert positions == sorted(positions) and len(set(positions)) == 3 + 1 - 1 + 1
    assert (await store.get_run("r1")).event_count == 3


async def test_append_batches_is_atomic(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    with pytest.raises(RunNotFound):
        await store.append_batches([("r1", [ev("{}")]), ("missing", [ev("{}")])])
    assert await store.read_events("r1") == []
    assert (await store.get_run("r1")).event_count == 0


async def test_closed_run_takes_no_events(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev('{"type":"RUN_STARTED"}', "RUN_STARTED")])
    await store.set_status("r1", "finished", outcome="success")
    with pytest.raises(RunClosed):
        await store.append("r1", [ev("{}")])
    run = await store.get_run("r1")
    assert (run.status, run.outcome, run.event_count) == ("finished", "success", 1)
    assert run.finished_at is not None


PAYLOADS = [
    '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"héllo wörld ✓ 🚀 中文"}',
    '{"type":"CUSTOM","value":"tab\\t quote\\" backslash\\\\ nl\\n \\u00e9 \\ud83d\\ude80"}',
    '{"z":1,"a":2,"m":{"y":[3,2,1],"b":null}}',
    '{  "spaced" :  [ 1 ,2 ] ,\t"x":1.50 , "big": 12345678901234567890 }',
    "not json at all \x00\x01",
    "",
]


async def test_payloads_are_byte_exact(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    big = json.dumps({"type": "STATE_SNAPSHOT", "snapshot": {"blob": "é" * (5 * 1024 * 1024 // 2)}})
    raw = [p.encode() for p in PAYLOADS] + [big.encode(), bytes(range(256))]
    await store.append("r1", [NewEvent(p, None) for p in raw])
    back = await store.read_events("r1")
    assert [e.payload for e in back] == raw
    assert len(back[-2].payload) > 5 * 1024 * 1024


async def test_read_ranges(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev(f'{{"n":{i}}}') for i in range(10)])
    assert [e.seq for e in await store.read_events("r1", gt=3, lte=6)] == [4, 5, 6]
    assert [e.seq for e in await store.read_events("r1", gt=7)] == [8, 9]
    assert [e.seq for e in await store.read_events("r1", limit=2)] == [0, 1]
    assert await store.read_events("r1", gt=9) == []
    everything = await store.read_after(0)
    assert [e.seq for e in everything] == list(range(10))
    assert [e.seq for e in await store.read_after(everything[4].position, limit=2)] == [5, 6]
    assert await store.max_position() == everything[-1].position


async def test_read_after_filters_by_thread(store: EventStore) -> None:
    await store.create_run(NewRun("a", "t1"))
    await store.create_run(NewRun("b", "t2"))
    await store.append_batches([("a", [ev("{}")]), ("b", [ev("{}"), ev("{}")])])
    assert {e.run_id for e in await store.read_after(0, thread_id="t2")} == {"b"}


async def test_lineage_follows_parents(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.create_run(NewRun("r2", "t1", parent_run_id="r1", parent_inferred=True))
    await store.create_run(NewRun("r3", "t1", parent_run_id="r2", parent_seq=4))
    chain = await store.lineage("r3")
    assert [r.run_id for r in chain] == ["r1", "r2", "r3"]
    assert chain[1].parent_inferred and not chain[2].parent_inferred
    assert chain[2].parent_seq == 4
    await store.create_run(NewRun("x", "t9", parent_run_id="elsewhere"))
    assert [r.run_id for r in await store.lineage("x")] == ["x"]
    assert [r.run_id for r in await store.list_runs("t1")] == ["r1", "r2", "r3"]
    assert all(r.input is None for r in await store.list_runs("t1"))


async def test_closing_a_run_can_set_its_threads_summary(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.create_run(NewRun("r2", "t2"))
    await store.set_status("r1", "finished", outcome="success", summary="about Paris")
    assert (await store.get_thread("t1")).summary == "about Paris"
    assert (await store.get_thread("t2")).summary is None
    assert (await store.get_run("r1")).status == "finished"
    # One transaction: an unknown run changes no summary either.
    with pytest.raises(RunNotFound):
        await store.set_status("nope", "finished", summary="lost")
    await store.set_status("r2", "error", error="boom")
    assert (await store.get_thread("t2")).summary is None


async def test_list_threads_filters_and_pages(store: EventStore) -> None:
    for i in range(7):
        agent = "even" if i % 2 == 0 else "odd"
        await store.create_run(NewRun(f"r{i}", f"t{i}", agent=agent, created_at=1000.0 + i))
    await store.set_status("r3", "error", error="boom")
    await store.set_summary("t5", "User asked about the Weather in Paris")
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.list_threads(limit=3, cursor=cursor)
        seen += [t.thread_id for t in page.items]
        if page.cursor is None:
            break
        cursor = page.cursor
    assert seen == [f"t{i}" for i in reversed(range(7))]
    odd = await store.list_threads(ThreadFilter(agent="odd"))
    assert [t.thread_id for t in odd.items] == ["t5", "t3", "t1"]
    errored = await store.list_threads(ThreadFilter(status="error"))
    assert [t.thread_id for t in errored.items] == ["t3"]
    assert errored.items[0].latest_status == "error"
    window = await store.list_threads(ThreadFilter(since=1002.0, until=1004.0))
    assert [t.thread_id for t in window.items] == ["t4", "t3", "t2"]
    found = await store.list_threads(ThreadFilter(text="weather in"))
    assert [t.thread_id for t in found.items] == ["t5"]
    assert (await store.list_threads(ThreadFilter(text="100%_"))).items == []


async def test_bad_cursor_is_a_clear_error(store: EventStore) -> None:
    with pytest.raises(Exception, match="invalid cursor"):
        await store.list_threads(cursor="@@not-a-cursor")


async def test_concurrent_appends_to_one_run(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))

    async def writer(w: int) -> None:
        for i in range(10):
            await store.append("r1", [ev(f'{{"w":{w},"i":{i},"k":{k}}}') for k in range(3)])

    await asyncio.gather(*(writer(w) for w in range(8)))
    events = await store.read_events("r1")
    assert [e.seq for e in events] == list(range(8 * 10 * 3))
    assert len({e.payload for e in events}) == 240
    # Each writer's events keep their order inside the run.
    for w in range(8):
        mine = [json.loads(e.payload) for e in events if json.loads(e.payload)["w"] == w]
        assert [(m["i"], m["k"]) for m in mine] == [(i, k) for i in range(10) for k in range(3)]


async def test_tailing_by_position_never_skips_a_late_commit(store: EventStore) -> None:
    runs = [f"r{i}" for i in range(6)]
    for r in runs:
        await store.create_run(NewRun(r, "t1"))
    total = 6 * 25
    rng = random.Random(7)

    async def writer(run_id: str) -> None:
        for i in range(25):
            await store.append(run_id, [ev(f'{{"i":{i}}}')])
            await asyncio.sleep(rng.random() / 500)

    seen: list[int] = []

    async def tail() -> None:
        last = 0
        while len(seen) < total:
            batch = await store.read_after(last)
            for e in batch:
                assert e.position > last
                seen.append(e.position)
                last = e.position
            await asyncio.sleep(0)

    await asyncio.wait_for(asyncio.gather(tail(), *(writer(r) for r in runs)), 60)
    everything = [e.position for e in await store.read_after(0)]
    assert seen == everything
    assert len(seen) == total


async def test_database_rejects_changes_to_events(store: EventStore) -> None:
    assert isinstance(store, SqlStore)
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev('{"original":true}')])
    for sql in ("UPDATE events SET payload = payload", "DELETE FROM events"):
        with pytest.raises(Exception, match="append-only"):
            async with store.engine.begin() as conn:
                await conn.execute(text(sql))
    assert [e.payload for e in await store.read_events("r1")] == [b'{"original":true}']


async def test_append_only_error_is_translated(store: EventStore) -> None:
    assert isinstance(store, SqlStore)
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev("{}")])
    try:
        async with store.engine.begin() as conn:
            await conn.execute(text("DELETE FROM events"))
    except Exception as exc:
        assert isinstance(store._translated(exc), AppendOnlyViolation)
    else:
        raise AssertionError("delete went through")


async def test_running_runs_become_incomplete(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1", owner="dead"))
    await store.create_run(NewRun("r2", "t1", owner="alive"))
    await store.create_run(NewRun("r3", "t1", owner="dead"))
    await store.set_status("r3", "finished")
    assert await store.mark_incomplete(owner="dead") == ["r1"]
    assert (await store.get_run("r1")).status == "incomplete"
    assert (await store.get_run("r2")).status == "running"


async def test_checkpoints_are_found_by_nearest_seq(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.save_checkpoint("r1", 99, b"a")
    await store.save_checkpoint("r1", 199, b"b")
    await store.save_checkpoint("r1", 199, b"b")  # a concurrent reader saving it too
    assert await store.nearest_checkpoint("r1", 50) is None
    assert await store.nearest_checkpoint("r1", 150) == (99, b"a")
    assert await store.nearest_checkpoint("r1", 500) == (199, b"b")


async def test_unknown_status_is_rejected(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    with pytest.raises(Exception, match="unknown run status"):
        await store.set_status("r1", "done")


async def test_unsupported_url() -> None:
    with pytest.raises(ConfigError, match="unsupported database URL"):
        await open_store("mysql://x/y")


async def test_unreachable_postgres_is_a_clear_error() -> None:
    with pytest.raises(StoreUnavailable):
        await open_store("postgresql+asyncpg://postgres@127.0.0.1:1/nothing")


async def test_missing_sqlite_directory_is_a_clear_error(tmp_path: object) -> None:
    with pytest.raises(StoreUnavailable, match="does not exist"):
        await open_store("sqlite+aiosqlite:////nonexistent-dir-xyz/recorder.db")


def test_store_errors_share_one_root() -> None:
    assert issubclass(AppendOnlyViolation, StoreError)
    assert issubclass(StoreUnavailable, StoreError)


async def test_parent_inferred_inside_the_creating_transaction(store: EventStore) -> None:
    first = await store.create_run(NewRun("r1", "t1", infer_parent=True))
    assert (first.parent_run_id, first.parent_inferred) == (None, False)
    second = await store.create_run(NewRun("r2", "t1", infer_parent=True))
    assert (second.parent_run_id, second.parent_inferred) == ("r1", True)
    given = await store.create_run(NewRun("r3", "t1", parent_run_id="r1", infer_parent=True))
    assert (given.parent_run_id, given.parent_inferred) == ("r1", False)
    assert await store.get_run("r2") == second
    # Concurrent posts on one thread each get a distinct, earlier parent: a chain.
    await asyncio.gather(
        *(store.create_run(NewRun(f"c{i}", "t2", infer_parent=True)) for i in range(6))
    )
    parents = [(await store.get_run(f"c{i}")).parent_run_id for i in range(6)]
    assert parents.count(None) == 1 and len({p for p in parents if p}) == 5


async def test_sqlite_writes_wait_for_another_process_holding_the_lock(sqlite_url: str) -> None:
    # Small transactions run on the event loop with busy_timeout 0; when another process
    # holds the write lock they must wait for it on the writer thread, not fail.
    import sqlite3

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
    from pathlib import Path

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
