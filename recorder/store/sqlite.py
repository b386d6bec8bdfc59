"""SQLite: plain ``sqlite3`` connections, WAL, one writer at a time.

A body (``recorder.store.statements``) runs whole in one hop: ``drive`` steps it on a
connection, statement after statement, with no ``await`` in between. Through an async
driver every statement is a hop to its thread and back (tens of microseconds each, the GIL
passed back and forth); an append would be five or six of them, a new run seven.

Writes go through ``SQLiteWriter``: small ones on the event loop, large ones on its thread
(see there). Reads of a database file run on a few reader threads, each with a connection
of its own, beside the writer (WAL lets readers go on while one writes). An in-memory or
URI database cannot be opened twice, so it has one connection, on the writer's thread,
for everything.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import accumulate
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.pool import StaticPool

from recorder.errors import StoreUnavailable
from recorder.store.chain import HASH_BYTES
from recorder.store.errors import Failure
from recorder.store.migrations import apply_migrations
from recorder.store.sqlite_writer import SQLiteWriter, connect
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
from recorder.wire.events import RecordedEvent

T = TypeVar("T")

_INSERT_EVENTS = (
    f"INSERT INTO events ({', '.join(INSERT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in INSERT_COLUMNS)})"
)
# What counts as a small transaction, run on the event loop (see SQLiteWriter).
_SMALL_EVENTS = 32
_SMALL_BYTES = 64 * 1024
_ROW_BYTES = 160  # WAL an event's row writes besides its payload (ids, hash, index entry)
_READERS = 4
# Result codes (the low byte of sqlite_errorcode) that mean the database cannot be used
# now: it cannot be opened, read or written, is full, or another process holds it.
_UNAVAILABLE = {
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_FULL,
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_READONLY,
    sqlite3.SQLITE_PERM,
    sqlite3.SQLITE_NOTADB,
    sqlite3.SQLITE_CORRUPT,
}
_DUPLICATE = {sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY}


class SQLiteDatabase:
    dialect = "sqlite"
    append_survives_cancel = True  # small appends never yield; large ones finish on the thread
    one_trip = False  # its statements cost no round trips: nothing to save

    def __init__(self, url: str, writer: SQLiteWriter, readers: SQLiteReaders | None) -> None:
        self.url = url
        self._writer = writer
        self._readers = readers

    @classmethod
    async def open(cls, url: str) -> SQLiteDatabase:
        target, uri, path = _target(url)
        if path is None:  # in memory, or a URI: one connection for everything
            shared = connect(target, uri=uri, check_same_thread=False)
            writer = SQLiteWriter(lambda: shared, None)
            database = cls(url, writer, None)
        else:
            parent = Path(path).resolve().parent
            if not parent.is_dir():
                raise StoreUnavailable(
                    f"cannot open SQLite database {path!r}: {parent} does not exist"
                )
            writer = SQLiteWriter(
                lambda: connect(path, *_NO_CHECKPOINTS, check_same_thread=False),
                lambda: connect(path, *_INLINE),
                lambda: connect(path, check_same_thread=False),
            )
            database = cls(url, writer, SQLiteReaders(path))
        try:
            await writer.run(_ready, transaction=False)
        except BaseException as exc:
            await database.close()
            if path is not None and isinstance(exc, sqlite3.Error):
                # Said with the file it is about: who opens it can act on that.
                raise StoreUnavailable(
                    f"cannot open SQLite database {path!r}: {_why(exc)}"
                ) from exc
            raise
        return database

    @staticmethod
    def classify(exc: BaseException) -> Failure | None:
        if isinstance(exc, sqlite3.Error):
            code = getattr(exc, "sqlite_errorcode", None) or 0
            if code == sqlite3.SQLITE_CONSTRAINT_TRIGGER:  # only the append-only triggers
                return Failure.APPEND_ONLY
            if code in _DUPLICATE:
                return Failure.DUPLICATE
            if code & 0xFF in _UNAVAILABLE:
                return Failure.UNAVAILABLE
            # A missing table has no code of its own: SQLITE_ERROR, and this text.
            if code == sqlite3.SQLITE_ERROR and str(exc).startswith("no such table"):
                return Failure.NOT_MIGRATED
        if isinstance(exc, (OverflowError, UnicodeEncodeError)):
            return Failure.UNUSABLE_VALUE
        if isinstance(exc, OSError):
            return Failure.UNAVAILABLE
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
        small = events <= _SMALL_EVENTS and size <= _SMALL_BYTES
        return await self._writer.run(
            lambda conn: drive(conn, body()), small=small, written=size + _ROW_BYTES * events
        )

    async def read(
        self, body: Callable[[], Body[T]], *, small: bool = False, patient: bool = False
    ) -> T:
        if self._readers is None:
            return await self._writer.run(lambda conn: drive(conn, body()), transaction=False)
        if small:
            # A few rows by key: tens of microseconds, less than the hop to a reader
            # thread and back (which, with the loop busy, can wait for the GIL too).
            done, result = self._writer.read_inline(lambda conn: drive(conn, body()))
            if done:
                return result  # type: ignore[return-value]
        return await self._readers.run(lambda conn: drive(conn, body()))

    async def migrate(self) -> None:
        await self._writer.run(_migrate, transaction=False)

    async def scrub(self) -> None:
        await self._writer.scrub()

    async def listen(self, wake: asyncio.Event) -> None:
        """Nothing to listen to: SQLite tells no other process of commits; readers poll."""

    async def close(self) -> None:
        await self._writer.close()
        if self._readers is not None:
            await self._readers.close()


class SQLiteReaders:
    """Reads of a database file on a few threads, each with a connection of its own."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._executor = ThreadPoolExecutor(_READERS, thread_name_prefix="sqlite-reader")
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []

    async def run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, work)

    async def close(self) -> None:
        self._executor.shutdown(wait=True)  # reads are short: a read under way ends first
        for conn in self._connections:
            conn.close()
        self._connections.clear()

    def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = connect(self._path, check_same_thread=False)
            self._connections.append(conn)
        return work(conn)


