"""Search answers, for the API and the CLI alike (see ``recorder.timetravel.views``)."""

from __future__ import annotations

from typing import Any

from recorder.errors import InputError
from recorder.models import RUN_STATUSES, SEARCH_KINDS
from recorder.store import EventStore, SearchFilter, SearchHit
from recorder.timetravel.views import moment, parse_time

MAX_QUERY_CHARS = 1000


def hit_view(hit: SearchHit) -> dict[str, Any]:
    doc = hit.doc
    return {
        "threadId": doc.thread_id,
        "runId": doc.run_id,
        "seqFrom": doc.seq_from,
        "seqTo": doc.seq_to,
        "kind": doc.kind,
        "snippet": hit.snippet,
        "highlights": [list(mark) for mark in hit.marks],
        "score": hit.score,
        "recordedAt": moment(doc.recorded_at),
        "agent": doc.agent,
        "messageId": doc.message_id,
        "role": doc.role,
        "toolName": doc.tool_name,
        "errorCode": doc.error_code,
    }


async def search(
    store: EventStore,
    *,
    text: str = "",
    syntax: bool = False,
    agent: str | None = None,
    kind: str | None = None,
    tool: str | None = None,
    status: str | None = None,
    error_code: str | None = None,
    since: str | None = None,
    until: str | None = None,
    thread_id: str | None = None,
    run_id: str | None = None,
    limit: int = 20,
    cursor: str | None = None,
    scope: tuple[str, ...] | None = None,
    tags: tuple[tuple[str, str], ...] = (),
) -> dict[str, Any]:
    """A page of hits; ``scope``, when given, the only agents whose runs may be found."""
    if len(text) > MAX_QUERY_CHARS:
        raise InputError(f"a search query may hold at most {MAX_QUERY_CHARS} characters")
    if not 1 <= limit <= 100:
        raise InputError(f"limit must be 1 to 100, got {limit}")
    if kind is not None and kind not in SEARCH_KINDS:
        raise InputError(f"kind must be one of {', '.join(SEARCH_KINDS)}")
    if status is not None and status not in RUN_STATUSES:
        raise InputError(f"status must be one of {', '.join(RUN_STATUSES)}")
    filters = SearchFilter(
        text=text.replace("\x00", ""),
        syntax=syntax,
        agents=scope,
        agent=agent,
        kind=kind,
        tool=tool,
        status=status,
        error_code=error_code,
        since=parse_time(since, "since"),
        until=parse_time(until, "until"),
        thread_id=thread_id,
        run_id=run_id,
        tags=tags,
    )
    page = await store.search(filters, limit=limit, cursor=cursor)
    return {"hits": [hit_view(hit) for hit in page.items], "nextCursor": page.cursor}
