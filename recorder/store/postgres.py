"""PostgreSQL (asyncpg): a table lock orders appends, arrays carry them, NOTIFY wakes tails.

Bodies run on a pooled asyncpg connection, each statement awaited as the body asks for it
(``drive``). A write transaction costs as few round trips as its statements allow: the
append lock rides with BEGIN and the notification with COMMIT, an append's events go in
one INSERT per block (from three arrays: types, payloads, hashes), and a connection goes back
to the pool without the driver's reset query (the store sets no session state, holds no
advisory locks and never listens on a pooled connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import asyncpg
from asyncpg.pool import PoolConnectionProxy
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from recorder.errors import StoreUnavailable
from recorder.store.deadline import within
from recorder.store.errors import Failure
from recorder.store.migrations import upgrade
from recorder.store.statements import (
    INSERT_COLUMNS,
    AppendLock,
    Body,
    Execute,
    Fetch,
    FetchEvents,
    InsertEvents,
    Notify,
    Sanction,
)

T = TypeVar("T")
_Connection = asyncpg.Connection | PoolConnectionProxy

CHANNEL = "recorder_events"
# Positions must increase in commit order, or a reader tailing "position > N" could pass
# over a row whose transaction commits late (it took N+1 but became visible after N+2 was
# read). A sequence cannot promise that; holding this lock from taking positions until
# commit does. EXCLUSIVE mode blocks only other writers of events: readers (ACCESS SHARE)
# go on, and group commit keeps writers few.
_LOCK_EVENTS = "LOCK TABLE events IN EXCLUSIVE MODE"
_BEGIN_APPEND = f"BEGIN; {_LOCK_EVENTS}"
_COMMIT_NOTIFY = f"NOTIFY {CHANNEL}; COMMIT"
_POOL_SIZE = 50
# Whether the functions of migrations 0008 and 0010 exist (a database migrated only so far
# lacks them).
_FUNCTIONS = (
    "SELECT to_regproc('recorder_append') IS NOT NULL "
    "AND to_regproc('recorder_create_run') IS NOT NULL "
    "AND to_regproc('recorder_append_close') IS NOT NULL"
)
_UNAVAILABLE = (
    asyncpg.InsufficientResourcesError,  # 53: disk full, too many connections
    asyncpg.InvalidCatalogNameError,  # no such database
    asyncpg.InvalidAuthorizationSpecificationError,  # 28: refused to log in
)
_UNUSABLE = (
    asyncpg.DataError,  # class 22: NUL in text, a number out of range, a negative LIMIT, ...
    OverflowError,
    UnicodeEncodeError,
)


class PostgresDatabase:
    dialect = "postgresql"
    append_survives_cancel = False  # a cancelled append is rolled back: group commit waits

    def __init__(self, url: str, pool: asyncpg.Pool, read_deadline: float | None = None) -> None:
        self.url = url
        self._pool = pool
        self._read_deadline = read_deadline  # seconds a read may wait for its answer
        self._listener: asyncpg.Connection | None = None
        self.one_trip = False  # the functions of migration 0008 are there

    @classmethod
    async def open(cls, url: str, read_deadline: float | None = None) -> PostgresDatabase:
        try:
            pool = await asyncpg.create_pool(
                _with_driver(url, "postgresql"), min_size=1, max_size=_POOL_SIZE, reset=_no_reset
            )
        except (
            asyncpg.InvalidCatalogNameError,
            asyncpg.InvalidAuthorizationSpecificationError,
        ) as exc:
            # Said with what it is about (never the password): who starts it can act on it.
            raise StoreUnavailable(f"cannot open PostgreSQL {_where(url)}: {exc}") from exc
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise StoreUnavailable(f"cannot connect to PostgreSQL {_where(url)}: {reason}") from exc
        database = cls(url, pool, read_deadline)
        try:
            await database._find_functions()
        except BaseException:
            await pool.close()
            raise
        return database

    async def _find_functions(self) -> None:
        async with self._pool.acquire() as conn:
            self.one_trip = bool(await conn.fetchval(_FUNCTIONS))

    @staticmethod
    def classify(exc: BaseException) -> Failure | None:
        if isinstance(exc, asyncpg.RaiseError):  # raised only by the append-only triggers
            return Failure.APPEND_ONLY
        if isinstance(exc, asyncpg.UndefinedTableError):
            return Failure.NOT_MIGRATED
        if isinstance(exc, asyncpg.UniqueViolationError):
            return Failure.DUPLICATE
        if isinstance(exc, asyncpg.TransactionRollbackError):
            return Failure.COLLISION
        if isinstance(exc, _UNUSABLE) or isinstance(exc.__cause__, OverflowError):
            return Failure.UNUSABLE_VALUE
        if isinstance(exc, _UNAVAILABLE) or _broken(exc):
            return Failure.UNAVAILABLE
        if isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc):
            return Failure.UNAVAILABLE  # the pool closing
        return None

    async def write(
        self,
        body: Callable[[], Body[T]],
        *,
        events: int = 0,
        size: int = 0,
        alone: bool = False,
        idempotent: bool = False,
    ) -> T:
        if alone:
            # One statement, its own transaction: no BEGIN and COMMIT to send. An idempotent
            # one is sent again, like a read, on another connection when its connection is
            # found broken (a run's close changes nothing but its finish time then); any
            # other may have committed before the connection broke, and is not.
            if idempotent:  # (a write: never let go past a read's deadline, still running)
                return await self._read(body)
            async with self._pool.acquire() as conn:
                return await drive(conn, body(), transaction=False)
        try:
            async with self._pool.acquire() as conn:
                return await drive(conn, body(), transaction=True, first_try=True)
        except _NotBegun:
            await self._pool.expire_connections()
        async with self._pool.acquire() as conn:
            return await drive(conn, body(), transaction=True)

    async def read(
        self, body: Callable[[], Body[T]], *, small: bool = False, patient: bool = False
    ) -> T:
        if self._read_deadline is None or patient:
            return await self._read(body)
        return await within(self._read(body), self._read_deadline)

    async def _read(self, body: Callable[[], Body[T]]) -> T:
        try:
            async with self._pool.acquire() as conn:
                return await drive(conn, body(), transaction=False)
        except Exception as exc:
            if not _broken(exc):
                raise
            await self._pool.expire_connections()
        async with self._pool.acquire() as conn:
            return await drive(conn, body(), transaction=False)

    async def migrate(self) -> None:
        engine = create_async_engine(
            _with_driver(self.url, "postgresql+asyncpg"), poolclass=NullPool
        )
        try:
            await upgrade(engine)
        finally:
            await engine.dispose()
        await self._find_functions()

    async def scrub(self) -> None:
        """Nothing to do here: old row versions go with VACUUM, the WAL with its own
        recycling (the README's erasure section says what that takes)."""

    async def listen(self, wake: asyncio.Event) -> None:
        try:
            self._listener = await asyncpg.connect(_with_driver(self.url, "postgresql"))
            await self._listener.add_listener(CHANNEL, lambda *_: wake.set())
        except (OSError, asyncpg.PostgresError):
            self._listener = None  # readers fall back to polling

    async def close(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(Exception):
                await self._listener.close()
            self._listener = None
        await self._pool.close()


async def drive(
    conn: _Connection, body: Body[T], *, transaction: bool, first_try: bool = False
) -> T:
    """Run ``body`` on ``conn`` (in a transaction of its own if asked); its return value.

    The transaction begins with the body's first statement, so a body that refuses its
    arguments before asking for anything costs no round trip. On a ``first_try``, a
    connection found broken at BEGIN raises ``_NotBegun``: nothing was sent, so the
    transaction can start over on another one.
    """
    began = notify = False
    try:
        statement, params = next(body)
        if transaction:
            locked = type(statement) is AppendLock
            try:
                await conn.execute(_BEGIN_APPEND if locked else "BEGIN")
            except Exception as exc:
                if first_try and _broken(exc):
                    raise _NotBegun from exc
                raise
            began = True
            if locked:
                statement, params = body.send(None)
        while True:
            kind = type(statement)
            if kind is Notify:  # delivered at commit anyway: sent with it
                notify, result = True, None
            else:
                result = await _PERFORM[kind](conn, statement, params)
            statement, params = body.send(result)
    except StopIteration as done:
        if began:
            await conn.execute(_COMMIT_NOTIFY if notify else "COMMIT")
        value: T = done.value
        return value
    except BaseException:
        if began:
            await _roll_back(conn)
        raise
    finally:
        body.close()


class _NotBegun(Exception):
    """The connection was found broken at BEGIN, before the transaction sent anything."""


def _broken(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection is gone (or unusable), not the statement wrong.

    A pooled connection the server dropped (a restart, an administrator) is found out on
    its next use; asyncpg's pool does not test connections before handing them out, and a
    test on every checkout would cost a round trip on every call.
    """
    if isinstance(exc, asyncpg.OperatorInterventionError):  # 57: shutting down, ...
        return not isinstance(exc, asyncpg.QueryCanceledError)
    return isinstance(
        exc,
        (
            OSError,
            TimeoutError,
            asyncpg.PostgresConnectionError,  # class 08
            asyncpg.exceptions.InternalClientError,  # a protocol left mid-way by a drop
        ),
    )


async def _roll_back(conn: _Connection) -> None:
    if conn.is_closed() or not conn.is_in_transaction():
        return
    try:
        await conn.execute("ROLLBACK")
    except Exception:
        conn.terminate()  # the pool replaces it


async def _execute(conn: _Connection, statement: Any, params: Any) -> int:
    status: str = await conn.execute(_numbered(statement.sql), *params)
    return int(status.rsplit(" ", 1)[-1])


async def _fetch(conn: _Connection, statement: Any, params: Any) -> list[Any]:
    sql = _numbered(statement.sql) + (" FOR UPDATE" if statement.lock else "")
    rows: list[Any] = await conn.fetch(sql, *params)
    return rows


async def _fetch_events(conn: _Connection, statement: Any, params: Any) -> list[Any]:
    # The records quack like RecordedEvent (fields by name and by index, iteration):
    # building them in asyncpg's C code rather than copying each into a tuple halves the
    # cost of reading a long run.
    rows: list[Any] = await conn.fetch(_numbered(statement.sql), *params, record_class=_EventRecord)
    return rows


async def _insert_events(conn: _Connection, statement: Any, blocks: Any) -> None:
    # One statement per block, its varying columns as three arrays: a round trip each,
    # where COPY takes two (and an insert per row, many).
    for block in blocks:
        columns = block.columns
        await conn.execute(
            _INSERT_BLOCK,
            *block.shared(),
            columns[0::3],
            columns[1::3],
            columns[2::3],
        )


async def _sanction(conn: _Connection, statement: Any, params: Any) -> None:
    # Transaction-local (set_config's third argument): gone at COMMIT or ROLLBACK, and the
    # triggers read it (``recorder_events_sanctioned``).
    await conn.execute(
        "SELECT set_config('recorder.sanctioned', $1, true)", statement.kind if statement.on else ""
    )


async def _lock_events(conn: _Connection, statement: Any, params: Any) -> None:
    await conn.execute(_LOCK_EVENTS)  # as the first statement, it rides with BEGIN instead


_PERFORM: dict[type, Callable[[_Connection, Any, Any], Any]] = {
    Execute: _execute,
    Fetch: _fetch,
    FetchEvents: _fetch_events,
    InsertEvents: _insert_events,
    AppendLock: _lock_events,
    Sanction: _sanction,
}
_INSERT_BLOCK = (
    f"INSERT INTO events ({', '.join(INSERT_COLUMNS)}) "
    "SELECT $1::bigint + n - 1, $2::text, $3::text, $4::integer + n - 1, t, p, "
    "$5::double precision, $6::text, h "
    "FROM unnest($7::text[], $8::bytea[], $9::bytea[]) WITH ORDINALITY AS e(t, p, h, n)"
)


@functools.lru_cache(maxsize=1024)  # statements built from filters vary, but not endlessly
def _numbered(sql: str) -> str:
    """``?`` placeholders as asyncpg's ``$1, $2, ...`` (no statement has a literal ``?``)."""
    parts = sql.split("?")
    return "".join(p + (f"${i}" if i < len(parts) else "") for i, p in enumerate(parts, 1))


def _with_driver(url: str, driver: str) -> str:
    """``url`` (``postgresql+asyncpg://`` or ``postgres+asyncpg://``) for ``driver``."""
    return make_url(url).set(drivername=driver).render_as_string(hide_password=False)


async def _no_reset(conn: _Connection) -> None:
    """Nothing to reset (asyncpg still rolls back a transaction left open)."""


class _EventRecord(asyncpg.Record):
    """A row of ``EVENT_COLUMNS`` with RecordedEvent's field names."""

    position = property(lambda self: self[0])
    thread_id = property(lambda self: self[1])
    run_id = property(lambda self: self[2])
    seq = property(lambda self: self[3])
    type = property(lambda self: self[4])
    payload = property(lambda self: self[5])
    recorded_at = property(lambda self: self[6])
    origin = property(lambda self: self[7])


def _where(url: str) -> str:
    """The server, user and database a URL names, without its password."""
    parts = make_url(url)
    return f"database {parts.database!r} at {parts.host}:{parts.port or 5432} as {parts.username!r}"
