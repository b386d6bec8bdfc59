"""Threads: list, one thread with its tree of runs, its state, its stream."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from recorder.api.deps import RuntimeDep, TokenDep
from recorder.api.proxy_endpoint import SSE_HEADERS
from recorder.api.views import JSON, run_tree, thread_view
from recorder.errors import InputError
from recorder.store import ThreadFilter
from recorder.store.model import STATUSES
from recorder.timetravel.replay import ThreadStream

router = APIRouter(tags=["threads"], dependencies=[TokenDep])


def _time(value: str | None, name: str) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(value).timestamp()
    except ValueError as exc:
        raise InputError(
            f"{name} must be an ISO-8601 time or epoch seconds, got {value!r}"
        ) from exc


@router.get("/threads")
async def list_threads(
    runtime: RuntimeDep,
    agent: str | None = None,
    status: str | None = None,
    since: str | None = None,
    until: str | None = None,
    q: str | None = Query(None, description="text in the recorded messages"),
    limit: int = Query(50, ge=1, le=500),
    cursor: str | None = None,
) -> dict[str, Any]:
    if status is not None and status not in STATUSES:
        raise InputError(f"status must be one of {', '.join(STATUSES)}")
    filters = ThreadFilter(agent, status, _time(since, "since"), _time(until, "until"), q)
    page = await runtime.store.list_threads(filters, limit=limit, cursor=cursor)
    return {"threads": [thread_view(t) for t in page.items], "nextCursor": page.cursor}


@router.get("/threads/{thread_id}")
async def get_thread(thread_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    thread = await runtime.store.get_thread(thread_id)
    runs = await runtime.store.list_runs(thread_id)
    return {**thread_view(thread), "runs": run_tree(runs)}


@router.get("/threads/{thread_id}/state", response_class=JSON)
async def thread_state(
    thread_id: str,
    runtime: RuntimeDep,
    runId: str | None = None,
    seq: int | None = Query(None, ge=-1),
) -> JSON:
    thread = await runtime.store.get_thread(thread_id)
    run_id = runId or thread.latest_run_id
    if run_id is None:
        empty: dict[str, Any] = {
            "messages": [],
            "state": {},
            "pendingInterrupts": [],
            "problems": [],
        }
        return JSON({"threadId": thread_id, "runId": None, **empty})
    run = await runtime.store.get_run(run_id)
    if run.thread_id != thread_id:
        raise InputError(f"run {run_id!r} is not in thread {thread_id!r}")
    at = await runtime.history.project(run, seq)
    return JSON({"threadId": thread_id, "runId": run_id, "seq": seq, **at.to_json()})


@router.get("/threads/{thread_id}/stream", responses={200: {"content": {"text/event-stream": {}}}})
async def thread_stream(
    thread_id: str,
    runtime: RuntimeDep,
    compact: bool = False,
    live: bool = True,
) -> StreamingResponse:
    await runtime.store.get_thread(thread_id)
    stream = ThreadStream(runtime.store, runtime.history, live=live)
    return StreamingResponse(
        stream.frames(thread_id, compact=compact),
        media_type="text/event-stream",
        headers=SSE_HEADERS,
    )
