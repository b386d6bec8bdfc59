"""The event store against its raw driver: appending batches, and reading a run back.

Append: ``EventStore.append`` of batches of mixed events, against the raw driver inserting
the same rows into an identical table (the project's own migrations create both) in a
separate SQLite file with the same pragmas, or a separate fresh PostgreSQL database:
aiosqlite ``executemany`` + commit, asyncpg ``copy_records_to_table`` in a transaction.

Read: ``EventStore.read_events`` of a whole run, against the raw driver's fetch of the same
rows with the same query, from the same database.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import aiosqlite
import asyncpg
import orjson

from bench.context import Context, store_url
from bench.report import Row, at_least
from bench.workload import mixed_events
from recorder.store import EventStore, NewEvent, NewRun, open_store

COLUMNS = ["position", "thread_id", "run_id", "seq", "type", "payload", "recorded_at", "origin"]
_SQLITE_INSERT = f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * 8)})"
_SQLITE_SELECT = (
    f"SELECT {', '.join(COLUMNS)} FROM events WHERE run_id = ? AND seq > ? ORDER BY seq"
)
_PG_SELECT = f"SELECT {', '.join(COLUMNS)} FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq"
# The store's own connection settings (recorder/store/sqlite_writer.py).
SQLITE_PRAGMAS = (
    "journal_mode=WAL",
    "synchronous=NORMAL",
    "foreign_keys=ON",
    "busy_timeout=30000",
    "secure_delete=ON",
)


class Raw(Protocol):
    async def insert(self, rows: list[tuple[Any, ...]]) -> None: ...
    async def fetch(self, run_id: str) -> list[Any]: ...
    async def close(self) -> None: ...


class RawSQLite:
    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn

    @classmethod
    async def open(cls, path: str) -> RawSQLite:
        conn = await aiosqlite.connect(path)
        for pragma in SQLITE_PRAGMAS:
            await conn.execute(f"PRAGMA {pragma}")
        return cls(conn)

    async def insert(self, rows: list[tuple[Any, ...]]) -> None:
        await self.conn.executemany(_SQLITE_INSERT, rows)
        await self.conn.commit()

    async def fetch(self, run_id: str) -> list[Any]:
        async with self.conn.execute(_SQLITE_SELECT, (run_id, -1)) as cursor:
            return list(await cursor.fetchall())

    async def close(self) -> None:
        await self.conn.close()


class RawPostgres:
    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn

    @classmethod
    async def open(cls, dsn: str) -> RawPostgres:
        return cls(await asyncpg.connect(dsn))

    async def insert(self, rows: list[tuple[Any, ...]]) -> None:
        async with self.conn.transaction():
            await self.conn.copy_records_to_table("events", records=rows, columns=COLUMNS)

    async def fetch(self, run_id: str) -> list[Any]:
        return list(await self.conn.fetch(_PG_SELECT, run_id, -1))

    async def close(self) -> None:
        await self.conn.close()


def typed(frames: list[bytes]) -> list[NewEvent]:
    """Frames as the proxy hands them to the store: payload bytes and their type."""
    return [NewEvent(f, orjson.loads(f)["type"]) for f in frames]


class Target:
    """One database for the store and one (or the same) for the raw driver."""

    def __init__(self, kind: str, store: EventStore, raw: Raw, raw_location: str) -> None:
        self.kind = kind
        self.store = store
        self.raw = raw
        self.raw_location = raw_location
        self.runs = 0
        self.position = 0

    async def new_run(self) -> str:
        self.runs += 1
        run_id = f"bench-{self.runs}"
        await self.store.create_run(NewRun(run_id, "bench-thread", agent="bench"))
        return run_id

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.raw.close()
        await self.store.close()


async def _migrated(url: str, run_id: str | None = None) -> EventStore:
    store = await open_store(url, migrate=True)
    if run_id is not None:
        await store.create_run(NewRun(run_id, "raw-thread", agent="bench"))
    return store


async def open_target(ctx: Context, kind: str, *, same_database: bool) -> Target:
    """The store on a fresh database; the raw driver on another fresh one (or the same)."""
    if kind == "sqlite":
        stamp = time.time_ns()
        ours = str(ctx.workdir / f"store-{stamp}.db")
        theirs = ours if same_database else str(ctx.workdir / f"raw-{stamp}.db")
        store = await _migrated(store_url(ours))
        if not same_database:
            await (await _migrated(store_url(theirs), "raw-run")).close()
        return Target(kind, store, await RawSQLite.open(theirs), theirs)
    ours = await ctx.pg.create("store")
    theirs = ours if same_database else await ctx.pg.create("raw")
    store = await _migrated(store_url(ours))
    if not same_database:
        await (await _migrated(store_url(theirs), "raw-run")).close()
    return Target(kind, store, await RawPostgres.open(theirs), theirs)


def raw_rows(target: Target, events: list[NewEvent], first_seq: int) -> list[tuple[Any, ...]]:
    now = time.time()
    rows = []
    for offset, event in enumerate(events):
        target.position += 1
        rows.append(
            (
                target.position,
                "raw-thread",
                "raw-run",
                first_seq + offset,
                event.type,
                event.payload,
                now,
                event.origin,
            )
        )
    return rows


async def timed(work: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await work()
    return time.perf_counter() - started


async def append_rounds(ctx: Context, target: Target) -> tuple[list[float], list[float]]:
    plan = ctx.plan
    size = plan.batch_size
    events = typed(mixed_events(plan.append_batches * size, seed=2))
    batches = [events[i : i + size] for i in range(0, len(events), size)]
    ours: list[float] = []
    base: list[float] = []
    raw_seq = 0
    for round_no in range(plan.rounds + 1):  # round 0 warms both up and is not counted
        run_id = await target.new_run()

        async def through_store(run_id: str = run_id) -> None:
            for batch in batches:
                await target.store.append(run_id, batch)

        async def through_driver() -> None:
            nonlocal raw_seq
            for batch in batches:
                await target.raw.insert(raw_rows(target, batch, raw_seq))
                raw_seq += len(batch)

        store_time = await timed(through_store)
        raw_time = await timed(through_driver)
        if round_no:
            ours.append(len(events) / store_time)
            base.append(len(events) / raw_time)
    return ours, base


async def read_rounds(ctx: Context, target: Target) -> tuple[list[float], list[float]]:
    plan = ctx.plan
    count = plan.read_events
    events = typed(mixed_events(count, seed=3))
    run_id = await target.new_run()
    for i in range(0, count, plan.batch_size):
        await target.store.append(run_id, events[i : i + plan.batch_size])
    got_ours = await target.store.read_events(run_id)
    got_raw = await target.raw.fetch(run_id)
    if len(got_ours) != count or len(got_raw) != count:
        raise RuntimeError(f"read back {len(got_ours)} / {len(got_raw)} events of {count}")
    ours: list[float] = []
    base: list[float] = []
    # This process holds the workload (tens of thousands of tracked objects) that a server
    # would not: frozen, full collections no longer charge its traversal to whichever side
    # happens to trigger one.
    gc.collect()
    gc.freeze()
    for _ in range(plan.rounds):
        store_time = raw_time = 0.0
        for _ in range(plan.read_repeats):
            store_time += await timed(lambda: target.store.read_events(run_id))
            raw_time += await timed(lambda: target.raw.fetch(run_id))
        ours.append(count * plan.read_repeats / store_time)
        base.append(count * plan.read_repeats / raw_time)
    return ours, base


_NAMES = {
    "append": {
        "sqlite": "SQLite EventStore.append vs aiosqlite executemany",
        "postgresql": "PostgreSQL EventStore.append vs asyncpg COPY",
    },
    "read": {
        "sqlite": "SQLite EventStore.read_events vs aiosqlite fetchall",
        "postgresql": "PostgreSQL EventStore.read_events vs asyncpg fetch",
    },
}


async def _measure(ctx: Context, bench: str, kind: str) -> Row:
    minimum = 0.7 if bench == "append" else 0.5
    row = Row(bench, _NAMES[bench][kind], "ev/s", target=f">= {minimum}x", check=at_least(minimum))
    if kind == "postgresql" and not await ctx.pg.available():
        row.skipped = ctx.pg.unavailable or "PostgreSQL unavailable"
        return row
    target = await open_target(ctx, kind, same_database=bench == "read")
    try:
        work = append_rounds if bench == "append" else read_rounds
        row.ours, row.base = await work(ctx, target)
    finally:
        await target.close()
    plan = ctx.plan
    if bench == "append":
        row.note = f"{plan.append_batches} batches of {plan.batch_size} mixed events per round"
    else:
        row.note = f"a {plan.read_events:,}-event run read {plan.read_repeats}x per round"
    return row


async def run_append(ctx: Context) -> list[Row]:
    return [await _measure(ctx, "append", "sqlite"), await _measure(ctx, "append", "postgresql")]


async def run_read(ctx: Context) -> list[Row]:
    return [await _measure(ctx, "read", "sqlite"), await _measure(ctx, "read", "postgresql")]
