"""The errors every store method shares: one boundary, the project's own messages.

Whatever the database raises reaches callers as one of the project's errors, with a
message of the project's own (messages end up in HTTP bodies and clients' streams) and
the driver's error chained as its cause.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from recorder.errors import (
    AppendOnlyViolation,
    Conflict,
    InputError,
    NotMigrated,
    RunNotFound,
    StoreError,
    StoreUnavailable,
)
from recorder.store import EventStore, NewRun, ThreadFilter, open_store
from recorder.store.errors import store_errors
from recorder.store.postgres import PostgresDatabase
from recorder.store.sql import SqlStore
from tests.conftest import PG_ADMIN, drop_pg_database, raw_sql
from tests.store.spec.conftest import ev

DRIVER_ERRORS = (sqlite3.Error, asyncpg.PostgresError)

# A column every method's statements name: renamed, each of them fails in the database.
RENAMED = [
    ("threads", "thread_id"),
    ("runs", "run_id"),
    ("events", "position"),
    ("checkpoints", "seq"),
]
CALLS: dict[str, Callable[[EventStore], Awaitable[Any]]] = {
    "create_run": lambda s: s.create_run(NewRun("new", "t1")),
    "append": lambda s: s.append("r1", [ev("{}")]),
    "append_batches": lambda s: s.append_batches([("r1", [ev("{}")])]),
    "set_status": lambda s: s.set_status("r1", "finished", summary="x"),
    "set_summary": lambda s: s.set_summary("t1", "x"),
    "heartbeat": lambda s: s.heartbeat(["r1"], "me"),
    "mark_incomplete": lambda s: s.mark_incomplete(),
    "save_checkpoint": lambda s: s.save_checkpoint("r1", 0, b"x"),
    "get_run": lambda s: s.get_run("r1"),
    "read_events": lambda s: s.read_events("r1"),
    "read_after": lambda s: s.read_after(0),
    "max_position": lambda s: s.max_position(),
    "list_runs": lambda s: s.list_runs("t1"),
    "get_thread": lambda s: s.get_thread("t1"),
    "list_threads": lambda s: s.list_threads(ThreadFilter(agent="a", text="x")),
    "lineage": lambda s: s.lineage("r1"),
    "nearest_checkpoint": lambda s: s.nearest_checkpoint("r1", 0),
    "run_checkpoint": lambda s: s.run_checkpoint("r1"),
}


@pytest.mark.parametrize("method", sorted(CALLS))
async def test_every_method_translates_what_the_database_raises(
    store: EventStore, method: str
) -> None:
    await store.create_run(NewRun("r1", "t1"))
    for table, column in RENAMED:
        await raw_sql(store, f"ALTER TABLE {table} RENAME COLUMN {column} TO {column}_gone")
    with pytest.raises(StoreError) as raised:
        await CALLS[method](store)
    assert type(raised.value) is StoreError
    assert str(raised.value) == "the database failed to complete the operation"
    assert isinstance(raised.value.__cause__, DRIVER_ERRORS)
    assert "gone" not in str(raised.value) and "column" not in str(raised.value)


@pytest.mark.parametrize("method", sorted(CALLS))
async def test_every_method_says_when_the_tables_are_missing(
    store: EventStore, method: str
) -> None:
    for table in ("threads", "runs", "run_inputs", "events", "checkpoints"):
        await raw_sql(store, f"ALTER TABLE {table} RENAME TO {table}_gone")
    with pytest.raises(NotMigrated, match=r"^the database has no recorder tables") as raised:
        await CALLS[method](store)
    assert isinstance(raised.value, StoreUnavailable)
    assert isinstance(raised.value.__cause__, DRIVER_ERRORS)


async def test_the_append_only_refusal_is_translated(store: EventStore) -> None:
    assert isinstance(store, SqlStore)
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev("{}")])
    refused = r"^recorded events, posted inputs and what redaction did are append-only$"
    with pytest.raises(AppendOnlyViolation, match=refused) as raised:
        with store_errors(store.database.classify):
            await raw_sql(store, "DELETE FROM events")
    assert isinstance(raised.value, StoreError)
    assert isinstance(raised.value.__cause__, DRIVER_ERRORS)
    assert len(await store.read_events("r1")) == 1


async def test_a_duplicate_keeps_the_drivers_detail_on_its_cause(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    with pytest.raises(Conflict) as raised:
        await store.create_run(NewRun("r1", "t1"))
    assert str(raised.value) == "run 'r1' already exists"
    assert isinstance(
        raised.value.__cause__, (sqlite3.IntegrityError, asyncpg.UniqueViolationError)
    )


async def test_numbers_out_of_range_are_input_errors(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    for call in (
        store.read_events("r1", gt=10**20),
        store.read_events("r1", limit=10**20),
        store.read_after(10**20),
        store.nearest_checkpoint("r1", -(10**20)),
    ):
        with pytest.raises(InputError, match="out of range"):
            await call


async def test_a_nul_in_an_id_looked_up_is_never_a_database_failure(store: EventStore) -> None:
    # PostgreSQL's text cannot hold NUL: there it is a value it cannot take; SQLite simply
    # has no such run.
    if store.url.startswith("postgresql"):
        for call in (store.get_run("r\x001"), store.list_runs("t\x00"), store.read_events("\x00")):
            with pytest.raises(InputError, match="NUL"):
                await call
        return
    with pytest.raises(RunNotFound):
        await store.get_run("r\x001")
    assert await store.list_runs("t\x00") == [] and await store.read_events("\x00") == []


@pytest.mark.postgres
async def test_a_database_gone_is_unavailable(pg_url: str) -> None:
    store = await open_store(pg_url, migrate=True)
    try:
        await store.create_run(NewRun("r1", "t1"))
        await drop_pg_database(pg_url)  # every connection to it is terminated
        for call in (
            lambda: store.get_run("r1"),
            lambda: store.append("r1", [ev("{}")]),
            lambda: store.heartbeat(["r1"], "me"),
            lambda: store.mark_incomplete(),
        ):
            with pytest.raises(StoreUnavailable, match=r"^the database is unavailable$") as raised:
                await call()
            assert isinstance(raised.value.__cause__, (*DRIVER_ERRORS, OSError))
    finally:
        await store.close()


@pytest.mark.postgres
async def test_connections_the_server_dropped_are_replaced_unseen(pg_url: str) -> None:
    # As after a server restart: every pooled connection is gone, and no call may fail
    # for it (a broken connection found at BEGIN, or during a read, is replaced).
    store = await open_store(pg_url, migrate=True)
    try:
        await store.create_run(NewRun("r1", "t1"))
        for round_ in range(3):
            await asyncio.gather(*(store.get_run("r1") for _ in range(4)))  # four pooled
            admin = await asyncpg.connect(PG_ADMIN)
            try:
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1",
                    pg_url.rsplit("/", 1)[1],
                )
            finally:
                await admin.close()
            if round_ == 0:
                assert (await store.get_run("r1")).run_id == "r1"
            elif round_ == 1:
                assert [a.seq for a in await store.append("r1", [ev("{}")])] == [0]
            else:
                await store.heartbeat(["r1"], "me")
                assert [e.seq for e in await store.read_events("r1")] == [0]
    finally:
        await store.close()


@pytest.mark.postgres
async def test_a_deadlock_is_a_conflict(pg_url: str) -> None:
    store = await open_store(pg_url, migrate=True)
    dsn = pg_url.replace("+asyncpg", "")
    first, second = await asyncpg.connect(dsn), await asyncpg.connect(dsn)
    try:
        await store.create_run(NewRun("a", "t1"))
        await store.create_run(NewRun("b", "t1"))
        update = "UPDATE runs SET owner = 'x' WHERE run_id = $1"
        await first.execute("BEGIN")
        await second.execute("BEGIN")
        await first.execute(update, "a")
        await second.execute(update, "b")
        crossed = await asyncio.gather(
            first.execute(update, "b"), second.execute(update, "a"), return_exceptions=True
        )
        (deadlock,) = [e for e in crossed if isinstance(e, BaseException)]
        with pytest.raises(Conflict, match=r"^a concurrent write collided") as raised:
            with store_errors(PostgresDatabase.classify):
                raise deadlock
        assert isinstance(raised.value.__cause__, asyncpg.DeadlockDetectedError)
    finally:
        await first.close()
        await second.close()
        await store.close()
