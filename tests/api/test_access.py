"""Scoped tokens over real HTTP: every scope boundary, agent limits in lists, search, export
and direct reads, and the proxy's own token, checked and never forwarded to the agent."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from recorder.config import TokenConfig, hash_token
from tests.servers import post_run, recorder_at, serving, user

FULL = "full-access-token"
TOKENS = {
    "reader": ("read-token-0123456789", ["read"], None),
    "forker": ("fork-token-0123456789", ["fork"], None),
    "admin": ("admin-token-0123456789", ["admin"], None),
    "a-reader": ("a-read-token-0123456789", ["read"], ["a"]),
    "a-runner": ("a-run-token-0123456789", ["run"], ["a"]),
    "a-forker": ("a-fork-token-0123456789", ["fork"], ["a"]),
    "a-admin": ("a-admin-token-0123456789", ["admin"], ["a"]),
}


def bearer(name: str) -> dict[str, str]:
    return {"authorization": f"Bearer {FULL if name == 'full' else TOKENS[name][0]}"}


@dataclass
class Upstream:
    """An agent that keeps the headers of every request it gets, and answers a short run."""

    url: str
    seen: list[dict[str, str]] = field(default_factory=list)


def recording_agent(seen: list[dict[str, str]]) -> Starlette:
    async def handle(request: Request) -> Response:
        seen.append(dict(request.headers))
        body = json.loads(await request.body())
        ids = {"threadId": body["threadId"], "runId": body["runId"]}
        text = (body.get("messages") or [{}])[-1].get("content", "")
        events = [
            {"type": "RUN_STARTED", **ids},
            {"type": "TEXT_MESSAGE_START", "messageId": f"m-{ids['runId']}", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{ids['runId']}", "delta": text},
            {"type": "TEXT_MESSAGE_END", "messageId": f"m-{ids['runId']}"},
            {"type": "RUN_FINISHED", **ids},
        ]
        sse = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
        return Response(sse, media_type="text/event-stream")

    return Starlette(routes=[Route("/{name}", handle, methods=["POST"])])


@pytest.fixture
async def rec(sqlite_url: str) -> AsyncIterator[tuple[str, httpx.AsyncClient, Upstream]]:
    seen: list[dict[str, str]] = []
    tokens = {
        name: TokenConfig(hash=hash_token(value), scopes=scopes, agents=agents)  # type: ignore[arg-type]
        for name, (value, scopes, agents) in TOKENS.items()
    }
    async with serving(recording_agent(seen)) as up:
        agents: dict[str, Any] = {
            "a": {"url": f"{up}/a", "require_token": True},
            "b": {"url": f"{up}/b", "require_token": True},
            "open": f"{up}/open",
        }
        async with (
            recorder_at(sqlite_url, agents, api_token=FULL, tokens=tokens) as base,
            httpx.AsyncClient(base_url=base, timeout=30, trust_env=False) as client,
        ):
            upstream = Upstream(up, seen)
            await record(client, "a", "ta", "ra1", "apples in thread a", bearer("a-runner"))
            await record(client, "b", "tb", "rb1", "apples in thread b", bearer("full"))
            # A thread of a's that later ran through b: it holds b's data.
            await record(client, "a", "tm", "rm1", "apples mixed", bearer("full"))
            await record(client, "b", "tm", "rm2", "apples mixed later", bearer("full"))
            seen.clear()
            yield base, client, upstream


async def record(
    client: httpx.AsyncClient, agent: str, thread: str, run: str, text: str, headers: Any
) -> None:
    body = {"threadId": thread, "runId": run, "messages": [user(text, f"{run}-u")]}
    async with client.stream("POST", f"/agents/{agent}", json=body, headers=headers) as answer:
        assert answer.status_code == 200, await answer.aread()
        await answer.aread()


async def test_the_api_asks_for_a_known_token(
    rec: tuple[str, httpx.AsyncClient, Upstream],
) -> None:
    _, client, _ = rec
    assert (await client.get("/threads")).status_code == 401
    wrong = await client.get("/threads", headers={"authorization": "Bearer nope"})
    assert wrong.status_code == 401 and "not one this recorder knows" in wrong.json()["detail"]
    # The hash itself is no token.
    as_hash = {"authorization": f"Bearer {hash_token(TOKENS['reader'][0])}"}
    assert (await client.get("/threads", headers=as_hash)).status_code == 401
    for name in ("full", *TOKENS):
        answer = await client.get("/threads", headers=bearer(name))
        expected = 403 if name == "a-runner" else 200  # a run token reads nothing
        assert answer.status_code == expected, (name, answer.text)
    # In the header only: a token in a URL ends up in logs.
    by_query = await client.get("/threads", params={"token": TOKENS["reader"][0]})
    assert by_query.status_code == 401
    # The API's documents take any known token, and refuse as the routes refuse.
    for path in ("/openapi.json", "/threads"):
        for headers, said in [
            ({}, "is required"),
            ({"authorization": "Bearer nope"}, "not one this recorder knows"),
            ({"x-recorder-token": "nope"}, "not one this recorder knows"),
        ]:
            refused = await client.get(path, headers=headers)
            assert refused.status_code == 401 and said in refused.json()["detail"], path
            assert refused.headers["www-authenticate"] == "Bearer"  # what it asks for
        assert (await client.get(path, headers=bearer("a-reader"))).status_code == 200
        token = {"x-recorder-token": TOKENS["a-reader"][0]}
        assert (await client.get(path, headers=token)).status_code == 200
    assert (await client.get("/healthz")).status_code == 200


async def test_a_read_token_cannot_fork_or_import(
    rec: tuple[str, httpx.AsyncClient, Upstream],
) -> None:
    _, client, upstream = rec
    fork = {"messages": ["again"], "dryRun": False}
    exported = (await client.get("/export", headers=bearer("reader"))).content
    assert exported.count(b'"kind":"run"') == 4
    jsonl = {"content-type": "application/x-ndjson"}
    for name in ("reader", "a-reader"):
        answer = await client.post("/runs/ra1/fork", json=fork, headers=bearer(name))
        assert answer.status_code == 403 and "'fork' scope" in answer.json()["detail"]
        imported = await client.post("/import", content=exported, headers={**bearer(name), **jsonl})
        assert imported.status_code == 403
    assert upstream.seen == []  # no fork reached the agent
    # A fork token forks (and reads), but does not import.
    events = await post_run(client, "/runs/ra1/fork", {"messages": ["again"]}, bearer("forker"))
    assert events[-1]["type"] == "RUN_FINISHED"
    imported = await client.post("/import", content=exported, headers={**bearer("forker"), **jsonl})
    assert imported.status_code == 403
    # Admin imports (nothing new: idempotent), as does the full-access token.
    for name in ("admin", "full"):
        imported = await client.post("/import", content=exported, headers={**bearer(name), **jsonl})
        assert imported.status_code == 200, imported.text


async def test_an_agent_limited_token_sees_only_its_agents_threads(
    rec: tuple[str, httpx.AsyncClient, Upstream],
) -> None:
    _, client, _ = rec
    mine = bearer("a-reader")

    async def listed(headers: dict[str, str], **params: str) -> list[str]:
        answer = await client.get("/threads", params=params, headers=headers)
        assert answer.status_code == 200, answer.text
        return sorted(t["threadId"] for t in answer.json()["threads"])

    assert await listed(bearer("reader")) == ["ta", "tb", "tm"]
    assert await listed(mine) == ["ta"]
    # Search and filters find nothing beyond the limit either.
    assert await listed(bearer("reader"), q="apples") == ["ta", "tb", "tm"]
    assert await listed(mine, q="apples") == ["ta"]
    assert await listed(mine, q="thread b") == []
    assert await listed(mine, agent="b") == []
    # Paging keeps to it.
    page = (await client.get("/threads", params={"limit": 1}, headers=mine)).json()
    assert [t["threadId"] for t in page["threads"]] == ["ta"] and page["nextCursor"] is None

    # Direct reads of another agent's thread or run: not found, as an unknown id.
    for path in (
        "/threads/tb",
        "/threads/tm",
        "/threads/tb/state",
        "/threads/tb/history",
        "/threads/tb/stream?live=false",
        "/runs/rb1",
        "/runs/rm1",  # a's own run, in a thread that b's run joined
        "/runs/rb1/events",
        "/runs/rb1/state",
        "/runs/rb1/verify",
        "/runs/rb1/stream?live=false",
        "/export?threadId=tb",
    ):
        answer = await client.get(path, headers=mine)
        assert answer.status_code == 404, (path, answer.status_code, answer.text)
        assert "tb" not in answer.text or "not found" in answer.text
        assert (await client.get(path, headers=bearer("reader"))).status_code == 200, path
    for path in ("/threads/ta", "/threads/ta/state", "/runs/ra1/events", "/export?threadId=ta"):
        assert (await client.get(path, headers=mine)).status_code == 200, path
    # Another agent's run named in a visible thread: not found, as an unknown run, where
    # a token that sees it is told it is in another thread.
    for run in ("rb1", "nope"):
        answer = await client.get(f"/threads/ta/state?runId={run}", headers=mine)
        assert (answer.status_code, answer.json()) == (404, {"detail": f"run '{run}' not found"})
    other = await client.get("/threads/ta/state?runId=rb1", headers=bearer("reader"))
    assert (other.status_code, other.json()["detail"]) == (422, "run 'rb1' is not in thread 'ta'")

    # An export of everything holds only a's threads.
    lines = [json.loads(x) for x in (await client.get("/export", headers=mine)).text.splitlines()]
    assert {line["runId"] for line in lines} == {"ra1"}
    # The agents list and connect keep to it; metrics span every agent: not for it.
    agents = (await client.get("/agents", headers=mine)).json()["agents"]
    assert [a["name"] for a in agents] == ["a"]
    tb, ta = {"threadId": "tb", "runId": "c"}, {"threadId": "ta", "runId": "c"}
    connect = await client.post("/agents/b/connect", json=tb, headers=mine)
    assert connect.status_code == 403
    hidden = await client.post("/agents/a/connect", json=tb, headers=mine)
    assert hidden.status_code == 200 and hidden.content == b""
    shown = await client.post("/agents/a/connect", json=ta, headers=mine)
    assert b"apples in thread a" in shown.content
    assert (await client.get("/metrics", headers=mine)).status_code == 403
    assert (await client.get("/metrics", headers=bearer("reader"))).status_code == 200


async def test_an_agent_limited_fork_token_forks_only_its_agents_runs(
    rec: tuple[str, httpx.AsyncClient, Upstream],
) -> None:
    _, client, upstream = rec
    mine = bearer("a-forker")
    hidden = await client.post("/runs/rb1/fork", json={"messages": ["x"]}, headers=mine)
    assert hidden.status_code == 404
    assert upstream.seen == []
    events = await post_run(client, "/runs/ra1/fork", {"messages": ["again"]}, mine)
    assert events[-1]["type"] == "RUN_FINISHED"
    # The fork went to a; the recorder's token did not go with it.
    assert len(upstream.seen) == 1
    assert "authorization" not in upstream.seen[0]
    assert all(TOKENS["a-forker"][0] not in v for v in upstream.seen[0].values())


async def test_the_proxy_asks_a_guarded_agent_for_a_run_token_and_never_forwards_it(
    rec: tuple[str, httpx.AsyncClient, Upstream],
) -> None:
    _, client, upstream = rec
    body = {"threadId": "tp", "runId": "rp1", "messages": [user("hi")]}
    assert (await client.post("/agents/a", json=body)).status_code == 401
    refused = await client.post("/agents/a", json=body, headers=bearer("reader"))
    assert refused.status_code == 403 and "'run' scope" in refused.json()["detail"]
    other = await client.post("/agents/b", json=body, headers=bearer("a-runner"))
    assert other.status_code == 403 and "agent 'b'" in other.json()["detail"]
    assert upstream.seen == []  # none of them reached an agent
    assert (await client.get("/runs/rp1", headers=bearer("full"))).status_code == 404

    secret = TOKENS["a-runner"][0]
    # In Authorization: checked, then not forwarded.
    await record(client, "a", "tp", "rp1", "hi", bearer("a-runner"))
    # In X-Recorder-Token: the client's own Authorization goes on to the agent untouched.
    own = {"x-recorder-token": secret, "authorization": "Bearer the-agents-own"}
    await record(client, "a", "tp", "rp2", "hi", own)
    # An unguarded agent needs no token; one sent anyway in X-Recorder-Token stays here.
    await record(client, "open", "to", "ro1", "hi", {"x-recorder-token": FULL})
    assert len(upstream.seen) == 3
    first, second, third = upstream.seen
    assert "authorization" not in first and "x-recorder-token" not in first
    assert second["authorization"] == "Bearer the-agents-own"
    assert "x-recorder-token" not in second and "x-recorder-token" not in third
    for headers in upstream.seen:
        assert not any(secret in v or FULL in v for v in headers.values())
    # A token limited to a runs on new threads and a's own, not on one b's runs are in.
    joined = await client.post(
        "/agents/a",
        json={"threadId": "tm", "runId": "rx", "messages": []},
        headers=bearer("a-runner"),
    )
    assert joined.status_code == 403 and "thread 'tm'" in joined.json()["detail"]
    assert len(upstream.seen) == 3
    await record(client, "a", "ta", "ra2", "again", bearer("a-runner"))
    # The full-access token runs any guarded agent.
    await record(client, "b", "tm", "rp3", "hi", bearer("full"))
    assert (await client.get("/runs/rp3", headers=bearer("full"))).json()["status"] == "finished"


async def test_an_unguarded_agent_never_gets_a_recorder_token_in_authorization(
    rec: tuple[str, httpx.AsyncClient, Upstream],
) -> None:
    """A frontend that sends its one token everywhere: to an agent that asks for none, a
    recorder token (any, in any case and spacing) stays here; the agent's own goes on."""
    _, client, upstream = rec
    reader = TOKENS["reader"][0]
    sent = [
        {"authorization": f"Bearer {reader}"},
        {"authorization": f"bearer {reader}"},
        {"authorization": f"Bearer  {TOKENS['a-runner'][0]}"},
        {"authorization": f"Bearer {FULL}"},
        {"authorization": "Bearer the-agents-own"},
    ]
    for n, headers in enumerate(sent):
        await record(client, "open", f"tu{n}", f"ru{n}", "hi", headers)
    assert len(upstream.seen) == len(sent)
    *recorders, own = upstream.seen
    for headers in recorders:
        assert "authorization" not in headers
    assert own["authorization"] == "Bearer the-agents-own"


