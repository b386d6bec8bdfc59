"""Annotations through a real recorder: the API, the client, the thread list's and search's
tag filters, and export/import carrying them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from recorder.client import AsyncRecorderClient
from recorder.errors import InputError, NotFound
from tests.servers import conversation, demo_upstream, eventually, recorder_at


@pytest.fixture
async def served(db_url: str) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    async with (
        demo_upstream() as upstream,
        recorder_at(db_url, {"demo": upstream}, search_index_interval=0.1) as rec,
        httpx.AsyncClient(base_url=rec, timeout=60, trust_env=False) as http,
    ):
        await conversation(http, rec, "c1")
        await conversation(http, rec, "c2")
        yield rec, http


async def test_annotate_filter_export_import(served: Any, tmp_path: Path) -> None:
    rec, http = served
    answer = await http.patch("/threads/c1/tags", json={"team": "billing", "env": "prod"})
    assert answer.status_code == 200 and answer.json()["tags"] == {
        "team": "billing",
        "env": "prod",
    }
    answer = await http.patch("/runs/c2-r2/tags", json={"verdict": "bad"})
    assert answer.json()["runs"]["c2-r2"]["tags"] == {"verdict": "bad"}
    note = await http.post("/runs/c1-r1/notes", json={"text": "looks right", "author": "ana"})
    assert note.status_code == 200 and note.json()["runId"] == "c1-r1"
    scored = await http.put("/threads/c1/score", json={"value": 4, "author": "ana"})
    assert scored.json()["score"]["value"] == 4
    assert (await http.put("/threads/c1/score", json={"value": "nan"})).status_code == 422
    assert (await http.patch("/threads/nope/tags", json={"a": "b"})).status_code == 404
    assert (await http.post("/threads/c1/notes", json={"text": " "})).status_code == 422

    listed = (await http.get("/threads", params={"tag": "team:billing"})).json()
    assert [t["threadId"] for t in listed["threads"]] == ["c1"]
    listed = (await http.get("/threads", params={"tag": "verdict:bad"})).json()
    assert [t["threadId"] for t in listed["threads"]] == ["c2"]
    assert (await http.get("/threads", params={"tag": "nocolon"})).status_code == 422

    async def indexed() -> bool:
        found = (await http.get("/search", params={"limit": 100})).json()["hits"]
        return len({h["runId"] for h in found}) == 6

    await eventually(indexed, "both conversations indexed")
    found = (await http.get("/search", params={"tag": "verdict:bad", "limit": 100})).json()
    assert {h["runId"] for h in found["hits"]} == {"c2-r2"}

    async with AsyncRecorderClient(rec) as client:
        saved = await client.annotations("c1")
        assert saved.tags == {"team": "billing", "env": "prod"}
        assert [n.text for n in saved.runs["c1-r1"].notes] == ["looks right"]
        assert saved.score is not None and saved.score.author == "ana"
        after = await client.set_tags({"env": None}, thread_id="c1")
        assert after.tags == {"team": "billing"}
        extra = await client.add_note("second look", thread_id="c1")
        await client.remove_note(extra.note_id)
        with pytest.raises(NotFound):
            await client.remove_note(extra.note_id)
        with pytest.raises(InputError):
            await client.set_tags({"": "x"}, thread_id="c1")
        # Both a thread and a run: refused, not one of them quietly taken.
        with pytest.raises(InputError, match="not both"):
            await client.set_tags({"k": "v"}, thread_id="c1", run_id="c1-r1")
        assert "k" not in (await client.annotations("c1")).tags
        page = await client.threads(tags={"team": "billing"})
        assert [t.thread_id for t in page.threads] == ["c1"]
        exported = b"".join([chunk async for chunk in client.export_jsonl()])
        before = {t: await client.annotations(t) for t in ("c1", "c2")}
    assert b'"kind":"annotations"' in exported

    # Another recorder, another database: the import brings the annotations back.
    other = f"sqlite+aiosqlite:///{tmp_path / 'copy.db'}"
    async with recorder_at(other, {}) as copy, AsyncRecorderClient(copy) as client:
        report = await client.import_jsonl(exported)
        assert report.annotations_restored == 2
        assert {t: await client.annotations(t) for t in ("c1", "c2")} == before
        again = await client.import_jsonl(exported)
        assert again.runs_created == 0
        assert {t: await client.annotations(t) for t in ("c1", "c2")} == before
