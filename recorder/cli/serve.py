"""Serving the app with uvicorn (uvloop and httptools when installed)."""

from __future__ import annotations

import gc
import socket

import uvicorn

from recorder.api import create_app
from recorder.config import Settings


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def settle_heap() -> None:
    """Move what start-up built (modules, the app, its routes and models: most of a
    server's objects, and permanent) out of the collector's sight: full collections then
    traverse only what requests create. (Python's gc.freeze, as long-running servers use.)"""
    gc.collect()
    gc.freeze()


def make_server(settings: Settings) -> uvicorn.Server:
    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    return uvicorn.Server(config)


async def serve(settings: Settings) -> None:
    server = make_server(settings)
    settle_heap()
    agents = ", ".join(f"{n} -> {a.url}" for n, a in sorted(settings.agents.items())) or "none"
    if settings.demo_agent:
        agents = (agents + ", " if agents != "none" else "") + "demo (built in)"
    print(
        f"recorder listening on http://{settings.host}:{settings.port} "
        f"(database {settings.db}; agents: {agents}; web timeline at /, API docs at /docs)",
        flush=True,
    )
    await server.serve()
