"""What an operation's body may ask of its database: a few kinds of statement.

A body is a generator: it yields a statement, the database runs it and sends back its
result, and the body's return value is the operation's. It never touches a connection, so
the same body runs on a ``sqlite3`` connection (driven synchronously, on the event loop or
a thread) and on an asyncpg connection (driven with ``await``); see ``recorder.store.sql``
for why.

SQL is written once, with ``?`` placeholders; each database renders it for its driver
(asyncpg numbers them). ``FOR UPDATE`` locks a row on PostgreSQL; SQLite, whose write
transactions hold the whole database from their first statement, leaves it out.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any, NamedTuple, TypeVar

from recorder.wire.events import RecordedEvent

T = TypeVar("T")


class Execute(NamedTuple):
    """A statement run for its effect; the body is sent the number of rows it changed."""

    sql: str
    params: Sequence[Any] = ()


class Fetch(NamedTuple):
    """A query; the body is sent its rows, each indexable by column number."""

    sql: str
    params: Sequence[Any] = ()


class FetchEvents(NamedTuple):
    """A query of whole event rows (``EVENT_COLUMNS``); the body is sent RecordedEvents."""

    sql: str
    params: Sequence[Any] = ()


class InsertEvents(NamedTuple):
    """New event rows (``EVENT_COLUMNS`` order), written the driver's fastest way."""

    rows: list[tuple[Any, ...]]


class AppendLock(NamedTuple):
    """Take the lock that appends hold until they commit, so that positions increase in
    commit order (PostgreSQL locks the events table; SQLite's write transactions already
    hold the whole database). A body that appends asks for it first."""


class Notify(NamedTuple):
    """Tell other processes that this transaction committed events or a status."""


Statement = Execute | Fetch | FetchEvents | InsertEvents | AppendLock | Notify
Body = Generator[Statement, Any, T]

EVENT_COLUMNS = ", ".join(RecordedEvent._fields)
