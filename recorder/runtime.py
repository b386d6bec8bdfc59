"""The services one recorder process runs, shared by the HTTP API and the CLI."""

from __future__ import annotations

import asyncio
import contextlib
import time

from recorder.config import Settings
from recorder.proxy.proxy import Proxy, new_owner
from recorder.proxy.upstream import UpstreamClient
from recorder.store import EventStore, open_store
from recorder.timetravel.history import History


class Runtime:
    def __init__(self, settings: Settings, store: EventStore, client: UpstreamClient) -> None:
        self.settings = settings
        self.store = store
        self.client = client
        self.owner = new_owner()
        self.history = History(store, checkpoint_every=settings.checkpoint_every)
        self.proxy = Proxy(store, settings, client, self.owner)
        self._tasks: list[asyncio.Task[None]] = []
        self._owns_store = False

    @classmethod
    async def start(cls, settings: Settings, store: EventStore | None = None) -> Runtime:
        owns = store is None
        if store is None:
            store = await open_store(settings.db, migrate=True)
        client = upstream_client(settings)
        runtime = cls(settings, store, client)
        runtime._owns_store = owns
        await runtime.reap()
        runtime._tasks.append(asyncio.create_task(runtime._keep_alive(), name="heartbeat"))
        return runtime

    async def reap(self) -> list[str]:
        """Runs whose recorder stopped heartbeating (a crash) become ``incomplete``.

        This process's own runs are never reaped here: it closes them itself, whatever
        happens to their streams, and a long commit queue must not look like a crash.
        """
        stale = time.time() - 3 * self.settings.heartbeat_interval
        return await self.store.mark_incomplete(stale_before=stale, exclude_owner=self.owner)

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.proxy.close()
        await self.client.close()
        if self._owns_store:
            await self.store.close()

    async def _keep_alive(self) -> None:
        while True:
            await asyncio.sleep(self.settings.heartbeat_interval)
            with contextlib.suppress(Exception):
                await self.store.heartbeat(list(self.proxy.active), self.owner)
                await self.reap()


def upstream_client(settings: Settings) -> UpstreamClient:
    """The client for agents: no overall deadline (a run may stream for hours), an idle
    timeout on every wait."""
    return UpstreamClient(
        connect_timeout=settings.connect_timeout, idle_timeout=settings.idle_timeout
    )