def drive(conn: sqlite3.Connection, body: Body[T]) -> T:
    """Run ``body`` on ``conn``, each statement as it asks for it; its return value."""
    try:
        statement, params = next(body)
        while True:
            result: Any
            # SQLite has no row locks to take (``Fetch.lock``): a write transaction holds
            # the whole database from BEGIN IMMEDIATE.
            if type(statement) is Fetch:
                result = conn.execute(statement.sql, params).fetchall()
            elif type(statement) is Execute:
                result = conn.execute(statement.sql, params).rowcount
            else:
                result = _PERFORM[type(statement)](conn, statement, params)
            statement, params = body.send(result)
    except StopIteration as done:
        value: T = done.value
        return value
    finally:
        body.close()


def _fetch_events(conn: sqlite3.Connection, statement: Any, params: Any) -> list[RecordedEvent]:
    return list(map(RecordedEvent._make, conn.execute(statement.sql, params)))


def _insert_events(conn: sqlite3.Connection, statement: Any, blocks: Any) -> None:
    """Each block of ``_WHOLE_FROM`` events or more in one statement (``_insert_whole``);
    a smaller one by groups of ``_GROUPS`` rows to a statement, binding once what they
    share (half the time ``executemany`` takes to bind and step each row); what is left,
    whole rows with ``executemany``."""
    rest: list[tuple[Any, ...]] = []
    for block in blocks:
        columns = block.columns
        count = len(columns) // 3
        if count >= _WHOLE_FROM and _insert_whole(conn, block):
            continue
        done = 0
        for size in _GROUPS:
            while count - done >= size:
                rows = columns[3 * done : 3 * (done + size)]
                conn.execute(_insert_group(size), (*block.shared(done), *rows))
                done += size
        if done < count:
            rest += block.rows(done)
    if rest:
        conn.executemany(_INSERT_EVENTS, rest)


_GROUPS = (128, 16)  # rows per statement (each size is one prepared statement, cached)
_WHOLE_FROM = 256  # events in a block written by one statement, ``_insert_whole``


@functools.cache
def _insert_group(size: int) -> str:
    """``size`` rows in one INSERT: ?1 the first position, ?2 the thread, ?3 the run, ?4 the
    first seq, ?5 recorded_at, ?6 the origin, then type, payload and hash of each row."""
    rows = ", ".join(
        f"(?1 + {k}, ?2, ?3, ?4 + {k}, ?{7 + 3 * k}, ?{8 + 3 * k}, ?5, ?6, ?{9 + 3 * k})"
        for k in range(size)
    )
    return f"INSERT INTO events ({', '.join(INSERT_COLUMNS)}) VALUES {rows}"


def _insert_whole(conn: sqlite3.Connection, block: Any) -> bool:
    """Write the block in one statement, the k-th row cut from joined columns: its type
    and payload from the joined types and payloads (where each begins: ``_OFFSET`` ASCII
    digits per row, one more for the end), its hash ``HASH_BYTES`` at ``HASH_BYTES * k``.
    False, having written nothing, for a block this cannot carry (a type that is None or
    not ASCII): it goes by rows.

    Why: ``sqlite3`` lets go of the GIL around each statement's step, and must take it
    back after; while the proxy's loop is busy, that takes up to the interpreter's switch
    interval each time. A block of 2,000 events by 128-row statements waited ~16 times;
    this waits once, and SQLite cuts and inserts the rows outside the GIL."""
    columns = block.columns
    types, payloads, hashes = columns[0::3], columns[1::3], columns[2::3]
    if None in types:
        return False
    joined = "".join(types)
    if not joined.isascii():
        return False  # (an ASCII type's length is its length in bytes)
    ends = _OFFSETS * (len(types) + 1)
    conn.execute(
        _INSERT_WHOLE,
        (
            *block.shared(),
            len(types),
            joined.encode(),
            ends % tuple(accumulate(map(len, types), initial=1)),
            b"".join(payloads),
            ends % tuple(accumulate(map(len, payloads), initial=1)),
            b"".join(hashes),
        ),
    )
    return True


