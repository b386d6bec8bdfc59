"""The store's spec: one file per ``EventStore`` method, each test run on every database.

``store`` is a migrated store on a SQLite file, on SQLite ``:memory:`` (one shared
connection) and on a fresh PostgreSQL database; ``spec_url`` is its URL, for tests that
open a second store on the same database (not possible in memory).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from recorder.store import EventStore, NewEvent, open_store
from tests.conftest import create_pg_database, drop_pg_database, pg_available, require

MEMORY = "sqlite+aiosqlite:///:memory:"


@pytest.fixture(params=["file", "memory", pytest.param("postgres", marks=pytest.mark.postgres)])
async def spec_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "file":
        yield f"sqlite+aiosqlite:///{tmp_path / 'recorder.db'}"
    elif request.param == "memory":
        yield MEMORY
    else:
        require(pg_available(), "PostgreSQL at 127.0.0.1:5432")
        url = await create_pg_database()
        try:
            yield url
        finally:
            await drop_pg_database(url)


@pytest.fixture
async def store(spec_url: str) -> AsyncIterator[EventStore]:
    opened = await open_store(spec_url, migrate=True)
    try:
        yield opened
    finally:
        await opened.close()


def shared_database(url: str) -> bool:
    """Whether a second store on ``url`` sees the first one's database."""
    return url != MEMORY


def ev(payload: bytes | str, kind: str | None = "CUSTOM") -> NewEvent:
    data = payload.encode() if isinstance(payload, str) else payload
    return NewEvent(data, kind)
