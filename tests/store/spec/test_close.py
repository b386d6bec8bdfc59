"""EventStore.close."""

from __future__ import annotations

import asyncio

from recorder.store import NewRun, open_store
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
