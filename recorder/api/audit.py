"""Governance: chain verification and receipts, the audit log, purges (admin)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from recorder.api.access import AdminDep, PrincipalDep, check_unlimited
from recorder.api.deps import RuntimeDep
from recorder.api.views import ERRORS, JSON
from recorder.errors import InputError
from recorder.models import AuditLog, ChainVerification, PurgeBody, PurgeResult, Receipt
from recorder.timetravel import audit, receipts


async def _unlimited(principal: PrincipalDep) -> None:
    """The chains, receipts, audit log and purges span every agent: an agent-limited
    token, even an admin one, gets none of them."""
    check_unlimited(principal, "the audit endpoints")


router = APIRouter(tags=["audit"], dependencies=[AdminDep, Depends(_unlimited)], responses=ERRORS)


@router.get("/audit/verify", response_model=ChainVerification, response_class=JSON)
async def verify_chains(
    runtime: RuntimeDep,
    threadId: Annotated[list[str] | None, Query(description="threads (default: all)")] = None,
    runId: Annotated[list[str] | None, Query(description="runs")] = None,
) -> JSON:
    """Recompute the hash chains of the threads and runs named (every thread when none
    are) and report every place they differ from what is stored; `ok` false then."""
    return JSON(await audit.verify(runtime.store, threadId or [], runId or []))


@router.post(
    "/audit/verify",
    response_model=ChainVerification,
    response_class=JSON,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Receipt"}}},
        }
    },
)
async def verify_receipt(request: Request, runtime: RuntimeDep) -> JSON:
    """Check the log against a receipt (as `GET /audit/receipt` gave it): unchanged up to
    it, purged threads excepted (their tombstones name them)."""
    body = receipts.read_receipt(await request.body())
    return JSON(await receipts.check_receipt(runtime.store, body, runtime.settings.audit_key))


@router.get("/audit/receipt", response_model=Receipt, response_class=JSON)
async def receipt(runtime: RuntimeDep) -> JSON:
    """The log's heads now, signed with the recorder's `audit_key` when it has one."""
    return JSON(await receipts.receipt(runtime.store, runtime.settings.audit_key))


@router.get("/audit/log", response_model=AuditLog, response_class=JSON)
async def audit_log(
    runtime: RuntimeDep,
    limit: int = Query(100, description="1 to 1000"),
    before: int | None = Query(None, description="actions with an id below this one"),
    action: str | None = Query(None, description="fork, import, purge, rewrite, ..."),
) -> JSON:
    """Every write and admin action, newest first: who, what, on what, when, how it ended."""
    return JSON(await audit.audit_log(runtime.store, limit=limit, before=before, action=action))


@router.post("/admin/purge", response_model=PurgeResult, response_class=JSON)
async def purge(body: PurgeBody, runtime: RuntimeDep, principal: PrincipalDep) -> JSON:
    """Delete threads with everything derived from them, leaving a tombstone (ids, counts,
    chain heads, when, by whom, why); `dryRun` lists what would go."""
    chosen = audit.selection(body.thread_ids, body.older_than, body.agent)
    result = await audit.purge(
        runtime.store,
        chosen,
        actor=principal.actor,
        reason=body.reason,
        dry_run=body.dry_run,
    )
    return JSON(result)


@router.post("/admin/retention", response_model=list[PurgeResult], response_class=JSON)
async def retention(
    runtime: RuntimeDep,
    dryRun: bool = Query(False, description="list what would go; delete nothing"),
) -> JSON:
    """One pass of the retention settings now (`serve` runs one every
    `retention_interval`): a purge per age, each with its tombstone; 422 when none is set."""
    settings = runtime.settings
    if settings.retention is None and not settings.retention_agents:
        raise InputError("no retention is set (retention, retention_agents)")
    return JSON(await audit.apply_retention(runtime.store, settings, dry_run=dryRun))
