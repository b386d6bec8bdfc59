"""The indexer on real producers' traffic (tests/vectors: LangGraph, Pydantic AI, the demo
agent): every message the reference fold ends with, beyond those posted, is a document with
the same text, and every tool call's arguments are in its document."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from recorder.reference.projector import fold
from recorder.store.model import RUN_ERROR, TOOL_CALL, Run
from recorder.timetravel.indexing import run_documents
from recorder.wire.events import RecordedEvent
from tests.conftest import VECTORS

RESPONSES = sorted(VECTORS.rglob("*.Response.json"))


def run_of(request: dict[str, Any], raw: bytes) -> Run:
    return Run(
        run_id=request["runId"],
        thread_id=request["threadId"],
        agent="a",
        status="finished",
        input=raw,
        parent_run_id=None,
        parent_seq=None,
        parent_inferred=False,
        origin="upstream",
        outcome=None,
        error=None,
        violations=[],
        event_count=0,
        created_at=1.0,
        finished_at=2.0,
        heartbeat_at=None,
        owner=None,
    )


@pytest.mark.parametrize("response", RESPONSES, ids=lambda p: p.relative_to(VECTORS).as_posix())
def test_documents_match_the_fold(response: Path) -> None:
    request_path = response.with_name(response.name.replace(".Response.", ".Request."))
    raw = request_path.read_bytes()
    request = orjson.loads(raw)
    frames = orjson.loads(response.read_bytes())
    events = [
        RecordedEvent(
            i,
            request["threadId"],
            request["runId"],
            i,
            f.get("type"),
            orjson.dumps(f),
            1.0 + i,
            "upstream",
        )
        for i, f in enumerate(frames)
    ]
    docs = run_documents(run_of(request, raw), events)
    posted = {m.get("id") for m in request.get("messages", [])}
    final = fold(
        [e.payload for e in events], messages=request.get("messages"), state=request.get("state")
    ).messages
    texts = {(d.message_id, d.text) for d in docs}
    for message in final:
        if message.get("id") in posted:
            continue
        content = message.get("content")
        if (
            message.get("role") in ("assistant", "reasoning")
            and isinstance(content, str)
            and content
        ):
            assert (message["id"], content) in texts, (message["id"], content)
        for call in message.get("toolCalls") or []:
            args = call["function"]["arguments"]
            doc = next(d for d in docs if d.kind == TOOL_CALL and d.message_id == call["id"])
            assert call["function"]["name"] in doc.text and args in doc.text
    errors = [f for f in frames if f.get("type") == "RUN_ERROR"]
    assert len([d for d in docs if d.kind == RUN_ERROR]) == len(errors)
    for doc in docs:
        assert 0 <= doc.seq_from <= doc.seq_to < len(frames) or doc.seq_from == doc.seq_to == -1
