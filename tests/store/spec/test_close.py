"""EventStore.close."""

from __future__ import annotations

import asyncio
import threading

import asyncpg

from recorder.store import NewRun, open_store
from tests.conftest import PG_ADMIN
from tests.store.spec.conftest import ev, shared_database


async def test_close_waits_for_a_write_in_progress(spec_url: str) -> None:
    store = await open_store(spec_url, migrate=True)
    await store.create_run(NewRun("r1", "t1"))
    events = [ev(f'{{"i":{i},"pad":"{"x" * 500}"}}') for i in range(2000)]
    appending = asyncio.create_task(store.append("r1", events))
    await asyncio.sleep(0.001)
    await store.close()
    appended = await appending  # it finished, and nothing is left open behind it
    assert len(appended) == 2000
    if shared_database(spec_url):
        again = await open_store(spec_url)
        try:
            assert len(await again.read_events("r1")) == 2000
        finally:
            await again.close()


async def test_close_lets_go_of_every_connection_and_thread(spec_url: str) -> None:
    before = {t.ident for t in threading.enumerate()}
    store = await open_store(spec_url, migrate=True)
    await store.create_run(NewRun("r1", "t1"))
    await store.append("r1", [ev(f'{{"pad":"{"x" * 1000}"}}') for _ in range(100)])  # threaded
    await asyncio.gather(*(store.get_run("r1") for _ in range(8)))
    await store.wait(0.01)
    await store.close()
    left = [t.name for t in threading.enumerate() if t.is_alive() and t.ident not in before]
    assert left == []
    if spec_url.startswith("postgresql"):
        name = spec_url.rsplit("/", 1)[1]
        admin = await asyncpg.connect(PG_ADMIN)
        try:
            connected = await admin.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", name
            )
        finally:
            await admin.close()
        assert connected == 0
