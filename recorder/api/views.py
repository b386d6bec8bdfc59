"""JSON shapes of the API (AG-UI's camelCase), built from the store's records."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi.responses import Response

from recorder.store import Run, Thread
from recorder.wire.events import RecordedEvent, decode
from recorder.wire.jsontext import dump


def iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


def run_view(run: Run, *, with_input: bool = True) -> dict[str, Any]:
    view: dict[str, Any] = {
        "runId": run.run_id,
        "threadId": run.thread_id,
        "agent": run.agent,
        "status": run.status,
        "outcome": run.outcome,
        "error": run.error,
        "parentRunId": run.parent_run_id,
        "parentSeq": run.parent_seq,
        "parentInferred": run.parent_inferred,
        "origin": run.origin,
        "eventCount": run.event_count,
        "createdAt": iso(run.created_at),
        "finishedAt": iso(run.finished_at),
        "durationMs": None
        if run.finished_at is None
        else round((run.finished_at - run.created_at) * 1000, 3),
        "violations": run.violations,
    }
    if with_input:
        view["input"] = decode(run.input) if run.input is not None else None
    return view


def thread_view(thread: Thread) -> dict[str, Any]:
    return {
        "threadId": thread.thread_id,
        "agent": thread.agent,
        "createdAt": iso(thread.created_at),
        "updatedAt": iso(thread.updated_at),
        "runCount": thread.run_count,
        "latestRunId": thread.latest_run_id,
        "latestStatus": thread.latest_status,
        "summary": (thread.summary or "")[-280:] or None,
    }


def event_view(event: RecordedEvent) -> dict[str, Any]:
    parsed = decode(event.payload)
    return {
        "position": event.position,
        "seq": event.seq,
        "runId": event.run_id,
        "type": event.type,
        "origin": event.origin,
        "recordedAt": iso(event.recorded_at),
        "event": parsed,
        "raw": None if parsed is not None else event.payload.decode("utf-8", "replace"),
    }


def run_tree(runs: list[Run]) -> list[dict[str, Any]]:
    """The runs as a forest: each node holds its children (forks and follow-ups)."""
    nodes = {r.run_id: {**run_view(r, with_input=False), "children": []} for r in runs}
    roots: list[dict[str, Any]] = []
    for run in runs:
        parent = nodes.get(run.parent_run_id or "")
        (parent["children"] if parent is not None else roots).append(nodes[run.run_id])
    return roots


class JSON(Response):
    """JSON encoded with orjson: projections run to megabytes, and FastAPI's default
    encoder walks them through pydantic first."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return dump(content)
