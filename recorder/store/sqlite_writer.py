"""SQLite's write transactions: on the event loop when small, on one thread when large."""

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
    for the lock and also checkpoints the WAL that the loop's commits leave behind. Without
    an ``inline`` connection (an in-memory database has only one) everything runs on the
    thread.
    """

    _CHECKPOINT_EVERY = 100  # small commits between checkpoints (about 1,000 WAL pages)

    def __init__(
        self,
        threaded: Callable[[], sqlite3.Connection],
        inline: Callable[[], sqlite3.Connection] | None,
    ) -> None:
        self._connect_threaded = threaded
        self._connect_inline = inline
        self._lock = asyncio.Lock()
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="sqlite-writer")
        self._threaded: sqlite3.Connection | None = None
        self._inline: sqlite3.Connection | None = None
        self._since_checkpoint = 0
        self._checkpointing: asyncio.Task[None] | None = None
        self._closing = False

    async def run(
        self,
        work: Callable[[sqlite3.Connection], T],
        *,
        small: bool = False,
        transaction: bool = True,
    ) -> T:
        """``work`` in a write transaction (``transaction=False``: as it is, for reads and
        for work that manages its own), under the write lock."""
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
                    self._committed_inline()
                    return result
            threaded = self._transaction if transaction else self._plain
            running = loop.run_in_executor(self._executor, threaded, work)
            try:
                return await asyncio.shield(running)
            except asyncio.CancelledError:
                # The thread cannot be stopped mid-transaction: keep the lock until it ends.
                with contextlib.suppress(Exception):
                    await running
                raise

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
        async with self._lock:
            await loop.run_in_executor(self._executor, self._disconnect)
            self._executor.shutdown(wait=True)
            if self._inline is not None:
                self._inline.close()
                self._inline = None

    def _committed_inline(self) -> None:
        self._since_checkpoint += 1
        if self._since_checkpoint >= self._CHECKPOINT_EVERY and not self._closing:
            self._since_checkpoint = 0
            self._checkpointing = asyncio.create_task(self._checkpoint())

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return _transact(self._thread_connection(), work)

    def _plain(self, work: Callable[[sqlite3.Connection], T]) -> T:
        return work(self._thread_connection())

    async def _checkpoint(self) -> None:
        # Under the write lock, like SQLite's own autocheckpoint after a commit: with writes
        # going on, a checkpoint never catches up and the WAL is never started over.
        loop = asyncio.get_running_loop()
        async with self._lock:
            await loop.run_in_executor(self._executor, self._checkpoint_now)

    def _checkpoint_now(self) -> None:
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
