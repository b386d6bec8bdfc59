"""Who is asking, and what they may see and do: the one place requests are authenticated.

A request names its token with ``Authorization: Bearer TOKEN``, in that header only (a
token in a URL ends up in logs and browser history), or ``X-Recorder-Token`` on the proxy
endpoint, so that the client's own ``Authorization`` can go on to the agent. The token is
the full-access ``api_token`` or one of the named ``tokens`` (kept as hashes); either way
the request gets a ``Principal``, kept in the ASGI scope's state (``principal_of``) for
every handler that needs to know who.

With no token configured at all the recorder is open, as it always was: every request is
the ``OPEN`` principal (no name, every scope, every agent).

Scopes (``recorder.config.GRANTS``): ``read`` the history (threads, runs, events, streams,
export, connect), ``run`` a proxied run, ``fork`` (reads and runs too), ``admin`` (all of
it: import, metrics and every administrative action). A token limited to agents sees only
threads whose every run was recorded through one of them: the others are not found (404,
as an id that does not exist), nor listed, nor searched, nor exported.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from starlette.datastructures import Headers
from starlette.types import Scope

from recorder.config import GRANTS, SCOPES, Settings, hash_token
from recorder.errors import Forbidden, RunNotFound, ThreadNotFound, Unauthenticated
from recorder.runtime import Runtime
from recorder.store import Run, Thread

TOKEN_HEADER = "x-recorder-token"


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller. ``name``: the token's name (``api_token`` for the
    full-access token; None when the recorder asks for no token). ``agents``: None, every
    agent; else only these."""

    name: str | None
    scopes: frozenset[str]
    agents: tuple[str, ...] | None = None

    @property
    def actor(self) -> str:
        """Who the audit log says acted: the token's name, or "anonymous"."""
        return self.name or "anonymous"

    def can(self, scope: str) -> bool:
        return scope in self.scopes

    def sees(self, agent: str | None) -> bool:
        return self.agents is None or (agent is not None and agent in self.agents)

    def as_record(self) -> dict[str, Any]:
        """Who, as an audit record keeps it."""
        return {
            "token": self.name,
            "scopes": sorted(self.scopes),
            "agents": None if self.agents is None else list(self.agents),
        }


OPEN = Principal(None, frozenset(SCOPES))
UNKNOWN_TOKEN = "the API token is not one this recorder knows"
FULL_ACCESS = "api_token"


def auth_required(settings: Settings) -> bool:
    return bool(settings.api_token) or bool(settings.tokens)


def authenticate(settings: Settings, token: str) -> Principal | None:
    """The principal ``token`` stands for; None when it is none the recorder knows."""
    if not token:
        return None
    if settings.api_token and hmac.compare_digest(token.encode(), settings.api_token.encode()):
        return Principal(FULL_ACCESS, frozenset(SCOPES), None)
    digest = hash_token(token).encode()
    found: Principal | None = None
    for name, config in settings.tokens.items():  # every hash compared: no early exit
        if hmac.compare_digest(digest, config.hash.encode()) and found is None:
            scopes = frozenset().union(*(GRANTS[s] for s in config.scopes))
            found = Principal(name, scopes, config.agents)
    return found


def bearer(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer TOKEN`` header ("" for none)."""
    auth = authorization or ""
    return auth[7:].strip() if auth[:7].lower() == "bearer " else ""


def credential(headers: Headers | Mapping[str, str]) -> str:
    """The token a request carries ("" for none): X-Recorder-Token, or a Bearer header."""
    given = headers.get(TOKEN_HEADER)
    return given.strip() if given else bearer(headers.get("authorization"))


def principal_for(settings: Settings, scope: Scope) -> Principal:
    """Authenticate the request of ``scope`` once; the answer is kept in its state."""
    state = scope.setdefault("state", {})
    known = state.get("principal")
    if isinstance(known, Principal):
        return known
    if not auth_required(settings):
        principal = OPEN
    else:
        token = credential(Headers(scope=scope))
        found = authenticate(settings, token)
        if found is None:
            raise Unauthenticated(
                "an API token is required (Authorization: Bearer TOKEN)"
                if not token
                else UNKNOWN_TOKEN
            )
        principal = found
    state["principal"] = principal
    return principal


async def principal_of(request: Request) -> Principal:
    """The request's principal (authenticating it if no dependency has yet). A coroutine,
    as the other dependencies are: FastAPI runs a plain function on a worker thread."""
    return principal_for(request.app.state.runtime.settings, request.scope)


def require(scope: str) -> Callable[[Request], Awaitable[Principal]]:
    """A dependency: the request's principal, which must hold ``scope``."""

    async def dependency(request: Request) -> Principal:
        principal = principal_for(request.app.state.runtime.settings, request.scope)
        check_scope(principal, scope)
        return principal

    dependency.__name__ = f"require_{scope}"
    return dependency


def check_scope(principal: Principal, scope: str) -> None:
    if not principal.can(scope):
        raise Forbidden(f"token {principal.name!r} does not have the {scope!r} scope")


def check_agent(principal: Principal, agent: str) -> None:
    if not principal.sees(agent):
        raise Forbidden(f"token {principal.name!r} is not allowed agent {agent!r}")


def check_unlimited(principal: Principal, what: str) -> None:
    if principal.agents is not None:
        raise Forbidden(f"token {principal.name!r} is limited to some agents: not for {what}")


PrincipalDep = Annotated[Principal, Depends(principal_of)]
ReadDep = Depends(require("read"))
ForkDep = Depends(require("fork"))
AdminDep = Depends(require("admin"))


async def visible_thread(runtime: Runtime, principal: Principal, thread_id: str) -> Thread | None:
    """``ThreadNotFound`` for a thread the principal may not see (as for one that does not
    exist); the thread when it was read for the check, None when no check was needed."""
    if principal.agents is None:
        return None
    thread = await runtime.store.get_thread(thread_id)
    if not principal.sees(thread.agent):
        raise ThreadNotFound(thread_id)
    runs = await runtime.store.list_runs(thread_id)
    if not all(principal.sees(run.agent) for run in runs):
        raise ThreadNotFound(thread_id)
    return thread


async def visible_run(runtime: Runtime, principal: Principal, run_id: str) -> Run | None:
    """``RunNotFound`` for a run of a thread the principal may not see."""
    if principal.agents is None:
        return None
    run = await runtime.store.get_run(run_id)
    try:
        await visible_thread(runtime, principal, run.thread_id)
    except ThreadNotFound:
        raise RunNotFound(run_id) from None
    return run


def without_recorder_token(settings: Settings, headers: Mapping[str, str]) -> Mapping[str, str]:
    """``headers`` without the recorder's own credentials, for any agent (over HTTP or in
    process): ``X-Recorder-Token`` always, and an ``Authorization`` that carries a token of
    this recorder's (the API token or a named one, whatever its case and spacing). A client
    that sends one to the proxy means it for the recorder, never for the agent, which it
    would let read every thread; the agent's own ``Authorization`` goes on."""
    token = bearer(headers.get("authorization"))
    known = authenticate(settings, token) if token and auth_required(settings) else None
    drop = {TOKEN_HEADER} if known is None else {TOKEN_HEADER, "authorization"}
    return {k: v for k, v in headers.items() if k.lower() not in drop}
