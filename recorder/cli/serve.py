"""Serving the app with uvicorn (uvloop and httptools when installed).

The socket is bound and the database migrated before the server starts, so that a port
already taken or a database out of reach ends the command with one line, and
"listening" is printed only once the server accepts connections. Logs go to standard
error as the settings say (``log_level``, ``log_format``); uvicorn's own lines too, in the
same format, from warnings up.
"""

from __future__ import annotations

import asyncio
import gc
import random
import socket

import uvicorn

from recorder.api import create_app, served
from recorder.cli.local import describe_database
from recorder.config import Settings
from recorder.errors import RecorderError
from recorder.proxy.journaled import recover
from recorder.runtime import Runtime, open_server_store
from recorder.store import EventStore
from recorder.telemetry.logs import configure as configure_logging

_BELOW = 8192  # ports below the connections' range chosen from
_TRIES = 32
YOUNG_COLLECTION = 20_000  # new container objects between two young collections (settle_heap)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing is bound to now, for a server about to bind it. Chosen below the range
    the system gives connections their local ports from (Linux: ``ip_local_port_range``),
    where no connection made before the server binds it can take it; the system's own
    choice where that range leaves no room below it."""
    start = _connections_start()
    if start - _BELOW >= 1024:
        candidates = range(start - _BELOW, start)
        for port in random.sample(candidates, min(_TRIES, len(candidates))):
            with socket.socket() as sock:
                try:
                    sock.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket() as sock:
        sock.bind((host, 0))
        chosen: int = sock.getsockname()[1]
        return chosen


def _connections_start() -> int:
    """The first port of the range the system takes connections' local ports from (0 where
    it does not say)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as found:
            return int(found.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or an error saying why there cannot be one."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise RecorderError(f"cannot listen on {host}:{port}: {reason}") from exc


def settle_heap() -> None:
    """Move what start-up built (modules, the app, its routes and models: most of a
    server's objects, and permanent) out of the collector's sight: full collections then
    traverse only what requests create. (Python's gc.freeze, as long-running servers use.)

    And collect the young generation every ``YOUNG_COLLECTION`` new objects instead of
    Python's 700. A streamed batch's events wait for their commit (thousands of them in a
    fast stream), so at 700 the collector ran every few hundred events, promoted each
    batch to the older generations and ran a full collection every few streams (7.5 ms at
    the median, up to 25 ms, on the loop every stream waits on). A young collection pauses
    longer now when it comes (8 ms at the median, mostly in the work after a run closes:
    its checkpoints, its indexing), but a hundred times less often: the collector's time
    fell by two thirds. Older generations keep Python's thresholds (every 10 young
    collections, every 10 of those)."""
    gc.collect()
    gc.freeze()
    _young, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION, older, oldest)


def make_server(
    settings: Settings, store: EventStore | None = None, runtime: Runtime | None = None
) -> uvicorn.Server:
    config = uvicorn.Config(
        create_app(settings, store=store, runtime=runtime),
        host=settings.host,
        port=settings.port,
        # The recorder logs its own start, stop and requests (``access_log``).
        log_level="warning" if settings.log_level in ("debug", "info") else settings.log_level,
        log_config=None,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    return uvicorn.Server(config)


async def serve(settings: Settings) -> None:
    configure_logging(settings.log_level, settings.log_format)
    sock = listen(settings.host, settings.port)
    try:
        settings = settings.model_copy(update={"port": sock.getsockname()[1]})
        store = await open_server_store(settings)
        try:
            if settings.journal:
                # Before the server: a damaged journal stops the start with a plain error.
                await recover(settings, store)
            # Before the server too: what stops it (a metrics address taken, a journal
            # directory that cannot be written) is one line, not a server's traceback.
            runtime = await Runtime.start(served(settings), store)
            try:
                await _run(make_server(settings, store, runtime), settings, sock)
            finally:
                await runtime.close()
        finally:
            await store.close()
    finally:
        sock.close()


async def _run(server: uvicorn.Server, settings: Settings, sock: socket.socket) -> None:
    settle_heap()
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            await task
            raise RecorderError("the server stopped while starting")
        await asyncio.sleep(0.02)
    agents = ", ".join(f"{n} -> {a.url}" for n, a in sorted(settings.agents.items())) or "none"
    if settings.demo_agent:
        agents = (agents + ", " if agents != "none" else "") + "demo (built in)"
    print(
        f"recorder listening on http://{settings.host}:{settings.port} "
        f"(database {describe_database(settings.db)}; agents: {agents}; "
        "web timeline at /, API docs at /docs)",
        flush=True,
    )
    await task
