"""Export and import: threads as JSONL (runs, inputs, events), byte-exact, idempotent."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from recorder.api.access import (
    AdminDep,
    PrincipalDep,
    ReadDep,
    check_unlimited,
    visible_thread,
)
from recorder.api.deps import RuntimeDep
from recorder.api.views import ERRORS, JSON, JSONLines, stream_doc
from recorder.models import ImportReport
from recorder.timetravel.audit import audited
from recorder.timetravel.transfer import check_threads, export_lines, import_lines, split_lines
from recorder.timetravel.views import import_view

router = APIRouter(tags=["transfer"], dependencies=[ReadDep], responses=ERRORS)

JSONL = "application/x-ndjson"


@router.get(
    "/export",
    response_class=JSONLines,
    responses=stream_doc("one line per run, each followed by its events", JSONL),
)
async def export(
    runtime: RuntimeDep,
    principal: PrincipalDep,
    threadId: Annotated[list[str] | None, Query(description="threads (default: all)")] = None,
) -> JSONLines:
    ids = threadId or []
    await check_threads(runtime.store, ids)
    for thread_id in ids:
        await visible_thread(runtime, principal, thread_id)
    if not ids:
        # The database asked once before the answer's head: one that is down is a 503,
        # not a 200 whose body breaks off at its first read.
        await runtime.store.max_position()
    return JSONLines(export_lines(runtime.store, ids, principal.agents))


@router.post(
    "/import",
    dependencies=[AdminDep],
    response_model=ImportReport,
    response_class=JSON,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {JSONL: {"schema": {"type": "string", "format": "binary"}}},
        }
    },
)
async def import_(request: Request, runtime: RuntimeDep, principal: PrincipalDep) -> JSON:
    """Read an export (as `GET /export` writes it): runs already present take only the
    events they lack, so importing twice adds nothing. Not for a token limited to agents:
    a file may hold any agent's threads and annotations."""
    check_unlimited(principal, "an import")
    async with audited(runtime.store, principal.actor, "import", None) as noted:
        report = await import_lines(
            runtime.store,
            split_lines(request.stream()),
            runtime.proxy.redactor,
            owner=runtime.owner,
        )
        noted.update(import_view(report))
    return JSON(import_view(report))