async def test_an_admin_limited_to_agents_imports_nothing_and_reindexes_nothing(
    rec: tuple[str, httpx.AsyncClient, Upstream],
) -> None:
    """An import may hold any agent's threads and annotations (a limited token would write
    where it cannot even read); a reindex is every agent's."""
    _, client, _ = rec
    exported = (await client.get("/export", headers=bearer("full"))).content
    renamed = exported.replace(b'"rb1"', b'"rb1-copy"').replace(b'"tb"', b'"tb-copy"')
    jsonl = {"content-type": "application/x-ndjson"}
    for path, body in (("/import", renamed), ("/search/reindex", b"")):
        answer = await client.post(path, content=body, headers={**bearer("a-admin"), **jsonl})
        assert answer.status_code == 403, (path, answer.text)
        assert "limited to some agents" in answer.json()["detail"]
    assert (await client.get("/runs/rb1-copy", headers=bearer("full"))).status_code == 404
    done = await client.post("/import", content=renamed, headers={**bearer("admin"), **jsonl})
    assert done.status_code == 200 and done.json()["runsCreated"] >= 1


async def test_a_fork_with_the_full_token_does_not_forward_it(
    rec: tuple[str, httpx.AsyncClient, Upstream],
) -> None:
    _, client, upstream = rec
    await post_run(client, "/runs/rb1/fork", {"messages": ["again"]}, bearer("full"))
    assert len(upstream.seen) == 1
    assert not any(FULL in v for v in upstream.seen[0].values())


