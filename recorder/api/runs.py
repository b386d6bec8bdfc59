"""Runs: one run, its events, its state at a point, its check, its stream, forks from it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Header, Query
from fastapi.responses import Response

from recorder.api.access import (
    ForkDep,
    PrincipalDep,
    ReadDep,
    check_agent,
    visible_run,
)
from recorder.api.deps import RuntimeDep
from recorder.api.views import (
    ERRORS,
    JSON,
    SSE_HEADERS,
    EventStream,
    header_value,
    proxied_response,
    stream_doc,
)
from recorder.errors import InputError, NotFound
from recorder.models import (
    EventPage,
    ForkBody,
    ForkPlan,
    Run,
    RunRedactions,
    State,
    Verification,
)
from recorder.proxy.proxy import Relay
from recorder.timetravel import views
from recorder.timetravel.audit import audited
from recorder.timetravel.fork import fork_request, plan_fork
from recorder.timetravel.replay import stream_run

router = APIRouter(tags=["runs"], dependencies=[ReadDep], responses=ERRORS)

# Set on a fork's answer that is the agent's own (a non-2xx relayed), not the recorder's.
RELAYED = "x-recorder-relayed"
# Set on every fork's answer: the strategy it used and the thread the branch went to.
FORK_STRATEGY = "x-recorder-fork-strategy"
FORK_THREAD = "x-recorder-thread-id"


@router.get("/runs/{run_id}", response_model=Run, response_class=JSON)
async def get_run(run_id: str, runtime: RuntimeDep, principal: PrincipalDep) -> JSON:
    await visible_run(runtime, principal, run_id)
    return JSON(await views.run_detail(runtime.store, run_id))


@router.get("/runs/{run_id}/events", response_model=EventPage, response_class=JSON)
async def run_events(
    run_id: str,
    runtime: RuntimeDep,
    principal: PrincipalDep,
    afterSeq: int = Query(-1, description="-1 (from the first event) or more"),
    limit: int = Query(1000, description="1 to 10000"),
) -> JSON:
    await visible_run(runtime, principal, run_id)
    page = await views.events_page(runtime.store, run_id, after_seq=afterSeq, limit=limit)
    return JSON(page)


@router.get("/runs/{run_id}/state", response_model=State, response_class=JSON)
async def run_state(
    run_id: str,
    runtime: RuntimeDep,
    principal: PrincipalDep,
    seq: int | None = Query(None, description="after this event (-1: before the first)"),
) -> JSON:
    """Messages, state and pending interrupts after event ``seq`` (default: the end)."""
    await visible_run(runtime, principal, run_id)
    return JSON(await views.run_state_body(runtime.store, runtime.history, run_id, seq=seq))


@router.get("/runs/{run_id}/verify", response_model=Verification, response_class=JSON)
async def verify_run(run_id: str, runtime: RuntimeDep, principal: PrincipalDep) -> JSON:
    """The reference client's lifecycle checks over the run's recorded events."""
    await visible_run(runtime, principal, run_id)
    return JSON(await views.verify_run(runtime.store, run_id))


@router.get("/runs/{run_id}/redactions", response_model=RunRedactions, response_class=JSON)
async def run_redactions(run_id: str, runtime: RuntimeDep, principal: PrincipalDep) -> JSON:
    """What redaction did to the run's stored input (seq -1) and events: the rules that
    fired, and the keyed hash of each original when a redaction key is set."""
    await runtime.store.get_run(run_id)
    await visible_run(runtime, principal, run_id)
    return JSON(views.redactions_view(run_id, await runtime.store.list_redactions(run_id)))


@router.get(
    "/runs/{run_id}/stream",
    response_class=EventStream,
    responses=stream_doc("the run's recorded frames, `id: <seq>` each, then live ones"),
)
async def run_stream(
    run_id: str,
    runtime: RuntimeDep,
    principal: PrincipalDep,
    afterSeq: int | None = Query(None, description="resume after this seq"),
    live: bool = True,
    last_event_id: str | None = Header(
        None, description="resume after this frame (its `id:`); wins over `afterSeq`"
    ),
) -> EventStream:
    await runtime.store.get_run(run_id)
    await visible_run(runtime, principal, run_id)
    # An EventSource reconnects to the URL it opened, with the last id it saw: that id is
    # the newer point, whatever ``afterSeq`` the page first asked for.
    if last_event_id:
        # A run's frames are ``id: <seq>``; a thread stream's ``<runId>:<seq>`` is taken
        # for the run it names only (another run's seq is no point of this one).
        named, colon, seq = last_event_id.rpartition(":")
        if colon and named != run_id:
            raise InputError(
                f"Last-Event-ID {last_event_id[:60]!r} is a frame of run {named[:40]!r}, "
                f"not of {run_id[:40]!r}"
            )
        try:
            after = int(seq)
        except ValueError as exc:
            raise InputError(f"Last-Event-ID must be a seq, got {last_event_id[:40]!r}") from exc
        views.check_after_seq(after, "Last-Event-ID")
    elif afterSeq is not None:
        after = afterSeq
        views.check_after_seq(after)
    else:
        after = -1
    chunks = stream_run(runtime.store, run_id, after_seq=after, live=live)
    response = EventStream(chunks, headers=SSE_HEADERS)
    response.write_timeout = runtime.settings.client_write_timeout
    return response


@router.post(
    "/runs/{run_id}/fork",
    dependencies=[ForkDep],
    response_model=ForkPlan,
    response_class=JSON,
    responses={
        200: {
            "description": "the new run's events as recorded (the headers "
            f"`{FORK_STRATEGY}` and `{FORK_THREAD}` say where it went); with dryRun, its plan",
            "content": {"text/event-stream": {"schema": {"type": "string"}}},
        },
        409: {"description": "the new run's id, or the new thread's, is taken"},
    },
)
async def fork_run(
    run_id: str,
    runtime: RuntimeDep,
    principal: PrincipalDep,
    body: Annotated[ForkBody | None, Body()] = None,
) -> Response:
    """Fork a new run from a point of this one (or from the turn of an edited or regenerated
    message), into a new thread or on the parent's, by the fork's strategy. No body: a
    fork at the run's end, with every option as its default."""
    body = body if body is not None else ForkBody.model_validate({})
    agents = runtime.settings.agents
    await visible_run(runtime, principal, run_id)
    request = fork_request(body)
    limit = runtime.settings.max_body_bytes
    plan = await plan_fork(runtime.store, runtime.history, run_id, request, agents, limit)
    check_agent(principal, plan.agent)
    if body.dry_run:
        return JSON(views.plan_view(plan))
    if plan.agent not in agents and plan.agent not in runtime.proxy.local:
        raise NotFound(
            f"run {plan.parent_run_id!r} was recorded through agent {plan.agent!r}, whose URL "
            f"this recorder does not know: start it with --agent {plan.agent}=URL (or "
            f"RECORDER_AGENTS={plan.agent}=URL, or a config file)"
        )
    detail = {
        "runId": plan.input.get("runId"),
        "threadId": plan.thread_id,
        "strategy": plan.strategy,
    }
    # None of the caller's headers: they are meant for the recorder (its API token among
    # them). The agent gets its configured headers (``AgentConfig.headers``), and only those.
    async with audited(runtime.store, principal.actor, "fork", run_id, detail):
        result = await runtime.proxy.start(
            plan.agent,
            plan.body,
            {},  # a fork forwards none of the request's headers (the recorder's token neither)
            parent=(plan.parent_run_id, plan.parent_seq),
            new_thread=plan.strategy == "new-thread",
        )
    response = proxied_response(result)
    if isinstance(response, EventStream):
        response.write_timeout = runtime.settings.client_write_timeout
    if isinstance(result, Relay):
        response.headers[RELAYED] = "true"
    response.headers[FORK_STRATEGY] = plan.strategy
    response.headers[FORK_THREAD] = header_value(plan.thread_id).decode()
    return response
