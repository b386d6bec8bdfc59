"""The services one recorder process runs, shared by the HTTP API and the CLI."""

from __future__ import annotations

import asyncio
import contextlib
import time

import aiohttp

from recorder.config import Settings
from recorder.history import History
from recorder.proxy import Proxy, new_owner
from recorder.store import EventStore, open_store


class Runtime:
    def __init__(
        self, settings: Settings, store: EventStore, client: aiohttp.ClientSession
    ) -> None:
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


def upstream_client(settings: Settings) -> aiohttp.ClientSession:
    """The HTTP client for agents: no overall deadline (a run may stream for hours), an idle
    timeout per read, no cookie jar (cookies pass through as headers, never kept), and no
    environment proxies. aiohttp's C parser costs a fraction of a pure-Python client per
    chunk and per request, which is most of a recording proxy's own time.

    Idle connections are kept 2 s, under the 5 s after which common servers (uvicorn,
    Node) close theirs, so a request rarely meets a connection closed under it (and
    ``Proxy._post`` moves on to another when it does)."""
    timeout = aiohttp.ClientTimeout(
        total=None, connect=settings.connect_timeout, sock_read=settings.idle_timeout
    )
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=2.0)
    return aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=False,
        auto_decompress=True,
    )