async def test_search_annotations_diffs_and_audit_keep_to_the_scopes(
    rec: tuple[str, httpx.AsyncClient, Upstream],
) -> None:
    _, client, _ = rec
    # Rebuilding the search index is an admin's, and reading it a reader's.
    assert (await client.post("/search/reindex", headers=bearer("reader"))).status_code == 403
    rebuilt = await client.post("/search/reindex", headers=bearer("admin"))
    assert rebuilt.status_code == 200 and rebuilt.json()["runs"] == 4

    async def found(name: str) -> set[str]:
        answer = await client.get("/search", params={"q": "apples"}, headers=bearer(name))
        assert answer.status_code == 200, answer.text
        return {hit["threadId"] for hit in answer.json()["hits"]}

    assert await found("reader") == {"ta", "tb", "tm"}
    # A token limited to agent a finds nothing of b's, nor of the thread b's runs are in.
    assert await found("a-reader") == {"ta"}
    only_b = {"q": "apples", "agent": "b"}
    answer = await client.get("/search", params=only_b, headers=bearer("a-reader"))
    assert answer.json()["hits"] == []

    # Annotations: read with read, written with fork, within the token's agents.
    tag = {"reviewed": "yes"}
    assert (
        await client.patch("/threads/ta/tags", json=tag, headers=bearer("reader"))
    ).status_code == 403
    assert (
        await client.patch("/threads/ta/tags", json=tag, headers=bearer("forker"))
    ).status_code == 200
    hidden = await client.patch("/threads/tb/tags", json=tag, headers=bearer("a-forker"))
    assert hidden.status_code == 404
    note = {"text": "looked at it", "author": "me"}
    assert (
        await client.post("/runs/rb1/notes", json=note, headers=bearer("a-forker"))
    ).status_code == 404
    seen = await client.get("/threads/ta/annotations", headers=bearer("a-reader"))
    assert seen.status_code == 200 and seen.json()["tags"] == tag
    assert (
        await client.get("/threads/tb/annotations", headers=bearer("a-reader"))
    ).status_code == 404

    # Diffs: both ends must be visible.
    assert (await client.get("/runs/ra1/diff", headers=bearer("a-reader"))).status_code == 200
    assert (await client.get("/runs/rb1/diff", headers=bearer("a-reader"))).status_code == 404
    across = await client.get("/runs/ra1/diff", params={"toRun": "rb1"}, headers=bearer("a-reader"))
    assert across.status_code == 404

    # The chains, receipts, audit log and purges: admin, and no agent limit.
    for path in ("/audit/verify", "/audit/receipt", "/audit/log"):
        assert (await client.get(path, headers=bearer("forker"))).status_code == 403, path
        assert (await client.get(path, headers=bearer("admin"))).status_code == 200, path
    purge = {"threadIds": ["ta"], "dryRun": True}
    assert (
        await client.post("/admin/purge", json=purge, headers=bearer("reader"))
    ).status_code == 403
    # The audit log names the token that acted.
    await post_run(client, "/runs/ra1/fork", {"messages": ["again"]}, bearer("forker"))
    log = await client.get("/audit/log", params={"action": "fork"}, headers=bearer("admin"))
    assert [a["actor"] for a in log.json()["actions"]] == ["forker"]
