"""SQLite (aiosqlite): WAL, explicit transactions, one writer at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from recorder.errors import StoreError, StoreUnavailable
from recorder.events import RecordedEvent
from recorder.store.errors import translate_common
from recorder.store.sql import EventRow

_COLUMNS = "position, thread_id, run_id, seq, type, payload, recorded_at, origin"
_INSERT = f"INSERT INTO events ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
_SELECT = f"SELECT {_COLUMNS} FROM events WHERE run_id = ? AND seq > ?"


class SQLiteDialect:
    name = "sqlite"

    def __init__(self) -> None:
        # SQLite has one writer at a time; queueing writers here (instead of letting them
        # spin on the file lock) keeps group commits short and fair inside one process.
        # Other processes on the same file still wait on the lock (busy_timeout).
        self._write_lock = asyncio.Lock()

    def create_engine(self, url: str) -> AsyncEngine:
        database = make_url(url).database
        if database and database != ":memory:":
            from pathlib import Path

            parent = Path(database).expanduser().resolve().parent
            if not parent.is_dir():
                raise StoreUnavailable(
                    f"cannot open SQLite database {database!r}: {parent} does not exist"
                )
        engine = create_async_engine(url)
        event.listen(engine.sync_engine, "connect", _on_connect)
        event.listen(engine.sync_engine, "begin", _on_begin)
        return engine

    def translate(self, exc: BaseException) -> StoreError | None:
        if isinstance(exc, sa_exc.OperationalError) and "unable to open" in str(exc):
            return StoreUnavailable(f"cannot open SQLite database: {exc.orig}")
        return translate_common(exc)

    @asynccontextmanager
    async def write_transaction(
        self, engine: AsyncEngine, *, append: bool = False
    ) -> AsyncIterator[AsyncConnection]:
        # Every write takes the write lock up front (BEGIN IMMEDIATE): a deferred transaction
        # that reads first and writes later can fail at once with SQLITE_BUSY instead of
        # waiting for the lock, which under load turns into lost appends.
        async with self._write_lock, engine.connect() as conn:
            conn = await conn.execution_options(sqlite_begin="BEGIN IMMEDIATE")
            async with conn.begin():
                yield conn

    async def insert_events(self, conn: AsyncConnection, rows: list[EventRow]) -> None:
        driver = await _driver(conn)
        await driver.executemany(_INSERT, rows)

    async def fetch(self, conn: AsyncConnection, sql: str, *params: Any) -> list[Any]:
        driver = await _driver(conn)
        return list(await driver.execute_fetchall(sql, params))

    async def fetch_events(
        self, conn: AsyncConnection, run_id: str, gt: int, lte: int | None, limit: int | None
    ) -> list[RecordedEvent]:
        sql = _SELECT
        params: list[Any] = [run_id, gt]
        if lte is not None:
            sql += " AND seq <= ?"
            params.append(lte)
        sql += " ORDER BY seq"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        driver = await _driver(conn)
        async with driver.execute(sql, params) as cursor:
            make = RecordedEvent._make
            return [make(row) for row in await cursor.fetchall()]

    async def notify(self, conn: AsyncConnection) -> None:
        """Nothing to send: other processes on the file notice by polling."""

    async def listen(self, engine: AsyncEngine, wake: asyncio.Event) -> None:
        """No cross-process notifications in SQLite; readers poll (``EventStore.wait``)."""

    async def stop(self) -> None:
        return None


async def _driver(conn: AsyncConnection) -> Any:
    raw = await conn.get_raw_connection()
    return raw.driver_connection


def _on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Take transaction control from the sqlite3 module so BEGIN IMMEDIATE can be issued.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    for pragma in (
        "journal_mode=WAL",
        "synchronous=NORMAL",
        "foreign_keys=ON",
        "busy_timeout=30000",
    ):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _on_begin(conn: Any) -> None:
    conn.exec_driver_sql(conn.get_execution_options().get("sqlite_begin", "BEGIN"))
