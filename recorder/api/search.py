"""Search over recorded content, and rebuilding its index."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from recorder.api.access import AdminDep, PrincipalDep, ReadDep, check_unlimited
from recorder.api.deps import RuntimeDep
from recorder.api.views import ERRORS, JSON
from recorder.models import ReindexReport, SearchPage
from recorder.timetravel import search as answers
from recorder.timetravel.annotating import parse_tags

router = APIRouter(tags=["search"], responses=ERRORS)


@router.get("/search", response_model=SearchPage, response_class=JSON, dependencies=[ReadDep])
async def search(
    runtime: RuntimeDep,
    principal: PrincipalDep,
    q: str = Query("", description="words to find (all of them; literal unless syntax)"),
    syntax: bool = Query(False, description='query language: "a phrase", OR, -excluded, prefix*'),
    agent: str | None = None,
    kind: str | None = Query(None, description="message, tool_call, reasoning, error, input"),
    tool: str | None = Query(None, description="a tool call's name"),
    status: str | None = Query(None, description="the run's status"),
    errorCode: str | None = Query(None, description="a RUN_ERROR's code"),
    since: str | None = Query(None, description="ISO-8601 time or epoch seconds"),
    until: str | None = Query(None, description="ISO-8601 time or epoch seconds"),
    threadId: str | None = None,
    runId: str | None = None,
    tag: Annotated[
        list[str] | None,
        Query(description="KEY:VALUE, on the hit's thread or run (repeat: all of them)"),
    ] = None,
    limit: int = Query(20, description="1 to 100"),
    cursor: str | None = None,
) -> JSON:
    """Hits in messages, tool calls, reasoning, errors and posted input: best first, then
    newest; each names its thread, run and events, with a snippet and what matched."""
    page = await answers.search(
        runtime.store,
        text=q,
        syntax=syntax,
        agent=agent,
        kind=kind,
        tool=tool,
        status=status,
        error_code=errorCode,
        since=since,
        until=until,
        thread_id=threadId,
        run_id=runId,
        limit=limit,
        cursor=cursor,
        tags=parse_tags(tag),
        scope=principal.agents,
    )
    return JSON(page)


@router.post(
    "/search/reindex",
    response_model=ReindexReport,
    response_class=JSON,
    dependencies=[AdminDep],
)
async def reindex(runtime: RuntimeDep, principal: PrincipalDep) -> JSON:
    """Drop the search index and build it again from the log (every agent's: not for a
    token limited to agents)."""
    check_unlimited(principal, "rebuilding every agent's search index")
    return JSON({"runs": await runtime.indexer.reindex()})
