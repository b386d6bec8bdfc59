"""State diffs between two points of a run, or of two runs (across a fork)."""

from __future__ import annotations

from fastapi import APIRouter, Query

from recorder.api.access import PrincipalDep, ReadDep, visible_run
from recorder.api.deps import RuntimeDep
from recorder.api.views import ERRORS, JSON
from recorder.errors import InputError
from recorder.models import StateDiff
from recorder.timetravel.diff import diff

router = APIRouter(tags=["runs"], dependencies=[ReadDep], responses=ERRORS)


@router.get("/runs/{run_id}/diff", response_model=StateDiff, response_class=JSON)
async def run_diff(
    run_id: str,
    runtime: RuntimeDep,
    principal: PrincipalDep,
    from_seq: int = Query(-1, alias="from", description="after this event (-1: the start)"),
    to_seq: int | None = Query(
        None, alias="to", description="after this event of the target's run (default: its end)"
    ),
    toRun: str | None = Query(None, description="the target point's run (default: this run)"),
    toSeq: int | None = Query(None, description="the same as `to`"),
) -> JSON:
    """The RFC 6902 patch from the state at one point to the state at another, and the
    messages added, removed and changed."""
    if to_seq is not None and toSeq is not None and to_seq != toSeq:
        raise InputError(f"to ({to_seq}) and toSeq ({toSeq}) name two points: give one")
    await visible_run(runtime, principal, run_id)
    if toRun is not None:
        await visible_run(runtime, principal, toRun)
    target_seq = toSeq if toSeq is not None else to_seq
    answer = await diff(
        runtime.store, runtime.history, run_id, from_seq=from_seq, to_seq=target_seq, to_run=toRun
    )
    return JSON(answer)
