"""open_store: a store for a URL, the store's ``url`` and ``append_survives_cancel``."""

from __future__ import annotations

from pathlib import Path

import pytest

from recorder.errors import ConfigError, NotMigrated, RunNotFound, StoreUnavailable
from recorder.store import EventStore, NewRun, open_store


async def test_the_store_knows_its_url_and_how_appends_end(store: EventStore) -> None:
    assert store.url.startswith(("sqlite+aiosqlite:", "postgresql+asyncpg:"))
    assert store.append_survives_cancel is store.url.startswith("sqlite")


async def test_unsupported_url() -> None:
    with pytest.raises(ConfigError, match="unsupported database URL 'mysql://x/y'"):
        await open_store("mysql://x/y")


async def test_unreachable_postgres_is_a_clear_error() -> None:
    # Which server, database and user (never the password), and why.
    where = r"^cannot connect to PostgreSQL database 'nothing' at 127\.0\.0\.1:1 as 'postgres': "
    with pytest.raises(StoreUnavailable, match=where) as raised:
        await open_store("postgresql+asyncpg://postgres:secret@127.0.0.1:1/nothing")
    assert "secret" not in str(raised.value)
    assert isinstance(raised.value.__cause__, OSError)  # the driver's detail, chained


@pytest.mark.postgres
async def test_a_missing_postgres_database_or_role_is_named(pg_url: str) -> None:
    base = pg_url.rsplit("/", 1)[0]
    with pytest.raises(StoreUnavailable, match=r"database \"no_such_db_xyz\" does not exist"):
        await open_store(f"{base}/no_such_db_xyz")
    other = base.replace("postgres@", "no_such_role_xyz@", 1)
    with pytest.raises(StoreUnavailable, match=r"as 'no_such_role_xyz': role"):
        await open_store(f"{other}/postgres")


async def test_missing_sqlite_directory_is_a_clear_error() -> None:
    with pytest.raises(StoreUnavailable, match="does not exist"):
        await open_store("sqlite+aiosqlite:////nonexistent-dir-xyz/recorder.db")


async def test_a_file_that_is_no_database_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "not.db"
    path.write_bytes(b"this is not a SQLite database, not even close" * 100)
    said = f"^cannot open SQLite database '{path}': the file is not a SQLite database$"
    with pytest.raises(StoreUnavailable, match=said) as raised:
        await open_store(f"sqlite+aiosqlite:///{path}", migrate=True)
    assert "not a database" in str(raised.value.__cause__)


async def test_a_database_never_migrated_says_so(spec_url: str) -> None:
    store = await open_store(spec_url)
    try:
        with pytest.raises(NotMigrated, match=r"^the database has no recorder tables"):
            await store.get_run("r1")
        await store.migrate()
        with pytest.raises(RunNotFound):
            await store.get_run("r1")
    finally:
        await store.close()


@pytest.mark.parametrize(
    "url",
    [
        "sqlite+aiosqlite:///:memory:",
        "sqlite+aiosqlite://",
        "sqlite+aiosqlite:///file:spec?mode=memory&cache=shared&uri=true",
    ],
)
async def test_memory_and_uri_databases_live_on_one_connection(url: str) -> None:
    store = await open_store(url, migrate=True)
    try:
        await store.create_run(NewRun("r1", "t1"))
        assert (await store.get_run("r1")).thread_id == "t1"
    finally:
        await store.close()


async def test_a_uri_to_a_file(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///file:{tmp_path / 'uri.db'}?mode=rwc&uri=true"
    store = await open_store(url, migrate=True)
    try:
        await store.create_run(NewRun("r1", "t1"))
    finally:
        await store.close()
    plain = await open_store(f"sqlite+aiosqlite:///{tmp_path / 'uri.db'}")
    try:
        assert (await plain.get_run("r1")).thread_id == "t1"
    finally:
        await plain.close()


@pytest.mark.postgres
async def test_the_postgres_spelling_of_the_url(pg_url: str) -> None:
    url = pg_url.replace("postgresql+asyncpg://", "postgres+asyncpg://")
    store = await open_store(url, migrate=True)
    try:
        await store.create_run(NewRun("r1", "t1"))
        await store.wait(0.01)  # listens with the same URL
        assert (await store.get_run("r1")).thread_id == "t1"
    finally:
        await store.close()
