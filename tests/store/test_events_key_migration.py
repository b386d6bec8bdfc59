"""Revision 0009_events_fk on a database recorded before it: the events' key to runs is
gone (SQLite rebuilds the table), every event is as it was, the append-only triggers still
refuse, and the chains still verify; going down puts the key back."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from recorder.store import NewEvent, NewRun, open_store
from recorder.store.migrations import alembic_config, upgrade
from tests.conftest import raw_sql

ROWS = "SELECT position, thread_id, run_id, seq, type, payload, hash FROM events ORDER BY 1"


async def _keys(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        found = await conn.run_sync(lambda sync: inspect(sync).get_foreign_keys("events"))
    return [str(key["name"]) for key in found]


async def test_the_events_key_goes_and_the_log_stays(db_url: str) -> None:
    engine = create_async_engine(db_url)
    try:
        await upgrade(engine, "0008_one_trip")
        assert await _keys(engine) == ["fk_events_run_id_runs"]
        store = await open_store(db_url)
        try:
            for run_id in ("a", "b"):
                await store.create_run(NewRun(run_id, "t", input=b"{}", infer_parent=True))
                await store.append(run_id, [NewEvent(b'{"n":1}', "X"), NewEvent(b"\xff", None)])
            await store.set_status("a", "finished")
            before = await raw_sql(store, ROWS)
        finally:
            await store.close()
        await upgrade(engine)
        assert await _keys(engine) == []
        store = await open_store(db_url)
        try:
            assert await raw_sql(store, ROWS) == before
            with pytest.raises(Exception, match="append-only"):
                await raw_sql(store, "DELETE FROM events WHERE run_id = 'a'")
            with pytest.raises(Exception, match="append-only"):
                await raw_sql(store, "UPDATE events SET payload = ? WHERE run_id = 'b'", b"x")
            await store.append("b", [NewEvent(b"{}", "Y")])  # the running run goes on
            await store.set_status("b", "finished")
            assert (await store.verify_chains()).ok
        finally:
            await store.close()
        async with engine.begin() as conn:
            await conn.run_sync(
                lambda sync: command.downgrade(alembic_config(sync), "0008_one_trip")
            )
        assert await _keys(engine) == ["fk_events_run_id_runs"]
        store = await open_store(db_url)
        try:
            with pytest.raises(Exception, match="append-only"):
                await raw_sql(store, "DELETE FROM events WHERE run_id = 'a'")
            assert len(await raw_sql(store, ROWS)) == len(before) + 1
        finally:
            await store.close()
    finally:
        await engine.dispose()
