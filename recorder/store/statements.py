"""What an operation's body may ask of its database: a few kinds of statement.

A body is a generator: it yields a statement with its parameters, ``(statement, params)``,
the database runs it and sends back its result, and the body's return value is the
operation's. It never touches a connection, so the same body runs on a ``sqlite3``
connection (driven synchronously, on the event loop or a thread) and on an asyncpg
connection (driven with ``await``); see ``recorder.store.sql`` for why.

Statements are mostly constants (their kind and SQL, made once) yielded with fresh
parameters: a pair costs next to nothing to make, on a path where a transaction takes
tens of microseconds. SQL is written once, with ``?`` placeholders; each database renders
it for its driver (asyncpg numbers them).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple, TypeVar

from recorder.wire.events import RecordedEvent

T = TypeVar("T")


class Execute(NamedTuple):
    """A statement run for its effect; the body is sent the number of rows it changed."""

    sql: str


class Fetch(NamedTuple):
    """A query; the body is sent its rows, each indexable by column number.

    ``lock`` holds the rows read until the transaction ends (PostgreSQL: ``FOR UPDATE``;
    SQLite's write transactions hold the whole database from their first statement).
    """

    sql: str
    lock: bool = False


class FetchEvents(NamedTuple):
    """A query of whole event rows (``EVENT_COLUMNS``); the body is sent RecordedEvents."""

    sql: str


class InsertEvents(NamedTuple):
    """New events, given as the parameters: a list of ``EventBlock``, written the driver's
    fastest way."""


class EventBlock(NamedTuple):
    """Consecutive new events of one run that share their ``recorded_at`` and ``origin``:
    the k-th (from 0) has position ``position + k`` and seq ``seq + k``, and its type,
    payload and chain hash at ``columns[3k:3k + 3]``. What varies per event is all a
    driver binds per event."""

    position: int
    thread_id: str
    run_id: str
    seq: int
    recorded_at: float
    origin: str
    columns: list[Any]

    def shared(self, start: int = 0) -> tuple[int, str, str, int, float, str]:
        """What the events from the ``start``-th on share, as the drivers bind it: their
        first position, the thread, the run, their first seq, recorded_at and the origin."""
        return (
            self.position + start,
            self.thread_id,
            self.run_id,
            self.seq + start,
            self.recorded_at,
            self.origin,
        )

    def rows(self, start: int = 0) -> list[tuple[Any, ...]]:
        """The events from the ``start``-th on as whole rows (``INSERT_COLUMNS`` order)."""
        columns = self.columns
        return [
            (
                self.position + k,
                self.thread_id,
                self.run_id,
                self.seq + k,
                columns[3 * k],
                columns[3 * k + 1],
                self.recorded_at,
                self.origin,
                columns[3 * k + 2],
            )
            for k in range(start, len(columns) // 3)
        ]


class AppendLock(NamedTuple):
    """Take the lock that appends hold until they commit, so that positions increase in
    commit order (PostgreSQL locks the events table; SQLite's write transactions already
    hold the whole database). A body that appends asks for it first."""


class Sanction(NamedTuple):
    """Let this transaction delete or rewrite events past the append-only triggers
    (``on=False``: no longer). The database checks it, not the code: PostgreSQL by a
    transaction-local setting, SQLite by a row of ``sanctioned`` that exists only inside
    the transaction. A body that asks for it asks for ``on=False`` before it returns."""

    kind: str
    on: bool = True


class Notify(NamedTuple):
    """Tell other processes that this transaction committed events or a status."""


Statement = Execute | Fetch | FetchEvents | InsertEvents | AppendLock | Sanction | Notify
Body = Generator[tuple[Statement, Any], Any, T]

INSERT_EVENTS = InsertEvents()
APPEND_LOCK = AppendLock()
NOTIFY = Notify()
EVENT_COLUMNS = ", ".join(RecordedEvent._fields)
# When the input of run ``r`` was last rewritten (None: never, or no input).
INPUT_REWRITTEN_AT = "(SELECT x.rewritten_at FROM run_inputs x WHERE x.run_id = r.run_id)"
# What ``Run.changed_since`` compares: the run as stored now against the run as read.
RUN_AS_STORED = f"SELECT r.head, r.created_at, {INPUT_REWRITTEN_AT} FROM runs r WHERE r.run_id = ?"
INSERT_COLUMNS = (*RecordedEvent._fields, "hash")
