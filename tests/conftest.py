"""Shared fixtures: real databases (a SQLite file, a fresh PostgreSQL database per test)."""

from __future__ import annotations

import os
import shutil
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from recorder.store import EventStore, open_store
from recorder.store.deltas import operations
from recorder.store.inputs import unpacked
from recorder.store.sql import SqlStore
from recorder.store.statements import Body, Fetch

CI = os.environ.get("CI", "").lower() == "true"
PG_ADMIN = os.environ.get("AGUI_RECORDER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
ROOT = Path(__file__).resolve().parents[1]
INTEROP = ROOT / "tests" / "interop"
# Recorded AG-UI traffic: the project's own (always present), and the .NET SDK's baselines,
# an optional extra beside the repository that tests use only where it is present.
VECTORS = ROOT / "tests" / "vectors"
DOTNET_VECTORS = ROOT.parent / "shared" / "vectors" / "ag-ui-dotnet-baselines"


def require(available: bool, what: str) -> None:
    """Skip when a real part is missing on this machine; under CI a missing part fails."""
    if available:
        return
    if CI:
        pytest.fail(f"{what} is required under CI=true but is not available")
    pytest.skip(f"{what} not available")


def node_available() -> bool:
    return (
        shutil.which("node") is not None
        and (INTEROP / "node_modules" / "@ag-ui" / "client").is_dir()
    )


def pg_available() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=2):
            return True
    except OSError:
        return False


async def create_pg_database() -> str:
    """A new, empty database; its asyncpg-SQLAlchemy URL."""
    name = f"recorder_test_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(PG_ADMIN)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()
    base = PG_ADMIN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1)
    return f"{base}/{name}"


async def drop_pg_database(url: str) -> None:
    name = url.rsplit("/", 1)[1]
    conn = await asyncpg.connect(PG_ADMIN)
    try:
        await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await conn.close()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'recorder.db'}"


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    require(pg_available(), "PostgreSQL at 127.0.0.1:5432")
    url = await create_pg_database()
    try:
        yield url
    finally:
        await drop_pg_database(url)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'recorder.db'}"
        return
    require(pg_available(), "PostgreSQL at 127.0.0.1:5432")
    url = await create_pg_database()
    try:
        yield url
    finally:
        await drop_pg_database(url)


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[EventStore]:
    s = await open_store(db_url, migrate=True)
    try:
        yield s
    finally:
        await s.close()


async def raw_sql(store: EventStore, sql: str, *params: Any) -> list[Any]:
    """Run one statement (``?`` placeholders) in a write transaction on the store's own
    database, as any other client of it could; its rows. Driver errors come out as they are.

    It goes through the store's database (``SqlStore.database``) because an in-memory
    database has no other connection.
    """
    assert isinstance(store, SqlStore)

    def body() -> Body[list[Any]]:
        rows = yield Fetch(sql), params
        return [tuple(row) for row in rows]

    return await store.database.write(body)


async def stored_chunks(store: EventStore) -> list[bytes]:
    """The bytes each row of ``input_chunks`` stands for (a compressed leaf's, expanded)."""
    rows = await raw_sql(store, "SELECT hash, level, data FROM input_chunks")
    return [unpacked(bytes(key), level, bytes(data)).data for key, level, data in rows]


async def stored_inputs(store: EventStore) -> list[bytes]:
    """The bytes each run's input is kept as: whole, or a delta's operations (expanded)."""
    rows = await raw_sql(store, "SELECT input, base FROM run_inputs WHERE input IS NOT NULL")
    kept_as = []
    for kept, base in rows:
        if base is None:
            kept_as.append(bytes(kept))
        else:  # compressed with its base's end as the dictionary
            rebuilt = (await store.get_run(base)).input
            assert rebuilt is not None
            kept_as.append(operations(rebuilt, bytes(kept)))
    return kept_as


@pytest.fixture
def vectors() -> list[Path]:
    """The folders of recorded traffic on this machine: the project's, then the optional
    .NET baselines where present (their absence is never a failure, CI included)."""
    return [VECTORS, *([DOTNET_VECTORS] if DOTNET_VECTORS.is_dir() else [])]
