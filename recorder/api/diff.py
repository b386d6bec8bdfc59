"""State diffs between two points of a run, or of two runs (across a fork)."""

from __future__ import annotations

from fastapi import APIRouter, Query

from recorder.api.access import PrincipalDep, ReadDep, visible_run
from recorder.api.deps import RuntimeDep
from recorder.api.views import ERRORS, JSON
from recorder.models import StateDiff
from recorder.timetravel.diff import diff

router = APIRouter(tags=["runs"], dependencies=[ReadDep], responses=ERRORS)


@router.get("/runs/{run_id}/diff", response_model=StateDiff, response_class=JSON)
async def run_diff(
    run_id: str,
    runtime: RuntimeDep,
    principal: PrincipalDep,
    from_seq: int = Query(-1, alias="from", description="after this event (-1: the start)"),
    to_seq: int | None = Query(None, alias="to", description="after this event (default: end)"),
    toRun: str | None = Query(None, description="the target point's run (default: this run)"),
    toSeq: int | None = Query(None, description="with toRun: after this event of it"),
) -> JSON:
    """The RFC 6902 patch from the state at one point to the state at another, and the
    messages added, removed and changed."""
    await visible_run(runtime, principal, run_id)
    if toRun is not None:
        await visible_run(runtime, principal, toRun)
    target_seq = toSeq if toRun is not None else to_seq
    answer = await diff(
        runtime.store, runtime.history, run_id, from_seq=from_seq, to_seq=target_seq, to_run=toRun
    )
    return JSON(answer)
