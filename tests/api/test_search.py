"""GET /search against a real recorder: runs recorded through the proxy are indexed in the
background and found; no query, however odd, answers a 5xx."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recorder.client import AsyncRecorderClient
from recorder.store import open_store
from tests.servers import conversation, demo_upstream, eventually, recorder_at


@pytest.fixture
async def served(db_url: str) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    async with (
        demo_upstream() as upstream,
        recorder_at(db_url, {"demo": upstream}, search_index_interval=0.1) as rec,
        httpx.AsyncClient(base_url=rec, timeout=60, trust_env=False) as http,
    ):
        await conversation(http, rec, "c1")

        async def indexed() -> bool:
            found = (await http.get("/search", params={"threadId": "c1"})).json()
            return {hit["runId"] for hit in found["hits"]} >= {"c1-r1", "c1-r2", "c1-r3"}

        await eventually(indexed, "the conversation's runs indexed")
        yield rec, http


async def test_search_finds_recorded_runs(served: Any) -> None:
    rec, http = served
    everything = (await http.get("/search", params={"threadId": "c1", "limit": 100})).json()
    kinds = {hit["kind"] for hit in everything["hits"]}
    assert {"input", "message"} <= kinds
    # A word the demo agent said, found with the events it came from and marked.
    message = next(h for h in everything["hits"] if h["kind"] == "message")
    start, end = message["highlights"][0] if message["highlights"] else (0, 0)
    word = message["snippet"].split()[0].strip(".,!?:;")
    found = (await http.get("/search", params={"q": word, "kind": "message"})).json()
    assert found["hits"], word
    hit = found["hits"][0]
    assert hit["threadId"] == "c1" and hit["seqTo"] >= hit["seqFrom"] >= 0
    start, end = hit["highlights"][0]
    assert hit["snippet"][start:end].casefold() == word.casefold()
    # The posted user message of the first turn.
    first_input = next(h for h in everything["hits"] if h["kind"] == "input")
    assert first_input["seqFrom"] == -1
    async with AsyncRecorderClient(rec) as client:
        page = await client.search(word, kind="message")
        assert [h.to_json() for h in page.hits] == found["hits"]
        assert [h.run_id async for h in client.iter_search(word, kind="message", limit=1)] == [
            h["runId"] for h in found["hits"]
        ]
        assert (await client.reindex()).runs == 3
        assert (await client.search(word, kind="message")).hits == page.hits
    bad = await http.get("/search", params={"kind": "nope"})
    assert bad.status_code == 422 and "kind" in bad.json()["detail"]
    bad = await http.get("/search", params={"q": "x", "cursor": "%%%"})
    assert bad.status_code == 422
    # Numbers past what a cursor this store gives holds: named as a cursor too.
    for cursor in ("WzAsMCw5OTk5OTk5OTk5OTk5OTk5OTk5OTk5OV0=", "WzFlNDAwLDAsMV0="):
        bad = await http.get("/search", params={"q": "x", "cursor": cursor})
        assert bad.status_code == 422 and "invalid cursor" in bad.json()["detail"]


@given(
    q=st.text(max_size=60),
    syntax=st.booleans(),
    cursor=st.one_of(st.none(), st.text(max_size=20)),
)
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
async def test_no_query_is_a_server_error(
    served: Any, q: str, syntax: bool, cursor: str | None
) -> None:
    _rec, http = served
    params: dict[str, str] = {"q": q, "syntax": str(syntax).lower()}
    if cursor is not None:
        params["cursor"] = cursor
    response = await http.get("/search", params=params)
    assert response.status_code in (200, 422), response.text
    if response.status_code == 422:
        assert set(response.json()) == {"detail"}


async def test_recorders_on_one_database_index_their_own_runs(db_url: str) -> None:
    """Two recorders on one database: the one that does not index leaves its runs to the
    other only after the handover; the other indexes its own at once."""
    async with (
        demo_upstream() as upstream,
        recorder_at(db_url, {"demo": upstream}, search_index=False) as quiet,
        httpx.AsyncClient(base_url=quiet, timeout=60, trust_env=False) as http,
    ):
        await conversation(http, quiet, "q1")
        async with (
            recorder_at(
                db_url, {"demo": upstream}, search_index_interval=0.05, search_index_handover=3600
            ) as busy,
            httpx.AsyncClient(base_url=busy, timeout=60, trust_env=False) as other,
        ):
            await conversation(other, busy, "b1")

            async def threads_indexed() -> set[str]:
                found = (await other.get("/search", params={"limit": 100})).json()
                return {hit["threadId"] for hit in found["hits"]}

            async def own_indexed() -> bool:
                return "b1" in await threads_indexed()

            await eventually(own_indexed, "its own runs indexed")
            assert await threads_indexed() == {"b1"}  # q1's runs: not handed over yet
        async with recorder_at(
            db_url, {"demo": upstream}, search_index_interval=0.05, search_index_handover=0
        ) as taking:
            async with httpx.AsyncClient(base_url=taking, timeout=60, trust_env=False) as third:

                async def all_indexed() -> bool:
                    found = (await third.get("/search", params={"limit": 100})).json()
                    return {hit["threadId"] for hit in found["hits"]} == {"b1", "q1"}

                await eventually(all_indexed, "the other recorder's runs, handed over")


async def test_a_stopping_recorder_indexes_the_runs_that_just_closed(db_url: str) -> None:
    """Its indexer's pass ran before these runs closed (its next one an hour away): the
    stop indexes them, so that search finds them before a recorder runs here again."""
    async with (
        demo_upstream() as upstream,
        recorder_at(db_url, {"demo": upstream}, search_index_interval=3600) as rec,
        httpx.AsyncClient(base_url=rec, timeout=60, trust_env=False) as http,
    ):
        runs = await conversation(http, rec, "s1")

        async def all_closed() -> bool:
            answers = [(await http.get(f"/runs/{run}")).json() for run in runs]
            return all(answer["status"] != "running" for answer in answers)

        await eventually(all_closed, "the conversation's runs closed")
        found = (await http.get("/search", params={"threadId": "s1"})).json()
        assert found["hits"] == []  # not indexed while it runs
    store = await open_store(db_url)
    try:
        assert await store.runs_to_index(100) == []  # every closed run: indexed
    finally:
        await store.close()
