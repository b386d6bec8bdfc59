"""A database that stops answering (paused, partitioned) does not hang the health probe:
past the store's deadline ``/healthz`` answers 503, saying so."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx

from recorder.api import create_app
from recorder.config import Settings
from recorder.store import EventStore, open_store
from tests.servers import serving


class Silent:
    """A store whose database, once ``silent``, never answers ``max_position``."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.silent = False
        self.url = store.url
        self.append_survives_cancel = store.append_survives_cancel

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def max_position(self) -> int:
        if self.silent:
            await asyncio.Event().wait()
        return await self.store.max_position()


async def test_a_silent_database_is_unavailable_past_the_deadline(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'r.db'}"
    store = Silent(await open_store(url, migrate=True))
    settings = Settings(db=url, store_deadline=0.5)
    try:
        async with (
            serving(create_app(settings, store=store)) as base,  # type: ignore[arg-type]
            httpx.AsyncClient(base_url=base, timeout=30, trust_env=False) as client,
        ):
            assert (await client.get("/healthz")).status_code == 200
            store.silent = True
            began = time.monotonic()
            answer = await client.get("/healthz")
            assert answer.status_code == 503
            assert answer.json() == {"detail": "the database did not answer within 0.5 s"}
            assert time.monotonic() - began < 5
            head = await client.head("/healthz")
            assert head.status_code == 503
    finally:
        await store.store.close()
