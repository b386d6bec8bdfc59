"""The HTTP API: ``create_app()`` builds everything; nothing is created at import time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from recorder import __version__
from recorder.api import agents, runs, threads, web
from recorder.api.deps import install_error_handlers
from recorder.config import Settings
from recorder.runtime import Runtime
from recorder.store import EventStore


def create_app(settings: Settings | None = None, *, store: EventStore | None = None) -> FastAPI:
    settings = settings or Settings()
    if settings.demo_agent and "demo" not in settings.agents:
        settings = settings.model_copy(
            update={"agents": {**settings.agents, "demo": f"http://{_local(settings)}/demo-agent/"}}
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.runtime = await Runtime.start(settings, store)
        try:
            yield
        finally:
            await app.state.runtime.close()

    app = FastAPI(
        title="agui-recorder",
        version=__version__,
        description="Records AG-UI agent traffic; history, replay, resume and fork.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    app.include_router(agents.router)
    app.include_router(threads.router)
    app.include_router(runs.router)
    app.include_router(web.router)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, Any]:
        runtime: Runtime = app.state.runtime
        await runtime.store.max_position()
        return {"ok": True, "version": __version__, "activeRuns": len(runtime.proxy.active)}

    if settings.demo_agent:
        from recorder.demo import create_demo_app

        app.mount("/demo-agent", create_demo_app())
    return app


def _local(settings: Settings) -> str:
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    return f"{host}:{settings.port}"
