"""PostgreSQL (asyncpg): a table lock orders appends, COPY writes them, NOTIFY wakes tails."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import asyncpg
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from recorder.errors import StoreError, StoreUnavailable
from recorder.store.errors import translate_common
from recorder.store.sql import EventRow
from recorder.wire.events import RecordedEvent

CHANNEL = "recorder_events"
_COLUMNS = ["position", "thread_id", "run_id", "seq", "type", "payload", "recorded_at", "origin"]
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM events WHERE run_id = $1 AND seq > $2"


class PostgresDialect:
    name = "postgresql"

    def __init__(self) -> None:
        self._listener: asyncpg.Connection | None = None
        self._dsn = ""

    def create_engine(self, url: str) -> AsyncEngine:
        self._dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        return create_async_engine(url, pool_size=10, max_overflow=40, pool_pre_ping=True)

    def translate(self, exc: BaseException) -> StoreError | None:
        cause = getattr(exc, "orig", None) or exc
        if isinstance(
            cause,
            (
                asyncpg.InvalidCatalogNameError,
                asyncpg.InvalidAuthorizationSpecificationError,
                asyncpg.CannotConnectNowError,
                asyncpg.ConnectionDoesNotExistError,
            ),
        ):
            return StoreUnavailable(f"PostgreSQL unavailable: {cause}")
        return translate_common(exc)

    @asynccontextmanager
    async def write_transaction(
        self, engine: AsyncEngine, *, append: bool = False
    ) -> AsyncIterator[AsyncConnection]:
        async with engine.begin() as conn:
            if not append:
                yield conn
                return
            # Positions must increase in commit order, or a reader tailing "position > N"
            # could pass over a row whose transaction commits late (it took N+1 but became
            # visible after N+2 was read). A sequence cannot promise that; holding this lock
            # from taking positions until commit does. EXCLUSIVE mode blocks only other
            # writers: readers (ACCESS SHARE) go on, and group commit keeps writers few.
            await conn.exec_driver_sql("LOCK TABLE events IN EXCLUSIVE MODE")
            yield conn

    async def insert_events(self, conn: AsyncConnection, rows: list[EventRow]) -> None:
        driver = await _driver(conn)
        await driver.copy_records_to_table("events", records=rows, columns=_COLUMNS)

    async def fetch(self, conn: AsyncConnection, sql: str, *params: Any) -> list[Any]:
        driver = await _driver(conn)
        rows: list[Any] = await driver.fetch(_numbered(sql), *params)
        return rows

    async def fetch_events(
        self, conn: AsyncConnection, run_id: str, gt: int, lte: int | None, limit: int | None
    ) -> list[RecordedEvent]:
        sql = _SELECT
        params: list[Any] = [run_id, gt]
        if lte is not None:
            params.append(lte)
            sql += f" AND seq <= ${len(params)}"
        sql += " ORDER BY seq"
        if limit is not None:
            params.append(limit)
            sql += f" LIMIT ${len(params)}"
        driver = await _driver(conn)
        rows: list[Any] = await driver.fetch(sql, *params, record_class=_EventRecord)
        # The records quack like RecordedEvent (fields by name and by index, iteration):
        # building them in asyncpg's C code rather than copying each into a tuple halves
        # the cost of reading a long run.
        return cast(list[RecordedEvent], rows)

    async def notify(self, conn: AsyncConnection) -> None:
        # Delivered by PostgreSQL at commit, to every recorder process listening.
        await conn.exec_driver_sql(f"NOTIFY {CHANNEL}")

    async def listen(self, engine: AsyncEngine, wake: asyncio.Event) -> None:
        try:
            self._listener = await asyncpg.connect(self._dsn)
            await self._listener.add_listener(CHANNEL, lambda *_: wake.set())
        except (OSError, asyncpg.PostgresError):
            self._listener = None  # readers fall back to polling

    async def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await self._listener.close()
            self._listener = None


def _numbered(sql: str) -> str:
    """``?`` placeholders as asyncpg's ``$1, $2, ...`` (our statements have no literal ``?``)."""
    parts = sql.split("?")
    return "".join(p + (f"${i}" if i < len(parts) else "") for i, p in enumerate(parts, 1))


class _EventRecord(asyncpg.Record):
    """A row of ``_SELECT`` with RecordedEvent's field names."""

    position = property(lambda self: self[0])
    thread_id = property(lambda self: self[1])
    run_id = property(lambda self: self[2])
    seq = property(lambda self: self[3])
    type = property(lambda self: self[4])
    payload = property(lambda self: self[5])
    recorded_at = property(lambda self: self[6])
    origin = property(lambda self: self[7])


async def _driver(conn: AsyncConnection) -> Any:
    raw = await conn.get_raw_connection()
    return raw.driver_connection
