"""The proxy and connect endpoints, and the list of agents (configured, and in process)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response

from recorder.api.access import PrincipalDep, ReadDep, check_agent, visible_thread
from recorder.api.deps import RuntimeDep
from recorder.api.proxy_endpoint import posts_json, read_body
from recorder.api.views import ERRORS, JSON, SSE_HEADERS, EventStream, stream_doc
from recorder.config import DEFAULT_FORK_STRATEGY, ForkStrategy
from recorder.errors import ThreadNotFound
from recorder.models import AgentList, ErrorDetail
from recorder.proxy.request import parse_run_input
from recorder.timetravel.replay import ThreadStream

router = APIRouter(tags=["agents"])


@router.get(
    "/agents",
    dependencies=[ReadDep],
    response_model=AgentList,
    response_class=JSON,
    responses=ERRORS,
)
async def list_agents(runtime: RuntimeDep, principal: PrincipalDep) -> JSON:
    """The agents this recorder reaches: the configured ones and those served by this very
    process (``recorder.asgi``), each with the strategy a fork of its runs takes by default
    (an in-process agent's is its configured one if it is configured too, as for forks)."""
    forks: dict[str, ForkStrategy] = {
        name: agent.fork for name, agent in runtime.settings.agents.items()
    }
    for name in runtime.proxy.local:
        forks.setdefault(name, DEFAULT_FORK_STRATEGY)
    names = [name for name in sorted(forks) if principal.sees(name)]
    return JSON({"agents": [{"name": name, "fork": forks[name]} for name in names]})


@router.post(
    "/agents/{name}/connect",
    dependencies=[ReadDep],
    summary="The thread's history as one stream, then its live run",
    response_class=EventStream,
    responses={
        **ERRORS,
        415: {"model": ErrorDetail, "description": "the body is not application/json"},
        **stream_doc("the thread's history as one AG-UI stream"),
    },
)
async def connect(
    name: str,
    request: Request,
    runtime: RuntimeDep,
    principal: PrincipalDep,
    compact: bool = Query(False, description="one synthetic run holding only snapshots"),
) -> Response:
    runtime.proxy.upstream(name)
    check_agent(principal, name)
    if not posts_json(request.headers.get("content-type")):
        raise HTTPException(415, "connect takes a RunAgentInput as application/json")
    limit = runtime.settings.max_body_bytes
    body = await read_body(request.scope, request.receive, limit) or b""  # (b"": client left)
    # Only the thread is needed: a client's connect input may carry any runId, or none.
    thread_id = parse_run_input(body, ids=("threadId",))["threadId"]
    try:
        await runtime.store.get_thread(thread_id)
        await visible_thread(runtime, principal, thread_id)
    except ThreadNotFound:
        # No history yet: an empty stream, which a client folds into nothing.
        return Response(b"", media_type="text/event-stream", headers=SSE_HEADERS)
    stream = ThreadStream(runtime.store, runtime.history)
    response = EventStream(stream.frames(thread_id, compact=compact), headers=SSE_HEADERS)
    response.write_timeout = runtime.settings.client_write_timeout
    return response
