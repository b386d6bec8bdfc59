"""The event store: the port (``EventStore``) and ``open_store``, where a backend is chosen."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from recorder.errors import ConfigError
from recorder.store.model import (
    Appended,
    NewEvent,
    NewRun,
    Page,
    Run,
    Thread,
    ThreadFilter,
)
from recorder.wire.events import RecordedEvent


class EventStore(Protocol):
    """An append-only log of AG-UI frames, keyed by thread and run."""

    url: str

    async def close(self) -> None: ...
    async def migrate(self) -> None: ...
    async def create_run(self, run: NewRun) -> Run: ...
    async def append(self, run_id: str, events: Sequence[NewEvent]) -> list[Appended]: ...
    async def append_batches(
        self, batches: Sequence[tuple[str, Sequence[NewEvent]]]
    ) -> list[list[Appended]]: ...
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
        """Set the run's status; ``summary``, if given, becomes its thread's summary in the
        same transaction (closing a run is one commit)."""
        ...

    async def heartbeat(self, run_ids: Sequence[str], owner: str) -> None: ...
    async def mark_incomplete(
        self,
        *,
        owner: str | None = None,
        stale_before: float | None = None,
        exclude_owner: str | None = None,
    ) -> list[str]: ...
    async def get_run(self, run_id: str) -> Run: ...
    async def read_events(
        self, run_id: str, *, gt: int = -1, lte: int | None = None, limit: int | None = None
    ) -> list[RecordedEvent]: ...
    async def read_after(
        self, position: int, *, limit: int | None = None, thread_id: str | None = None
    ) -> list[RecordedEvent]: ...
    async def max_position(self) -> int: ...
    async def list_runs(self, thread_id: str, *, inputs: bool = False) -> list[Run]:
        """The thread's runs, oldest first; their posted inputs (``Run.input``, which can be
        large) only with ``inputs=True``, else None."""
        ...

    async def get_thread(self, thread_id: str) -> Thread: ...
    async def list_threads(
        self, filters: ThreadFilter | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> Page: ...
    async def lineage(self, run_id: str) -> list[Run]: ...
    async def set_summary(self, thread_id: str, summary: str) -> None: ...
    async def save_checkpoint(self, run_id: str, seq: int, data: bytes) -> None: ...
    async def nearest_checkpoint(self, run_id: str, seq: int) -> tuple[int, bytes] | None: ...
    async def wait(self, timeout: float) -> None:
        """Return once events were committed (by any process on the database) or at ``timeout``."""
        ...


async def open_store(url: str, *, migrate: bool = False) -> EventStore:
    """A store for ``url`` (``sqlite+aiosqlite:///...`` or ``postgresql+asyncpg://...``)."""
    from recorder.store.sql import SqlStore

    store: SqlStore
    if url.startswith("sqlite+aiosqlite:"):
        from recorder.store.sqlite import SQLiteDialect, SQLiteStore, file_path

        path = file_path(url)
        if path is not None:
            store = await SQLiteStore.open_file(url, path)
        else:
            store = await SqlStore.open(url, SQLiteDialect())
    elif url.startswith(("postgresql+asyncpg:", "postgres+asyncpg:")):
        from recorder.store.postgres import PostgresDialect

        store = await SqlStore.open(url, PostgresDialect())
    else:
        raise ConfigError(
            f"unsupported database URL {url!r}: use sqlite+aiosqlite:///PATH "
            "or postgresql+asyncpg://USER@HOST/DB"
        )
    if migrate:
        await store.migrate()
    return store


__all__ = [
    "Appended",
    "EventStore",
    "NewEvent",
    "NewRun",
    "Page",
    "Run",
    "Thread",
    "ThreadFilter",
    "open_store",
]
