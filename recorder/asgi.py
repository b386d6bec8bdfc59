"""Recording an AG-UI endpoint served by this same process, with no network hop.

Wrap the ASGI app that serves the agent (built with the official SDK, Pydantic AI's
adapter, ``ag-ui-langgraph``, or by hand) and name its AG-UI endpoints::

    from recorder.asgi import RecordingMiddleware

    app = RecordingMiddleware(
        agent_app, agents={"support": "/agent"}, db="sqlite+aiosqlite:///recorder.db"
    )

A ``POST /agent`` (or ``/agent/``: the app is called at ``/agent``, the path given, where a
fork calls it) is then recorded as the proxy records a run of agent ``support``: the run
is committed before the app is called, each event is committed before the client gets it
(``durability``), the frames are stored byte for byte, lifecycle violations are noted, and
an app that fails, stalls or ends early gets its run closed with the recorder's RUN_ERROR.
The app is called directly (``recorder.proxy.inprocess``), with the client's own request
scope: the only cost added before the first event is the commit. An app that answers with
a redirect is not followed (the run's error says to give the agent the path the app serves
it at). Everything else goes to the app untouched.

The time-travel API (``recorder.api``) is served beside it under ``api_path``
(``/recorder`` by default; None: not served), sharing the same runtime and store, so that
``/recorder/threads``, forks (``POST /recorder/runs/{id}/fork``, which call the app in
process too) and the web timeline (``/recorder/``) work as on a standalone recorder;
``middleware.api`` is that app, to mount elsewhere instead.

The recorder starts and stops with the app's lifespan (uvicorn's default). Where there is
none (a test client without lifespan, an app mounted inside another), use
``async with middleware.running(): ...``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from recorder.api import RecorderApp, create_app
from recorder.api.proxy_endpoint import send_whole, serve_run
from recorder.config import Settings
from recorder.errors import ConnectFailed
from recorder.proxy.inprocess import AppAnswer, AppLeg
from recorder.runtime import Runtime
from recorder.store import EventStore

_NOT_STARTED = (
    b'{"detail": "the recorder has not started: serve the app with its lifespan on, '
    b'or enter RecordingMiddleware.running()"}'
)


class RecordingMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        agents: Mapping[str, str],
        db: str | None = None,
        settings: Settings | None = None,
        store: EventStore | None = None,
        api_path: str | None = "/recorder",
    ) -> None:
        """``agents``: agent name -> the path of its AG-UI endpoint in ``app``. ``db`` (or
        ``settings.db``) is the database, unless ``store`` is given."""
        settings = settings or Settings()
        if db is not None:
            settings = settings.model_copy(update={"db": db})
        self.app = app
        self.settings = settings
        self._store = store
        self._legs = {
            name: _AgentLeg(name, app, path, idle_timeout=settings.idle_timeout)
            for name, path in agents.items()
        }
        self._paths = {_route(path): name for name, path in agents.items()}
        self.api: RecorderApp = create_app(settings, store=store)
        if settings.allowed_hosts is None:
            # Served inside another app: that app's server decides the names it answers to
            # (the bind address in these settings is not the one clients use).
            self.api.allowed_hosts = None
        self._api_path = api_path.rstrip("/") if api_path else None
        self.runtime: Runtime | None = None

    # -- running ------------------------------------------------------------------------------

    async def start(self, state: dict[str, Any] | None = None) -> Runtime:
        """Open the store (migrating it) and start recording."""
        runtime = await Runtime.start(self.settings, self._store)
        for leg in self._legs.values():
            leg.state = state
        runtime.proxy.local.update(self._legs)
        self.api.state.runtime = runtime
        self.runtime = runtime
        return runtime

    async def close(self) -> None:
        """Close the runs being recorded, then the store."""
        runtime, self.runtime = self.runtime, None
        if runtime is not None:
            await runtime.close()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Runtime]:
        runtime = await self.start()
        try:
            yield runtime
        finally:
            await self.close()

    # -- ASGI ---------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        if scope["type"] == "http":
            path = _route(_route_path(scope))
            api = self._api_path
            if api is not None and (path == api or path.startswith(api + "/")):
                root = scope.get("root_path", "") + api
                await self.api({**scope, "root_path": root}, receive, send)
                return
            name = self._paths.get(path) if scope["method"] == "POST" else None
            if name is not None:
                await self._record(name, scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _record(self, name: str, scope: Scope, receive: Receive, send: Send) -> None:
        runtime = self.runtime
        if runtime is None:
            await send_whole(send, 503, _NOT_STARTED, "application/json")
            return
        agent = self._legs[name]
        # ``/agent/`` names the agent as ``/agent`` does: the app is called at the path the
        # agent was given (as a fork calls it), not at one it would redirect.
        leg = agent.for_request(_at_path(scope, agent.path))
        await serve_run(runtime, name, scope, receive, send, leg=leg)

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The app's lifespan, with the recorder started before the app's startup runs and
        closed after its shutdown."""

        async def receive_starting() -> Message:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.start(scope.get("state"))
            return message

        async def send_closing(message: Message) -> None:
            if message["type"] in ("lifespan.shutdown.complete", "lifespan.shutdown.failed"):
                await self.close()
            await send(message)

        await self.app(scope, receive_starting, send_closing)


class _AgentLeg(AppLeg):
    """The leg of one agent of the wrapped app: an answer that redirects is refused here,
    where the agent's name and path are known (the proxy's advice, to change the agent's
    URL, is for an agent over HTTP)."""

    def __init__(
        self,
        name: str,
        app: ASGIApp,
        path: str,
        *,
        idle_timeout: float,
        scope: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(app, path, idle_timeout=idle_timeout, scope=scope)
        self.name = name
        self._idle_timeout = idle_timeout

    def for_request(self, scope: Mapping[str, Any]) -> _AgentLeg:
        idle = self._idle_timeout
        return _AgentLeg(self.name, self.app, self.path, idle_timeout=idle, scope=scope)

    async def post(
        self, body: bytes, headers: Mapping[str, str], sent: Callable[[], None] | None = None
    ) -> AppAnswer:
        answer = await super().post(body, headers, sent)
        if not 300 <= answer.status < 400:
            return answer
        answer.close()
        where = answer.headers.get("location")
        raise ConnectFailed(
            f"the app answered HTTP {answer.status} at {self.path!r}, the path "
            f"RecordingMiddleware's agents give agent {self.name!r}: a redirect"
            + (f" to {where[:300]!r}" if where else "")
            + ", which is not followed; give the agent the path the app serves it at"
        )


def _at_path(scope: Scope, path: str) -> Scope:
    """``scope`` with its path ending as ``path`` does (its trailing slashes), when the
    request named the agent with other ones."""
    tail = path[len(path.rstrip("/")) :]
    full: str = scope["path"]
    if full.endswith(tail) and not full[: len(full) - len(tail)].endswith("/"):
        return scope
    moved = {**scope, "path": full.rstrip("/") + tail}
    raw = scope.get("raw_path")
    if raw is not None:
        moved["raw_path"] = bytes(raw).rstrip(b"/") + tail.encode()
    return moved


def _route_path(scope: Scope) -> str:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


def _route(path: str) -> str:
    return path.rstrip("/") or "/"
