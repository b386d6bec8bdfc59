"""Dependencies and the one place errors become HTTP status codes."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from recorder.errors import (
    BodyTooLarge,
    Conflict,
    InputError,
    NotFound,
    RecorderError,
    RunClosed,
    StoreUnavailable,
    TooManyRuns,
)
from recorder.runtime import Runtime


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


def require_token(request: Request) -> None:
    """With an API token configured, every endpoint but the proxy and /healthz needs it."""
    token = request.app.state.runtime.settings.api_token
    if not token:
        return
    given = request.headers.get("authorization", "")
    candidate = (
        given[7:] if given.lower().startswith("bearer ") else request.query_params.get("token", "")
    )
    if not hmac.compare_digest(candidate.encode(), token.encode()):
        raise HTTPException(401, "an API token is required (Authorization: Bearer TOKEN)")


TokenDep = Depends(require_token)

_STATUS: list[tuple[type[RecorderError], int]] = [
    (NotFound, 404),
    (BodyTooLarge, 413),
    (InputError, 422),
    (Conflict, 409),
    (RunClosed, 409),
    (TooManyRuns, 503),
    (StoreUnavailable, 503),
]


def status_for(exc: BaseException) -> int:
    return next((code for kind, code in _STATUS if isinstance(exc, kind)), 500)


def install_error_handlers(app: FastAPI) -> None:
    """Every error answers ``{"detail": "one sentence"}`` (``ErrorDetail``), parameters
    FastAPI rejects included."""

    async def handle(_request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=status_for(exc))

    async def invalid(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return JSONResponse({"detail": explain(exc)}, status_code=422)

    app.add_exception_handler(RecorderError, handle)
    app.add_exception_handler(RequestValidationError, invalid)


def explain(exc: RequestValidationError) -> str:
    """FastAPI's list of problems as one sentence (the value given is not echoed back)."""
    problems = []
    for error in exc.errors():
        where, *path = [str(part) for part in error.get("loc", ())] or ["request"]
        name = ".".join(path)
        subject = f"{where} {name!r}" if name else where
        problems.append(f"{subject}: {error.get('msg', 'invalid')}")
    return "; ".join(problems)
