"""Dependencies and the one place errors become HTTP status codes.

An error the recorder cannot explain (a bug, a database error of no known kind) answers
500 with an error id, and logs one line with that id and the traceback: the answer says
nothing more, the log says everything.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from recorder.errors import (
    BodyTooLarge,
    Conflict,
    Forbidden,
    InputError,
    NotFound,
    RecorderError,
    RunClosed,
    RunNotFound,
    StoreUnavailable,
    ThreadNotFound,
    TooManyRuns,
    Unauthenticated,
)
from recorder.runtime import Runtime
from recorder.telemetry.logs import API, new_error_id


async def get_runtime(request: Request) -> Runtime:
    # (async: FastAPI calls a plain function's dependency on a worker thread, a hop each
    # way per request for a dictionary lookup)
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]


TOKEN_REQUIRED = "an API token is required (Authorization: Bearer TOKEN)"
CHALLENGE = {"www-authenticate": "Bearer"}  # what a 401 asks for (RFC 6750)


_STATUS: list[tuple[type[RecorderError], int]] = [
    (NotFound, 404),
    (Unauthenticated, 401),
    (Forbidden, 403),
    (BodyTooLarge, 413),
    (InputError, 422),
    (Conflict, 409),
    (RunClosed, 409),
    (TooManyRuns, 503),
    (StoreUnavailable, 503),
]


def status_for(exc: BaseException) -> int:
    return next((code for kind, code in _STATUS if isinstance(exc, kind)), 500)


TOO_DEEP = "a JSON value is nested too deeply to be handled (hundreds of levels)"

ANSWERED = "_recorder_error_id"  # set on an exception once its 500 was answered and logged


def internal_error(exc: BaseException, method: str, path: str) -> dict[str, Any]:
    """Log ``exc`` with a new error id; the body of its 500 answer."""
    error_id = new_error_id()
    fields = {"error_id": error_id, "method": method, "path": path, "error": type(exc).__name__}
    API.error("internal error", extra={"fields": fields}, exc_info=exc)
    with contextlib.suppress(AttributeError):  # (one without a __dict__ is logged all the same)
        setattr(exc, ANSWERED, error_id)
    detail = f"internal error (id {error_id}); the recorder's log has the details"
    return {"detail": detail, "errorId": error_id}


def error_response(
    exc: BaseException, runtime: Runtime | None, method: str, path: str
) -> JSONResponse:
    """The answer to ``exc``, raised while answering ``method path``: the API's routes and
    its bare endpoints (``recorder.api.state_endpoint``) answer every error through here."""
    if isinstance(exc, RecursionError):
        # JSON nested deeper than Python's recursion allows (a state 1000 levels deep,
        # say): the request's fault, not the recorder's.
        return JSONResponse({"detail": TOO_DEEP}, status_code=422)
    status = status_for(exc)
    if status == 500:  # not one the recorder can explain: logged with an id
        body = internal_error(exc, method, path)
        return JSONResponse(body, status_code=500, headers={"x-error-id": body["errorId"]})
    if isinstance(exc, (RunNotFound, ThreadNotFound)) and _journaling(runtime):
        # It may be one of the runs held in the journal: not knowable until replayed.
        detail = (
            f"{exc}: the database has yet to take the writes the recorder holds in its "
            "journal (a database outage); retry once /healthz reports ok"
        )
        return JSONResponse({"detail": detail}, status_code=503, headers={"retry-after": "1"})
    headers = CHALLENGE if status == 401 else None
    return JSONResponse({"detail": str(exc)}, status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Every error answers ``{"detail": "one sentence"}`` (``ErrorDetail``), parameters
    FastAPI rejects included; a 500 also carries ``errorId``, as does its log line."""

    async def handle(request: Request, exc: Exception) -> JSONResponse:
        runtime: Runtime | None = getattr(request.app.state, "runtime", None)
        return error_response(exc, runtime, request.method, request.url.path)

    async def invalid(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return JSONResponse({"detail": explain(exc)}, status_code=422)

    async def http_error(_request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if isinstance(exc.__cause__, RecursionError):
            # FastAPI's own body parsing, of JSON nested past Python's recursion: the
            # request's fault, answered as the proxy and the import answer it.
            return JSONResponse({"detail": TOO_DEEP}, status_code=422)
        if exc.status_code in (204, 304):
            return Response(status_code=exc.status_code, headers=exc.headers)
        body = {"detail": exc.detail}
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RecorderError, handle)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(RecursionError, handle)
    app.add_exception_handler(Exception, handle)


def _journaling(runtime: Runtime | None) -> bool:
    """The recorder holds writes in its journal that the database has yet to take."""
    return runtime is not None and runtime.journal_holds_writes


def explain(exc: RequestValidationError) -> str:
    """FastAPI's list of problems as one sentence (the value given is not echoed back)."""
    problems = []
    for error in exc.errors():
        where, *path = [str(part) for part in error.get("loc", ())] or ["request"]
        name = ".".join(path)
        subject = f"{where} {name!r}" if name else where
        problems.append(f"{subject}: {error.get('msg', 'invalid')}")
    return "; ".join(problems)
