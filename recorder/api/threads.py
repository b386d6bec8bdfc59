"""Threads: list, one thread with its tree of runs, its state, its history, its stream."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query

from recorder.api.access import PrincipalDep, ReadDep, visible_run, visible_thread
from recorder.api.deps import RuntimeDep
from recorder.api.views import ERRORS, JSON, SSE_HEADERS, EventStream, stream_doc
from recorder.models import State, ThreadDetail, ThreadHistory, ThreadPage
from recorder.timetravel import views
from recorder.timetravel.annotating import parse_tags
from recorder.timetravel.replay import ThreadStream

router = APIRouter(tags=["threads"], dependencies=[ReadDep], responses=ERRORS)


@router.get("/threads", response_model=ThreadPage, response_class=JSON)
async def list_threads(
    runtime: RuntimeDep,
    principal: PrincipalDep,
    agent: str | None = None,
    status: str | None = None,
    since: str | None = Query(None, description="ISO-8601 time or epoch seconds"),
    until: str | None = Query(None, description="ISO-8601 time or epoch seconds"),
    q: str | None = Query(None, description="text in the recorded messages"),
    limit: int = Query(50, description="1 to 500"),
    cursor: str | None = None,
    tag: Annotated[
        list[str] | None,
        Query(description="KEY:VALUE, on the thread or one of its runs (repeat: all of them)"),
    ] = None,
) -> JSON:
    page = await views.list_threads(
        runtime.store,
        agent=agent,
        status=status,
        since=since,
        until=until,
        text=q,
        limit=limit,
        cursor=cursor,
        tags=parse_tags(tag),
        agents=principal.agents,
    )
    return JSON(page)


@router.get("/threads/{thread_id}", response_model=ThreadDetail, response_class=JSON)
async def get_thread(thread_id: str, runtime: RuntimeDep, principal: PrincipalDep) -> JSON:
    await visible_thread(runtime, principal, thread_id)
    detail = await views.thread_detail(runtime.store, thread_id)
    detail["forks"] = [f for f in detail["forks"] if principal.sees(f["agent"])]
    return JSON(detail)


@router.get("/threads/{thread_id}/state", response_model=State, response_class=JSON)
async def thread_state(
    thread_id: str,
    runtime: RuntimeDep,
    principal: PrincipalDep,
    runId: str | None = Query(None, description="a run of this thread (default: the latest)"),
    seq: int | None = Query(None, description="after this event (-1: before the first)"),
) -> JSON:
    await visible_thread(runtime, principal, thread_id)
    if runId is not None:  # another thread's run, hidden: as for one that does not exist
        await visible_run(runtime, principal, runId)
    body = await views.thread_state_body(
        runtime.store, runtime.history, thread_id, run_id=runId, seq=seq
    )
    return JSON(body)


@router.get("/threads/{thread_id}/history", response_model=ThreadHistory, response_class=JSON)
async def thread_history(
    thread_id: str,
    runtime: RuntimeDep,
    principal: PrincipalDep,
    limit: int = Query(100, description="1 to 1000"),
) -> JSON:
    """The thread at every run boundary (each run's start and end), newest first."""
    await visible_thread(runtime, principal, thread_id)
    return JSON(await views.thread_history(runtime.store, runtime.history, thread_id, limit=limit))


@router.get(
    "/threads/{thread_id}/stream",
    response_class=EventStream,
    responses=stream_doc("the thread's history as one AG-UI stream, then its live run"),
)
async def thread_stream(
    thread_id: str,
    runtime: RuntimeDep,
    principal: PrincipalDep,
    compact: bool = Query(False, description="one synthetic run holding only snapshots"),
    live: bool = True,
    last_event_id: str | None = Header(
        None, description="resume after this frame (its `id:`, `<runId>:<seq>`)"
    ),
) -> EventStream:
    await runtime.store.get_thread(thread_id)
    await visible_thread(runtime, principal, thread_id)
    after = views.frame_id(last_event_id) if last_event_id else None
    stream = ThreadStream(runtime.store, runtime.history, live=live)
    frames = stream.frames(thread_id, compact=compact, after=after)
    response = EventStream(frames, headers=SSE_HEADERS)
    response.write_timeout = runtime.settings.client_write_timeout
    return response
