"""Runs: one run, its events, its state at a point, its stream, and forks from it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from recorder.api.agents import respond
from recorder.api.deps import RuntimeDep, TokenDep
from recorder.api.proxy_endpoint import SSE_HEADERS
from recorder.api.views import JSON, event_view, run_view
from recorder.errors import InputError
from recorder.timetravel.fork import ForkRequest, plan_fork
from recorder.timetravel.replay import stream_run
from recorder.wire.jsontext import dump

router = APIRouter(tags=["runs"], dependencies=[TokenDep])


@router.get("/runs/{run_id}", response_class=JSON)
async def get_run(run_id: str, runtime: RuntimeDep) -> JSON:
    return JSON(run_view(await runtime.store.get_run(run_id)))


@router.get("/runs/{run_id}/events", response_class=JSON)
async def run_events(
    run_id: str,
    runtime: RuntimeDep,
    afterSeq: int = Query(-1, ge=-1),
    limit: int = Query(1000, ge=1, le=10000),
) -> JSON:
    run = await runtime.store.get_run(run_id)
    events = await runtime.store.read_events(run_id, gt=afterSeq, limit=limit)
    more = bool(events) and events[-1].seq < run.event_count - 1
    return JSON(
        {
            "runId": run_id,
            "events": [event_view(e) for e in events],
            "nextAfterSeq": events[-1].seq if more else None,
        }
    )


@router.get("/runs/{run_id}/state", response_class=JSON)
async def run_state(run_id: str, runtime: RuntimeDep, seq: int | None = Query(None, ge=-1)) -> JSON:
    """Messages, state and pending interrupts after event ``seq`` (default: the end)."""
    run = await runtime.store.get_run(run_id)
    at = await runtime.history.project(run, seq)
    return JSON({"runId": run_id, "threadId": run.thread_id, "seq": seq, **at.to_json()})


@router.get("/runs/{run_id}/stream", responses={200: {"content": {"text/event-stream": {}}}})
async def run_stream(
    run_id: str,
    runtime: RuntimeDep,
    afterSeq: int | None = Query(None, ge=-1),
    live: bool = True,
    last_event_id: str | None = Header(None),
) -> StreamingResponse:
    await runtime.store.get_run(run_id)
    after = afterSeq
    if after is None and last_event_id:
        try:
            after = int(last_event_id.rsplit(":", 1)[-1])
        except ValueError as exc:
            raise InputError(f"Last-Event-ID must be a seq, got {last_event_id!r}") from exc
    chunks = stream_run(runtime.store, run_id, after_seq=-1 if after is None else after, live=live)
    return StreamingResponse(chunks, media_type="text/event-stream", headers=SSE_HEADERS)


class ForkBody(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    atSeq: int | None = Field(None, ge=-1, description="fork after this event (default: the end)")
    messages: list[dict[str, Any] | str] = Field(
        default_factory=list, description="messages to append (a string is a user message)"
    )
    state: Any = Field(None, description="replace the state at the point")
    runId: str | None = None
    threadId: str | None = Field(None, description="fork into a new thread")
    resume: list[dict[str, Any]] | None = None
    forwardedProps: Any = None
    dryRun: bool = Field(False, description="only return the RunAgentInput")


@router.post("/runs/{run_id}/fork", responses={200: {"content": {"text/event-stream": {}}}})
async def fork_run(run_id: str, body: ForkBody, request: Request, runtime: RuntimeDep) -> Response:
    fields = body.model_fields_set
    req = ForkRequest(
        at_seq=body.atSeq,
        messages=[m if isinstance(m, dict) else {"content": m} for m in body.messages],
        run_id=body.runId,
        thread_id=body.threadId,
        resume=body.resume,
        **({"state": body.state} if "state" in fields else {}),
        **({"forwarded_props": body.forwardedProps} if "forwardedProps" in fields else {}),
    )
    plan = await plan_fork(runtime.store, runtime.history, run_id, req)
    if body.dryRun:
        return Response(
            content=dump({"agent": plan.agent, "input": plan.input, "parentSeq": plan.parent_seq}),
            media_type="application/json",
        )
    result = await runtime.proxy.start(
        plan.agent, plan.body, request.headers, parent=(plan.parent_run_id, plan.parent_seq)
    )
    return respond(result)