_OFFSET = 12  # digits of a 1-based offset into a joined column (a block under 1 TB)
_OFFSETS = b"%0" + str(_OFFSET).encode() + b"d"


def _cut(joined: str, offsets: str) -> str:
    """SQL for the k-th row's part of a joined column (a blob), ``k`` being the generator's row."""
    start = f"CAST(substr({offsets}, {_OFFSET} * k + 1, {_OFFSET}) AS INTEGER)"
    end = f"CAST(substr({offsets}, {_OFFSET} * k + {_OFFSET + 1}, {_OFFSET}) AS INTEGER)"
    return f"substr({joined}, {start}, {end} - {start})"


# ?1-?6 as in ``_insert_group``; ?7 the rows; ?8/?9 the joined types and their offsets,
# ?10/?11 the joined payloads and theirs, ?12 the joined hashes. A blob's ``substr`` counts
# bytes and costs the same wherever it cuts (a text's would count characters from the start).
_INSERT_WHOLE = (
    "WITH RECURSIVE rows(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM rows WHERE k + 1 < ?7) "
    f"INSERT INTO events ({', '.join(INSERT_COLUMNS)}) "
    f"SELECT ?1 + k, ?2, ?3, ?4 + k, CAST({_cut('?8', '?9')} AS TEXT), {_cut('?10', '?11')}, "
    f"?5, ?6, substr(?12, {HASH_BYTES} * k + 1, {HASH_BYTES}) FROM rows"
)


def _nothing(conn: sqlite3.Connection, statement: Any, params: Any) -> None:
    """The append lock is the write lock, held since BEGIN IMMEDIATE; and there is no one
    to notify: other processes on the file notice by polling."""


def _sanction(conn: sqlite3.Connection, statement: Any, params: Any) -> None:
    # The triggers let a DELETE or UPDATE of events through only while a row of
    # ``sanctioned`` exists: inserted here and deleted before the transaction commits (a
    # write transaction holds the database, so no other connection ever sees it).
    if statement.on:
        conn.execute("INSERT INTO sanctioned (kind) VALUES (?)", (statement.kind,))
    else:
        conn.execute("DELETE FROM sanctioned WHERE kind = ?", (statement.kind,))


_PERFORM: dict[type, Callable[[sqlite3.Connection, Any, Any], Any]] = {
    FetchEvents: _fetch_events,
    InsertEvents: _insert_events,
    Sanction: _sanction,
    AppendLock: _nothing,
    Notify: _nothing,
}


# The writers never checkpoint (``SQLiteWriter``: a connection of its own does); the loop's
# connection never waits for the file lock either.
_NO_CHECKPOINTS = ("wal_autocheckpoint=0",)
_INLINE = ("busy_timeout=0", *_NO_CHECKPOINTS)


def _target(url: str) -> tuple[str, bool, str | None]:
    """What ``sqlite3.connect`` takes for ``url``, whether it is a URI, and the database
    file when it is a plain one (None in memory or for a URI: no second connection could
    share those)."""
    args, kwargs = SQLiteDialect_pysqlite().create_connect_args(make_url(url))
    target, uri = str(args[0]), bool(kwargs.get("uri"))
    if uri or target == ":memory:":
        return target, uri, None
    path = str(Path(target).expanduser())
    return path, False, path


def _ready(conn: sqlite3.Connection) -> None:
    """Nothing: opening the connection was the check."""


def _migrate(conn: sqlite3.Connection) -> None:
    # Alembic needs a SQLAlchemy connection: one over this very connection (the only one
    # an in-memory database has), whose transactions take the write lock up front.
    engine = create_engine("sqlite://", creator=lambda: conn, poolclass=StaticPool)
    event.listen(engine, "begin", _begin_immediate)
    with engine.begin() as migrating:
        apply_migrations(migrating)


def _begin_immediate(migrating: Connection) -> None:
    migrating.exec_driver_sql("BEGIN IMMEDIATE")


def _why(exc: sqlite3.Error) -> str:
    """Why a file could not be opened as a database, in a few words."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code == sqlite3.SQLITE_NOTADB:
        return "the file is not a SQLite database"
    if code == sqlite3.SQLITE_CANTOPEN:
        return "it cannot be opened (a directory, or no permission to read and write it)"
    if code == sqlite3.SQLITE_BUSY:
        return "another process holds it locked"
    return str(exc)
