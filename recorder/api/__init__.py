"""The HTTP API: ``create_app()`` builds everything; nothing is created at import time.

The app logs its start and stop (``recorder.server``), every request with
``access_log`` (``recorder.access``), and every unexpected error with the id its 500
answer carries (``deps.py``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import parse_qsl

import orjson
from fastapi import FastAPI
from fastapi.responses import Response
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from recorder import __version__
from recorder.api import (
    agents,
    annotate,
    audit,
    diff,
    metrics,
    runs,
    search,
    threads,
    transfer,
    web,
)
from recorder.api.access import UNKNOWN_TOKEN, auth_required, authenticate, credential
from recorder.api.deps import ANSWERED, CHALLENGE, TOKEN_REQUIRED, install_error_handlers
from recorder.api.proxy_endpoint import OPENAPI, ProxyEndpoint, send_whole
from recorder.api.state_endpoint import serve_state, state_request
from recorder.api.views import JSON
from recorder.config import AgentConfig, Settings, allowed_hosts
from recorder.models import ErrorDetail, Health
from recorder.runtime import Runtime
from recorder.store import EventStore, shown_url
from recorder.store.deadline import within
from recorder.telemetry.logs import ACCESS, SERVER


class RecorderApp(FastAPI):
    """The API, with ``POST /agents/{name}`` (the proxy) taken before any routing or
    middleware: every proxied run pays for what stands in front of its first event; and
    so are the state routes' plain requests (``state_endpoint``), a frontend's reload."""

    _proxy = ProxyEndpoint()
    access_log = False
    # Host names a request may give (``config.allowed_hosts``); None: any.
    allowed_hosts: frozenset[str] | None = None
    settings: Settings | None = None

    # The answer with CORS (``settings.cors_origins``), when origins are set.
    cors: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = self._answer if self.cors is None else self.cors
        if self.access_log and scope["type"] == "http":
            await logged(answer, scope, receive, send)
        else:
            await answer(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self._refusal(scope)
            if refusal is not None:
                status, detail = refusal
                body = orjson.dumps({"detail": detail})
                asks = [(k.encode(), v.encode()) for k, v in CHALLENGE.items()]
                await send_whole(
                    send, status, body, "application/json", asks if status == 401 else None
                )
                return
        if scope["type"] == "http" and scope["method"] == "POST":
            name = proxied_agent(scope)
            if name is not None:
                scope["app"] = self
                scope["path_params"] = {"name": name}
                await self._proxy(scope, receive, send)
                return
        elif scope["type"] == "http" and scope["method"] == "GET":
            wanted = state_request(route_path(scope), scope.get("query_string", b""))
            if wanted is not None:
                await serve_state(self.state.runtime, wanted, scope, receive, send)
                return
            if proxied_agent(scope) is not None:
                body = orjson.dumps({"detail": "the proxy takes a RunAgentInput by POST"})
                await send_whole(send, 405, body, "application/json", [(b"allow", b"POST")])
                return
        try:
            await super().__call__(scope, receive, send)
        except Exception as exc:
            # Answered (500, with its error id) and logged by the handler: Starlette raises
            # it again for the server to log, which would log it a second time.
            if not hasattr(exc, ANSWERED):
                raise

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        """Why the request is refused before any route sees it (status, detail), if it is:
        a NUL in a query parameter other than searched text (PostgreSQL text cannot hold
        one: the same answer on both databases, naming the parameter), a Host this recorder
        does not answer to, or the API's documents without the token
        (FastAPI serves them apart from the routers that require it)."""
        nul = nul_parameter(scope)
        if nul is not None:
            return 422, f"query parameter {nul[:100]!r}: must not contain NUL"
        headers = Headers(scope=scope)
        if self.allowed_hosts is not None:
            host = host_name(headers.get("host"))
            if host is not None and host not in self.allowed_hosts:
                return 400, (
                    f"this recorder does not answer to the host {host[:100]!r} "
                    "(setting allowed_hosts)"
                )
        settings = self.settings
        documents = (
            self.docs_url,
            self.redoc_url,
            self.openapi_url,
            self.swagger_ui_oauth2_redirect_url,
        )
        if settings is not None and auth_required(settings) and route_path(scope) in documents:
            token = credential(headers)
            if authenticate(settings, token) is None:
                return 401, TOKEN_REQUIRED if not token else UNKNOWN_TOKEN
        return None


def host_name(host: str | None) -> str | None:
    """The name in a Host header, lower case, without its port or IPv6 brackets."""
    if host is None:
        return None
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].partition("]")[0]
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() and ":" not in name else host


def route_path(scope: Scope) -> str:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


async def logged(app: Any, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer, then log one access line: method, path, status, duration, client."""
    started = time.perf_counter()
    status = 0

    async def send_noting(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    try:
        await app(scope, receive, send_noting)
    finally:
        client = scope.get("client")
        fields = {
            "method": scope["method"],
            "path": scope["path"],
            "status": status or None,
            "duration_ms": round((time.perf_counter() - started) * 1000, 3),
            "client": f"{client[0]}:{client[1]}" if client else None,
        }
        ACCESS.info("request", extra={"fields": fields})


# The answers' own headers a page may read (CORS): a proxied or forked run's id, where a
# fork went, whether an agent's error was relayed, an unexpected error's id.
EXPOSED_HEADERS = [
    "x-recorder-run-id",
    "x-recorder-thread-id",
    "x-recorder-fork-strategy",
    "x-recorder-relayed",
    "x-error-id",
]


def proxied_agent(scope: Scope) -> str | None:
    """NAME when the request is for ``/agents/NAME`` (the proxy), else None."""
    path = route_path(scope)
    if not path.startswith("/agents/"):
        return None
    name = path[8:].removesuffix("/")
    return name if name and "/" not in name else None


def served(settings: Settings) -> Settings:
    """The settings as the server runs with them: with ``demo_agent``, the built-in demo
    agent (mounted at ``/demo-agent/``) is the agent ``demo``."""
    if settings.demo_agent and "demo" not in settings.agents:  # (``recorder demo``: as given)
        local = AgentConfig(url=f"http://{_local(settings)}/demo-agent/")
        return settings.model_copy(update={"agents": {**settings.agents, "demo": local}})
    return settings


def create_app(
    settings: Settings | None = None,
    *,
    store: EventStore | None = None,
    runtime: Runtime | None = None,
) -> RecorderApp:
    """The app; its ``Runtime`` started with the server (or ``runtime``, started already:
    ``recorder serve`` starts it first, so that what stops a start is one line, not a
    server's traceback), closed when the server stops."""
    settings = served(settings or Settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        started = runtime if runtime is not None else await Runtime.start(settings, store)
        app.state.runtime = started
        SERVER.info("recorder started", extra={"fields": started_fields(started)})
        try:
            yield
        finally:
            live = len(started.proxy.active)
            await started.close()
            SERVER.info("recorder stopped", extra={"fields": {"live_runs_closed": live}})

    app = RecorderApp(
        title="agui-recorder",
        version=__version__,
        description="Records AG-UI agent traffic; history, replay, resume and fork.",
        lifespan=lifespan,
    )
    app.access_log = settings.access_log
    app.allowed_hosts = allowed_hosts(settings)
    app.settings = settings
    if settings.cors_origins:
        # Preflights are answered here; every answer (the proxy's too) names the origin.
        app.cors = CORSMiddleware(
            app._answer,
            allow_origins=settings.cors_origins,
            allow_methods=["GET", "POST", "PATCH", "PUT", "DELETE"],
            allow_headers=["*"],
            expose_headers=EXPOSED_HEADERS,
            max_age=600,
        )
    install_error_handlers(app)
    app.include_router(agents.router)
    app.include_router(threads.router)
    app.include_router(runs.router)
    app.include_router(transfer.router)
    app.include_router(audit.router)
    app.include_router(search.router)
    app.include_router(annotate.router)
    app.include_router(diff.router)
    app.include_router(web.router)
    app.include_router(metrics.router)

    @app.get(
        "/healthz",
        tags=["health"],
        response_model=Health,
        response_class=JSON,
        responses={503: {"model": ErrorDetail, "description": "the database is unavailable"}},
    )
    async def healthz() -> JSON:
        runtime: Runtime = app.state.runtime
        health = {"ok": True, "version": __version__, "activeRuns": len(runtime.proxy.active)}
        journal = runtime.journal
        if journal is not None and journal.degraded:
            # Up, and recording: what it records is durable in the journal meanwhile.
            return JSON({**health, "status": "degraded", "journal": journal.health()})
        # A database that stops answering (paused, a network partition) must not hang the
        # probe: past the store's deadline it is unavailable.
        await within(runtime.store.max_position(), runtime.settings.store_deadline)
        return JSON({**health, "status": "ok"})

    @app.head("/healthz", include_in_schema=False)
    async def healthz_head() -> Response:
        """What many uptime probes send: the status of ``GET /healthz``, without its body."""
        answer = await healthz()
        return Response(status_code=answer.status_code, media_type="application/json")

    document_proxy(app)
    if settings.demo_agent:
        from recorder.demo_agent import create_demo_app

        app.mount("/demo-agent", create_demo_app())
    return app


def started_fields(runtime: Runtime) -> dict[str, Any]:
    settings = runtime.settings
    metrics_at = None if runtime.metrics is None else settings.metrics_address or "/metrics"
    return {
        "version": __version__,
        "database": shown_url(settings.db),
        "agents": ",".join(sorted(settings.agents)) or None,
        "durability": settings.durability,
        "metrics": metrics_at,
        "traces": settings.otel_endpoint,
        "owner": runtime.owner,
    }


def document_proxy(app: FastAPI) -> None:
    """Add the bare proxy endpoint to the OpenAPI document FastAPI builds from its routes,
    and document every error answer as what it is: an ``ErrorDetail`` in JSON (FastAPI
    would list it under a streaming route's own media type)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()  # FastAPI keeps this very dict as app.openapi_schema
        schema["paths"].setdefault("/agents/{name}", {})["post"] = OPENAPI
        for operations in schema["paths"].values():
            for operation in operations.values():
                _errors_as_json(operation["responses"])
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


_ERROR_CONTENT = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorDetail"}}}


def _errors_as_json(responses: dict[str, dict[str, Any]]) -> None:
    for code, answer in list(responses.items()):
        if code[:1] in ("4", "5"):
            responses[code] = {**answer, "content": _ERROR_CONTENT}
        for media in answer.get("content", {}).values():
            media.setdefault("schema", {"type": "string"})  # a stream: text


def _local(settings: Settings) -> str:
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    return f"{host}:{settings.port}"


# Query parameters holding text to find, where a NUL is one more character to look for.
_SEARCHED_TEXT = frozenset({"q"})


def nul_parameter(scope: Scope) -> str | None:
    """The first query parameter, searched text aside, whose name or value holds a NUL."""
    query: bytes = scope.get("query_string", b"")
    if b"%00" not in query and b"\x00" not in query:
        return None
    for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if name not in _SEARCHED_TEXT and ("\x00" in value or "\x00" in name):
            return name
    return None
