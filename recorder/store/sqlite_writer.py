"""SQLite's write transactions: on the event loop when small, on one thread when large; the
WAL's checkpoints on another."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

# secure_delete: a purge leaves no byte of what it deleted in the file (freed space is
# zeroed); the log itself is never deleted from otherwise.
PRAGMAS = (
    "journal_mode=WAL",
    "synchronous=NORMAL",
    "foreign_keys=ON",
    "busy_timeout=30000",
    "secure_delete=ON",
)


class SQLiteWriter:
    """Write transactions on plain ``sqlite3`` connections; ``run(work)`` is one transaction.

    ``work`` runs between BEGIN IMMEDIATE and COMMIT (ROLLBACK if it raises), one at a
    time: writers queue on a lock here instead of spinning on the file lock, which keeps
    group commits short and fair inside one process. Other processes on the same file
    still wait on the file lock (busy_timeout).

    Every write takes the write lock up front (BEGIN IMMEDIATE): a deferred transaction
    that reads first and writes later can fail at once with SQLITE_BUSY instead of waiting
    for the lock, which under load turns into lost appends.

    Where it runs depends on its size. A small transaction (``small=True``: a new run, a
    few events, a status) takes tens of microseconds, less than a hop to a thread and back,
    so it runs right here on the event loop, on a connection that never waits for the file
    lock (busy_timeout 0) and never checkpoints. If another process holds the lock it goes
    to the thread after all. Large ones run on the writer thread, whose connection waits
    for the lock. Without an ``inline`` connection (an in-memory database has only one)
    everything runs on the thread.

    Neither connection checkpoints the WAL. A checkpoint copies what was committed back
    into the database and syncs both files: about 9 ms for 4 MB here, two thirds of it
    waiting for the disk. SQLite's own (``wal_autocheckpoint``) runs inside the COMMIT
    that crossed its line, so every few batches of a streaming run waited for one with
    the write lock held. Instead a third connection, ``checkpoints``, does it on a thread
    of its own once about ``_CHECKPOINT_BYTES`` were written, without the write lock: a
    WAL checkpoint copies what was committed while writers go on appending. The WAL
    starts over at the first write after a checkpoint that copied all of it, and one that
    ran beside writes may never get there: a WAL past ``_WAL_FRAMES`` is checkpointed once
    more under the write lock (most of it copied already; the two syncs remain). Under
    writes that never pause the WAL so grows to 6-12 MB, where SQLite's own kept it
    near 4 MB. Without a ``checkpoints`` connection (a database in memory or named by a
    URI: one connection for everything) SQLite checkpoints as it does by default.
    """

    # Bytes written (estimated: what the callers say they write, plus ``_COMMIT_BYTES`` a
    # commit) between two checkpoints: about SQLite's own 1,000 pages.
    _CHECKPOINT_BYTES = 4 * 1024 * 1024
    _COMMIT_BYTES = 40 * 1024  # WAL a small commit writes (its rows' pages and indexes')
    _WAL_FRAMES = 1024  # pages in the WAL (4 MB) past which it must start over
    _SCRUB_WAIT_MS = 250  # how long a scrub may hold writers back, waiting for readers

    def __init__(
        self,
        threaded: Callable[[], sqlite3.Connection],
        inline: Callable[[], sqlite3.Connection] | None,
        checkpoints: Callable[[], sqlite3.Connection] | None = None,
    ) -> None:
        self._connect_threaded = threaded
        self._connect_inline = inline
        self._connect_checkpoints = checkpoints
        self._lock = asyncio.Lock()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="sqlite-writer")
        self._checkpointer = (
            None
            if checkpoints is None
            else ThreadPoolExecutor(1, thread_name_prefix="sqlite-checkpoint")
        )
        self._threaded: sqlite3.Connection | None = None
        self._inline: sqlite3.Connection | None = None
        self._checkpoints: sqlite3.Connection | None = None
        self._written = 0  # bytes since the last checkpoint began (estimated)
        self._checkpointing: asyncio.Task[None] | None = None
        self._closing = False

    async def run(
        self,
        work: Callable[[sqlite3.Connection], T],
        *,
        small: bool = False,
        transaction: bool = True,
        written: int = 0,
    ) -> T:
        """``work`` in a write transaction (``transaction=False``: as it is, for reads and
        for work that manages its own), under the write lock; ``written``: about how many
        bytes it writes (what the next checkpoint is due by)."""
        loop = asyncio.get_running_loop()
        async with self._lock:
            conn = self._inline_connection() if small and transaction else None
            if conn is not None:
                try:
                    result = _transact(conn, work)
                except sqlite3.OperationalError as exc:
                    if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                        raise
                    # Busy (another process writes; rolled back): the thread waits.
                else:
                    self._committed(written)
                    return result
            threaded = self._transaction if transaction else self._plain
            running = loop.run_in_executor(self._executor, threaded, work)
            try:
                result = await asyncio.shield(running)
            except asyncio.CancelledError:
                # The thread cannot be stopped mid-transaction: keep the lock until it ends.
                with contextlib.suppress(Exception):
                    await running
                raise
        if transaction:
            self._committed(written)
        return result

    async def scrub(self) -> None:
        """The WAL copied into the database and emptied (a TRUNCATE checkpoint, on the
        checkpoints' connection): the pages a purge or rewrite freed or overwrote are then
        zeroed in the file (``secure_delete``), and their old images in the WAL gone.
        It waits for readers on an older snapshot (and holds off writers meanwhile) at most
        ``_SCRUB_WAIT_MS``; if they are not done by then, the later checkpoints copy and
        overwrite what it could not. Without a WAL (in memory) there is nothing to do."""
        if self._checkpointer is None or self._closing:
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._checkpointer, self._truncate)

    def read_inline(self, work: Callable[[sqlite3.Connection], T]) -> tuple[bool, T | None]:
        """``work`` (a read) right here on the loop's connection, outside any transaction:
        ``(True, its result)``; ``(False, None)`` when it cannot run here (no such
        connection, or the file is busy: the caller reads on a thread instead). No write
        of this connection is ever under way between two awaits, and a WAL reader waits
        for no writer."""
        if self._closing:
            return False, None
        conn = self._inline_connection()
        if conn is None:
            return False, None
        try:
            return True, work(conn)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise
            return False, None

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        self._closing = True  # no checkpoint is scheduled from here on
        if self._checkpointing is not None:
            await self._checkpointing
        if self._checkpointer is not None:
            await loop.run_in_executor(self._checkpointer, self._disconnect_checkpoints)
            self._checkpointer.shutdown(wait=True)
        async with self._lock:
            await loop.run_in_executor(self._executor, self._disconnect)
            self._executor.shutdown(wait=True)
            if self._inline is not None:
                self._inline.close()
                self._inline = None

    def _committed(self, written: int) -> None:
        """A transaction committed: a checkpoint begins once enough was written since the
        last one began (one at a time; what is written meanwhile counts for the next)."""
        if self._checkpointer is None:
            return  # one connection for everything, which checkpoints as SQLite does
        self._written += written + self._COMMIT_BYTES
        if (
            self._written >= self._CHECKPOINT_BYTES
            and not self._closing
            and (self._checkpointing is None or self._checkpointing.done())
        ):
            self._written = 0
            self._checkpointing = asyncio.create_task(self._checkpoint())

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return _transact(self._thread_connection(), work)

    def _plain(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return work(self._thread_connection())

    async def _checkpoint(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._checkpointer is not None
        frames = await loop.run_in_executor(self._checkpointer, self._checkpoint_beside)
        if frames < self._WAL_FRAMES:
            return
        # A WAL that checkpoints beside the writers never got to start over: once more
        # under the write lock, as SQLite's own does, after which the next write starts it.
        async with self._lock:
            await loop.run_in_executor(self._executor, self._checkpoint_locked)

    def _checkpoint_beside(self) -> int:
        """A checkpoint on the checkpoints' connection, writers going on: the pages the WAL
        holds (0 when it could not run: a later one will do what this one could not)."""
        try:
            row = self._checkpoint_connection().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error:
            return 0
        return int(row[1]) if row is not None else 0

    def _truncate(self) -> None:
        conn = self._checkpoint_connection()
        conn.execute(f"PRAGMA busy_timeout={self._SCRUB_WAIT_MS}")
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.execute("PRAGMA busy_timeout=30000")

    def _checkpoint_connection(self) -> sqlite3.Connection:
        if self._checkpoints is None:
            assert self._connect_checkpoints is not None
            self._checkpoints = self._connect_checkpoints()
        return self._checkpoints

    def _checkpoint_locked(self) -> None:
        with contextlib.suppress(sqlite3.Error):  # a later one will do what this one could not
            self._thread_connection().execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _thread_connection(self) -> sqlite3.Connection:
        if self._threaded is None:
            self._threaded = self._connect_threaded()
        return self._threaded

    def _inline_connection(self) -> sqlite3.Connection | None:
        """The loop's connection, or None when writes must wait on the thread: outside WAL
        mode a commit needs readers gone, and this connection does not wait."""
        if self._inline is None and self._connect_inline is not None:
            conn = self._connect_inline()
            (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
            if str(mode).lower() == "wal":
                self._inline = conn
            else:
                conn.close()
                self._connect_inline = None
        return self._inline

    def _disconnect(self) -> None:
        if self._threaded is not None:
            self._threaded.close()
            self._threaded = None

    def _disconnect_checkpoints(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.close()
            self._checkpoints = None


def connect(
    target: str, *pragmas: str, uri: bool = False, check_same_thread: bool = True
) -> sqlite3.Connection:
    """A connection that leaves transactions to us (BEGIN IMMEDIATE ... COMMIT)."""
    conn = sqlite3.connect(
        target, isolation_level=None, uri=uri, check_same_thread=check_same_thread
    )
    for pragma in (*PRAGMAS, *pragmas):
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
