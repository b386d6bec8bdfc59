"""Generated hostile input against a live recorder and against ``recorder import``, on both
databases: never a 5xx, never a traceback or SQL in a body, the server keeps serving, and
nothing is recorded for a request it refused.

Hypothesis runs in a thread with a blocking client while this event loop serves the
recorder; example counts are modest so each test runs in well under a minute.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli.conftest import run_main
from tests.hostile.test_import import export, jsonl
from tests.servers import demo_upstream, post_run, recorder_at

LEAKS = re.compile(
    r"Traceback|SELECT |INSERT |UPDATE |DELETE FROM|asyncpg|sqlite3|psycopg|File \"/", re.I
)
NASTY = [
    "",
    "\x00",
    "a\x00b",
    "%00",
    "/",
    "..",
    "../../etc/passwd",
    "' OR 1=1 --",
    "\\",
    "\n",
    "\ufeff",
    "\U0001f600",
    "x" * 5000,
    "null",
    "-1",
    "1e400",
    "NaN",
    "99999999999999999999999",
    "-99999999999999999999999",
    "r1",
    "t1",
]
TEXT = st.one_of(st.sampled_from(NASTY), st.text(max_size=40))
NUMBER = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
VALUE = st.one_of(TEXT, NUMBER)
JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**25), max_value=10**25),
        st.floats(allow_nan=False, allow_infinity=False),
        TEXT,
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=12,
)
RUN_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "threadId": st.one_of(TEXT, JSON),
        "runId": st.one_of(TEXT, JSON),
        "messages": JSON,
        "state": JSON,
        "parentRunId": st.one_of(TEXT, JSON),
        "forwardedProps": JSON,
    },
)
BODY = st.one_of(
    JSON.map(lambda v: json.dumps(v).encode()),
    RUN_FIELDS.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
    st.sampled_from([b"", b"{", b'{"threadId": "t", "runId": "r\\ud800"}', b"\xff\xfe"]),
)

# (method, path with {id} slots, query parameters it takes, whether it is a stream)
ENDPOINTS: list[tuple[str, str, list[str]]] = [
    ("GET", "/threads", ["agent", "status", "since", "until", "q", "limit", "cursor"]),
    ("GET", "/threads/{id}", []),
    ("GET", "/threads/{id}/state", ["runId", "seq"]),
    ("GET", "/threads/{id}/history", ["limit"]),
    ("GET", "/threads/{id}/stream", ["compact"]),
    ("GET", "/runs/{id}", []),
    ("GET", "/runs/{id}/events", ["afterSeq", "limit"]),
    ("GET", "/runs/{id}/state", ["seq"]),
    ("GET", "/runs/{id}/verify", []),
    ("GET", "/runs/{id}/stream", ["afterSeq"]),
    ("GET", "/export", ["threadId"]),
    ("GET", "/agents", []),
    ("POST", "/agents/{id}", []),
    ("POST", "/agents/{id}/connect", ["compact"]),
    ("POST", "/runs/{id}/fork", []),
    ("POST", "/import", []),
    ("GET", "/healthz", []),
]


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, dict[str, str], dict[str, str], bytes]:
    method, template, names = draw(st.sampled_from(ENDPOINTS))
    slot = draw(st.one_of(st.sampled_from(["demo", "r1", "t1"]), TEXT))
    path = template.replace("{id}", quote(slot, safe="") or "%20")
    params = {name: draw(VALUE) for name in names if draw(st.booleans())}
    if template.endswith("/stream") or template.endswith("/connect"):
        params["live"] = "false"
    headers = {"content-type": "application/json"}
    if draw(st.booleans()):
        headers["content-type"] = draw(
            st.sampled_from(["text/plain", "application/json; charset=utf-8", "", "x/y+json"])
        )
    if template == "/runs/{id}/stream" and draw(st.booleans()):
        value = draw(VALUE)  # (only what a header can carry: visible ASCII)
        headers["last-event-id"] = "".join(c for c in value if " " <= c <= "~")[:200]
    body = draw(BODY) if method == "POST" else b""
    if template == "/runs/{id}/fork" and draw(st.booleans()):
        options = st.fixed_dictionaries(
            {},
            optional={
                k: JSON
                for k in ("atSeq", "messages", "state", "statePatch", "runId", "threadId", "edit")
            },
        )
        body = json.dumps({**draw(options), "dryRun": draw(st.booleans())}).encode()
    return method, path, params, headers, body


def fingerprint(client: httpx.Client) -> list[tuple[str, int]]:
    threads = client.get("/threads", params={"limit": 500}).json()["threads"]
    return sorted((t["threadId"], t["runCount"]) for t in threads)


async def test_generated_requests_never_break_the_live_api(db_url: str) -> None:
    async with demo_upstream() as up, recorder_at(db_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as seed:
            await post_run(seed, "/agents/demo", {"threadId": "t1", "runId": "r1", "messages": []})
        seen: set[int] = set()

        @settings(
            max_examples=150,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(requests())
        def one(request: tuple[str, str, dict[str, str], dict[str, str], bytes]) -> None:
            method, path, params, headers, body = request
            with httpx.Client(base_url=rec, timeout=30) as client:
                before = fingerprint(client)
                answer = client.request(method, path, params=params, headers=headers, content=body)
                seen.add(answer.status_code)
                assert answer.status_code < 500, (method, path, params, body[:80], answer.text)
                assert not LEAKS.search(answer.text[:20000]), (method, path, answer.text[:300])
                if answer.status_code >= 400:
                    assert fingerprint(client) == before, ("recorded on refusal", method, path)
                assert client.get("/healthz").status_code == 200

        await asyncio.to_thread(one)
        assert 200 in seen and 422 in seen and 404 in seen


LINE_CHANGES = st.one_of(
    st.tuples(st.sampled_from(["drop"]), TEXT),
    st.tuples(st.sampled_from(["set"]), st.tuples(TEXT, JSON)),
    st.tuples(
        st.sampled_from(["field"]),
        st.tuples(
            st.sampled_from(
                [
                    "runId",
                    "threadId",
                    "seq",
                    "status",
                    "payload",
                    "payloadB64",
                    "input",
                    "inputB64",
                    "createdAt",
                    "recordedAt",
                    "origin",
                    "kind",
                    "eventCount",
                    "parentSeq",
                ]
            ),
            JSON,
        ),
    ),
)


async def test_generated_export_files_never_break_import(db_url: str, tmp_path: Path) -> None:
    assert (await run_main("migrate", "--db", db_url)).code == 0
    store_threads: list[int] = [0]

    async def threads() -> int:
        done = await run_main("threads", "--db", db_url, "--json")
        return len(json.loads(done.out)["threads"]) if done.out.strip() else 0

    loop = asyncio.get_running_loop()
    counter = iter(range(10**6))

    @settings(
        max_examples=40,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(
        st.lists(st.tuples(st.integers(min_value=0, max_value=7), LINE_CHANGES), max_size=3),
        st.sampled_from(["r1", "r2", "r3"]),
    )
    def one(changes: list[tuple[int, Any]], run_id: str) -> None:
        lines = export(run_id, f"t-{run_id}", 5)
        for index, (kind, what) in changes:
            index %= len(lines)
            line = dict(lines[index])
            if kind == "drop":
                line.pop(what, None)
            else:
                key, value = what
                line[key] = value
            lines[index] = line
        path = tmp_path / f"gen-{next(counter)}.jsonl"
        path.write_bytes(jsonl(lines))
        before = asyncio.run_coroutine_threadsafe(threads(), loop).result()
        done = asyncio.run_coroutine_threadsafe(
            run_main("import", str(path), "--db", db_url, "--json"), loop
        ).result()
        assert done.code in (0, 2), done
        assert "Traceback" not in done.err and not LEAKS.search(done.err), done.err
        if done.code == 2:
            assert done.err.count("\n") == 1 and done.err.startswith("recorder: line "), done.err
            after = asyncio.run_coroutine_threadsafe(threads(), loop).result()
            assert after == before, "a refused file imported something"
        store_threads[0] += 1

    await asyncio.to_thread(one)
    assert store_threads[0] >= 10
