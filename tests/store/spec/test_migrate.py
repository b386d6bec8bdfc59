"""EventStore.migrate."""

from __future__ import annotations

from alembic.script import ScriptDirectory

from recorder.store import EventStore, NewRun, open_store
from recorder.store.migrations import alembic_config
from tests.conftest import raw_sql
from tests.store.spec.conftest import shared_database


async def test_migrating_again_changes_nothing(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1", input=b"kept"))
    await store.migrate()
    assert (await store.get_run("r1")).input == b"kept"
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert await raw_sql(store, "SELECT version_num FROM alembic_version") == [(head,)]


async def test_a_new_database_is_migrated_on_open(spec_url: str) -> None:
    store = await open_store(spec_url, migrate=True)
    try:
        await store.create_run(NewRun("r1", "t1"))
        if shared_database(spec_url):  # a second store sees the same, migrated database
            other = await open_store(spec_url, migrate=True)
            try:
                assert (await other.get_run("r1")).thread_id == "t1"
            finally:
                await other.close()
    finally:
        await store.close()
