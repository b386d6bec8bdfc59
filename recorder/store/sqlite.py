"""SQLite: WAL, explicit transactions, one writer at a time.

Reads and the rarer writes go through SQLAlchemy on aiosqlite. The recording path (creating
runs, appending events, closing runs) goes through ``SQLiteWriter`` instead: one plain
``sqlite3`` connection on one thread, a whole transaction per hop. Through aiosqlite every
statement is a hop to its thread and back (tens of microseconds each, with the GIL passed
back and forth); an append is five or six of them, a new run seven.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from recorder.errors import Conflict, RunNotFound, StoreError, StoreUnavailable
from recorder.store.errors import translate_common
from recorder.store.model import Appended, NewEvent, NewRun, Run
from recorder.store.sql import (
    CLAIM,
    CLAIM_THREAD,
    INSERT_THREAD,
    MAX_POSITION,
    SET_SUMMARY,
    SUMMARY_OF_RUN,
    EventRow,
    SqlStore,
    claimed,
    event_rows,
    new_run,
    run_values,
    status_values,
    thread_claim,
)
from recorder.wire.events import RecordedEvent

T = TypeVar("T")
_PRAGMAS = ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON", "busy_timeout=30000")

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
        if isinstance(exc, sqlite3.IntegrityError):  # from the direct write path
            return Conflict(f"conflict: {str(exc).splitlines()[0]}")
        if isinstance(exc, sqlite3.OperationalError) and "unable to open" in str(exc):
            return StoreUnavailable(f"cannot open SQLite database: {exc}")
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
    for pragma in _PRAGMAS:
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def _on_begin(conn: Any) -> None:
    conn.exec_driver_sql(conn.get_execution_options().get("sqlite_begin", "BEGIN"))


def file_path(url: str) -> str | None:
    """The database file behind ``url``; None for in-memory or URI-style databases, which
    a second connection could not share."""
    parsed = make_url(url)
    database = parsed.database
    if not database or database == ":memory:" or parsed.query.get("uri") or "mode=" in database:
        return None
    return str(Path(database).expanduser())


class SQLiteWriter:
    """Write transactions on plain ``sqlite3`` connections; ``run(work)`` is one transaction.

    ``work`` runs between BEGIN IMMEDIATE and COMMIT (ROLLBACK if it raises). The dialect's
    write lock is held meanwhile, so these transactions and the ones that go through
    SQLAlchemy queue in one line instead of spinning on the file lock.

    Where it runs depends on its size. A small transaction (``small=True``: a new run, a
    few events, a status) takes tens of microseconds, less than a hop to a thread and back,
    so it runs right here on the event loop, on a connection that never waits for the file
    lock (busy_timeout 0) and never checkpoints. If another process holds the lock it goes
    to the thread after all. Large ones run on the writer thread, whose connection waits
    for the lock and also checkpoints the WAL that the loop's commits leave behind.
    """

    _CHECKPOINT_EVERY = 100  # small commits between checkpoints (about 1,000 WAL pages)

    def __init__(self, path: str, lock: asyncio.Lock) -> None:
        self._path = path
        self._lock = lock
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="sqlite-writer")
        self._threaded: sqlite3.Connection | None = None
        self._inline: sqlite3.Connection | None = None
        self._since_checkpoint = 0
        self._checkpointing: asyncio.Task[None] | None = None
        self._closing = False
        self._inline_ok = True  # False if the database is not in WAL mode

    async def run(self, work: Callable[[sqlite3.Connection], T], *, small: bool = False) -> T:
        loop = asyncio.get_running_loop()
        async with self._lock:
            conn = self._inline_connection() if small else None
            if conn is not None:
                try:
                    result = _transact(conn, work)
                except sqlite3.OperationalError as exc:
                    if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                        raise
                    # Busy (another process writes; rolled back): the thread waits.
                else:
                    self._since_checkpoint += 1
                    if self._since_checkpoint >= self._CHECKPOINT_EVERY and not self._closing:
                        self._since_checkpoint = 0
                        self._checkpointing = asyncio.create_task(self._checkpoint())
                    return result
            running = loop.run_in_executor(self._executor, self._transaction, work)
            try:
                return await asyncio.shield(running)
            except asyncio.CancelledError:
                # The thread cannot be stopped mid-transaction: keep the lock until it ends.
                with contextlib.suppress(Exception):
                    await running
                raise

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        self._closing = True  # no checkpoint is scheduled from here on
        if self._checkpointing is not None:
            await self._checkpointing
        async with self._lock:
            await loop.run_in_executor(self._executor, self._disconnect)
            self._executor.shutdown(wait=True)
            if self._inline is not None:
                self._inline.close()
                self._inline = None

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return _transact(self._threaded or self._connect_threaded(), work)

    async def _checkpoint(self) -> None:
        # Under the write lock, like SQLite's own autocheckpoint after a commit: with writes
        # going on, a checkpoint never catches up and the WAL is never started over.
        loop = asyncio.get_running_loop()
        async with self._lock:
            await loop.run_in_executor(self._executor, self._checkpoint_now)

    def _checkpoint_now(self) -> None:
        with contextlib.suppress(sqlite3.Error):  # a later one will do what this one could not
            conn = self._threaded or self._connect_threaded()
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _connect_threaded(self) -> sqlite3.Connection:
        self._threaded = _connect(self._path, check_same_thread=False)
        return self._threaded

    def _inline_connection(self) -> sqlite3.Connection | None:
        """The loop's connection, or None when writes must wait on the thread: outside WAL
        mode a commit needs readers gone, and this connection does not wait."""
        if self._inline is None and self._inline_ok:
            conn = _connect(self._path, "busy_timeout=0", "wal_autocheckpoint=0")
            (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
            if str(mode).lower() == "wal":
                self._inline = conn
            else:
                conn.close()
                self._inline_ok = False
        return self._inline

    def _disconnect(self) -> None:
        if self._threaded is not None:
            self._threaded.close()
            self._threaded = None


def _connect(path: str, *pragmas: str, check_same_thread: bool = True) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=check_same_thread)
    for pragma in (*_PRAGMAS, *pragmas):
        conn.execute(f"PRAGMA {pragma}")
    return conn


def _transact(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``work`` in a write transaction on ``conn``; commit, or roll back."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = work(conn)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result


_LATEST_RUN = "SELECT latest_run_id FROM threads WHERE thread_id = ?"
_INSERT_INPUT = "INSERT INTO run_inputs (run_id, input) VALUES (?, ?)"
# What counts as a small transaction, run on the event loop (see SQLiteWriter).
_SMALL_EVENTS = 32
_SMALL_BYTES = 64 * 1024


class SQLiteStore(SqlStore):
    """``SqlStore`` whose recording path runs on ``SQLiteWriter``: same results, same
    errors, one transaction per call and at most one thread hop (none for small ones)."""

    _writer: SQLiteWriter
    # An append is never left half-done by its caller's cancellation: small ones run
    # without yielding, large ones keep the thread's transaction going (GroupCommitter).
    append_survives_cancel = True

    @classmethod
    async def open_file(cls, url: str, path: str) -> SQLiteStore:
        dialect = SQLiteDialect()
        store = await cls.open(url, dialect)
        store._writer = SQLiteWriter(path, dialect._write_lock)
        return store

    async def close(self) -> None:
        await self._writer.close()
        await super().close()

    async def create_run(self, run: NewRun) -> Run:
        now = run.created_at if run.created_at is not None else time.time()
        values = run_values(run, now)

        params = thread_claim(run, now)

        def work(conn: sqlite3.Connection) -> None:
            conn.execute(INSERT_THREAD, params)
            (latest,) = conn.execute(_LATEST_RUN, (run.thread_id,)).fetchone()
            conn.execute(CLAIM_THREAD, params)
            if run.infer_parent and run.parent_run_id is None:
                values["parent_run_id"], values["parent_inferred"] = latest, latest is not None
            columns = ", ".join(values)
            marks = ", ".join("?" * len(values))
            conn.execute(f"INSERT INTO runs ({columns}) VALUES ({marks})", tuple(values.values()))
            if run.input is not None:
                conn.execute(_INSERT_INPUT, (run.run_id, run.input))

        try:
            await self._writer.run(work, small=len(run.input or b"") <= _SMALL_BYTES)
        except Exception as exc:
            raise self._translated(exc, run_id=run.run_id) from exc
        return new_run(values, run.input)

    async def append_batches(
        self, batches: Sequence[tuple[str, Sequence[NewEvent]]]
    ) -> list[list[Appended]]:
        def work(conn: sqlite3.Connection) -> list[list[Appended]]:
            (max_position,) = conn.execute(MAX_POSITION).fetchone()
            now = time.time()
            claims = [
                claimed(
                    run_id, len(events), conn.execute(CLAIM, (len(events), now, run_id)).fetchone()
                )
                for run_id, events in batches
            ]
            rows, results = event_rows(int(max_position or 0), batches, claims, now)
            if rows:
                conn.executemany(_INSERT, rows)
            return results

        small = sum(len(events) for _run, events in batches) <= _SMALL_EVENTS and (
            sum(len(e.payload) for _run, events in batches for e in events) <= _SMALL_BYTES
        )
        try:
            result = await self._writer.run(work, small=small)
        except Exception as exc:
            raise self._translated(exc) from exc
        await self._changed_locally()
        return result

    async def set_status(
        self,
        run_id: str,
        status: str,
        *,
        outcome: str | None = None,
        error: str | None = None,
        violations: list[dict[str, object]] | None = None,
        summary: str | None = None,
    ) -> None:
        values = status_values(status, outcome, error, violations)
        assignments = ", ".join(f"{column} = ?" for column in values)
        sql = f"UPDATE runs SET {assignments} WHERE run_id = ?"

        def work(conn: sqlite3.Connection) -> None:
            if conn.execute(sql, (*values.values(), run_id)).rowcount == 0:
                raise RunNotFound(run_id)
            if summary is not None:
                conn.execute(SUMMARY_OF_RUN, {"summary": summary, "run_id": run_id})

        try:
            await self._writer.run(work, small=True)
        except Exception as exc:
            raise self._translated(exc) from exc
        await self._changed_locally()

    async def set_summary(self, thread_id: str, summary: str) -> None:
        try:
            params = {"summary": summary, "thread_id": thread_id}
            await self._writer.run(lambda conn: conn.execute(SET_SUMMARY, params), small=True)
        except Exception as exc:
            raise self._translated(exc) from exc
