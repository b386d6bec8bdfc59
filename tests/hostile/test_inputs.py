"""Hostile requests to a live recorder, on both databases: each gets a clear 4xx naming what
is wrong, nothing is recorded for it, and the recorder keeps serving."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from recorder.store import open_store
from tests.servers import demo_upstream, post_run, recorder_at, run_closed, user

HUGE = 10**20


def run_input(thread: str, run: str, text: str = "hello") -> dict[str, Any]:
    return {"threadId": thread, "runId": run, "messages": [user(text)], "state": {}}


async def test_numeric_parameters_out_of_range_are_422_naming_the_parameter(db_url: str) -> None:
    async with demo_upstream() as up, recorder_at(db_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            await post_run(client, "/agents/demo", run_input("t1", "r1"))
            cases = [
                ("/runs/r1/events", {"afterSeq": HUGE}, "afterSeq"),
                ("/runs/r1/events", {"afterSeq": -HUGE}, "afterSeq"),
                ("/runs/r1/events", {"limit": HUGE}, "limit"),
                ("/runs/r1/state", {"seq": HUGE}, "seq"),
                ("/threads/t1/state", {"seq": HUGE}, "seq"),
                ("/runs/r1/stream", {"afterSeq": HUGE}, "afterSeq"),
                ("/threads", {"limit": HUGE}, "limit"),
                ("/threads", {"since": "1e400"}, "since"),
                ("/threads", {"until": "nan"}, "until"),
                ("/threads/t1/history", {"limit": HUGE}, "limit"),
            ]
            for path, params, name in cases:
                answer = await client.get(path, params=params)
                assert answer.status_code == 422, (path, params, answer.text)
                assert name in answer.json()["detail"], (path, params, answer.text)
            for value in (str(HUGE), str(-HUGE), "9" * 5000, "x"):
                answer = await client.get("/runs/r1/stream", headers={"last-event-id": value})
                assert answer.status_code == 422, (value[:30], answer.text)
                assert "Last-Event-ID" in answer.json()["detail"]
            # the largest seq the database holds is still a seq: an empty page, not an error
            page = await client.get("/runs/r1/events", params={"afterSeq": (1 << 31) - 1})
            assert page.status_code == 200 and page.json()["events"] == []
            assert (await client.get("/healthz")).status_code == 200


@pytest.mark.parametrize(
    "field, value",
    [
        ("threadId", "t\x00"),
        ("runId", "r\x00x"),
        ("threadId", "tab\there"),
        ("runId", "line\nbreak"),
        ("runId", "bell\x07"),
        ("threadId", "del\x7f"),
        ("runId", "c1\x85"),
        ("threadId", "a/b"),
        ("runId", "../etc"),
        ("threadId", ".."),
        ("runId", "."),
    ],
)
async def test_ids_with_control_characters_or_slashes_are_422(
    db_url: str, field: str, value: str
) -> None:
    async with demo_upstream() as up, recorder_at(db_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            body = {**run_input("t", "r"), field: value}
            answer = await client.post("/agents/demo", json=body)
            assert answer.status_code == 422, answer.text
            assert f"RunAgentInput.{field}" in answer.json()["detail"]
            assert (await client.get("/threads")).json()["threads"] == []
            # the fork route takes the same rule for the ids it is given
            await post_run(client, "/agents/demo", run_input("t", "r"))
            fork = await client.post("/runs/r/fork", json={field: value})
            assert fork.status_code == 422, fork.text
            assert field in fork.json()["detail"]
            assert len((await client.get("/threads")).json()["threads"]) == 1


async def test_a_fork_with_an_empty_run_id_is_refused_as_the_proxy_refuses_it(db_url: str) -> None:
    async with demo_upstream() as up, recorder_at(db_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            proxied = await client.post("/agents/demo", json={**run_input("t", "r"), "runId": ""})
            assert proxied.status_code == 422
            await post_run(client, "/agents/demo", run_input("t", "r"))
            for body in ({"runId": ""}, {"threadId": ""}):
                fork = await client.post("/runs/r/fork", json=body)
                assert fork.status_code == 422, fork.text
                assert "must be a non-empty string" in fork.json()["detail"]
            assert len((await client.get("/threads")).json()["threads"]) == 1


async def test_text_with_nul_is_stored_and_the_run_closes(db_url: str) -> None:
    async with demo_upstream() as up, recorder_at(db_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            events = await post_run(client, "/agents/demo", run_input("t", "r", "hello\x00world"))
            assert events[-1]["type"] == "RUN_FINISHED"
            store = await open_store(db_url)
            try:
                run = await run_closed(store, "r")
            finally:
                await store.close()
            assert run.status == "finished"
            assert b"hello\\u0000world" in (run.input or b"")
            # a live attach to it ends (it does not hang on a run that never closes)
            stream = await asyncio.wait_for(client.get("/runs/r/stream"), 10)
            assert stream.status_code == 200 and b"RUN_FINISHED" in stream.content
            found = await client.get("/threads", params={"q": "hello\x00world"})
            assert found.status_code == 200
            assert (await client.get("/threads", params={"q": "\x00"})).status_code == 200


@pytest.mark.parametrize(
    "path, params",
    [
        ("/threads", {"agent": "demo\x00"}),
        ("/threads", {"tag": "k:v\x00"}),
        ("/threads", {"since": "2020-01-01\x00"}),
        ("/search", {"q": "hello", "tool": "t\x00"}),
        ("/search", {"q": "hello", "status": "\x00finished"}),
        ("/audit/log", {"action": "fork\x00"}),
        ("/runs/r1/diff", {"toRun": "r\x00"}),
    ],
)
async def test_a_nul_in_a_filter_is_422_naming_the_parameter(
    db_url: str, path: str, params: dict[str, str]
) -> None:
    async with demo_upstream() as up, recorder_at(db_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            await post_run(client, "/agents/demo", run_input("t1", "r1", "hello"))
            answer = await client.get(path, params=params)
            assert answer.status_code == 422, answer.text
            name = next(k for k, v in params.items() if "\x00" in v)
            assert answer.json() == {"detail": f"query parameter {name!r}: must not contain NUL"}
            # without the NUL the same request is answered
            clean = {k: v.replace("\x00", "") for k, v in params.items()}
            assert (await client.get(path, params=clean)).status_code != 422


async def test_one_new_run_id_posted_ten_times_at_once_is_one_200_and_nine_409s(
    db_url: str,
) -> None:
    async with demo_upstream() as up, recorder_at(db_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            posts = [client.post("/agents/demo", json=run_input("t", "dup")) for _ in range(10)]
            answers = await asyncio.gather(*posts)
            assert sorted(a.status_code for a in answers) == [200] + [409] * 9
            for answer in answers[1:]:
                if answer.status_code == 409:
                    assert answer.json() == {"detail": "run 'dup' exists already"} or (
                        "dup" in answer.json()["detail"]
                    )
                    assert "INSERT" not in answer.text and "deadlock" not in answer.text


async def test_the_proxy_takes_only_json(db_url: str) -> None:
    async with demo_upstream() as up, recorder_at(db_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            raw = httpx.Request("POST", "/", json=run_input("t", "r")).content
            for kind in ("text/plain", "application/x-www-form-urlencoded", None):
                headers = {"content-type": kind} if kind else {}
                answer = await client.post("/agents/demo", content=raw, headers=headers)
                assert answer.status_code == 415, (kind, answer.text)
                assert "application/json" in answer.json()["detail"]
            assert (await client.get("/threads")).json()["threads"] == []
            charset = {"content-type": "application/json; charset=utf-8"}
            async with client.stream("POST", "/agents/demo", content=raw, headers=charset) as ok:
                assert ok.status_code == 200
                await ok.aread()


async def test_requests_naming_another_host_are_refused(sqlite_url: str) -> None:
    async with demo_upstream() as up, recorder_at(sqlite_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            port = rec.rsplit(":", 1)[1]
            for host in ("evil.example", f"evil.example:{port}", "127.0.0.2"):
                for method, path in (
                    ("GET", "/threads"),
                    ("GET", "/healthz"),
                    ("POST", "/agents/demo"),
                ):
                    answer = await client.request(
                        method, path, headers={"host": host}, json=run_input("t", "r")
                    )
                    assert answer.status_code == 400, (host, path)
                    assert "allowed_hosts" in answer.json()["detail"]
            assert (await client.get("/threads")).json()["threads"] == []
            for host in (f"localhost:{port}", f"127.0.0.1:{port}", "[::1]", "LOCALHOST"):
                assert (await client.get("/healthz", headers={"host": host})).status_code == 200
    async with (
        demo_upstream() as up,
        recorder_at(sqlite_url, {"demo": up}, allowed_hosts=["recorder.internal"]) as rec,
    ):
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            ok = await client.get("/healthz", headers={"host": "recorder.internal:8000"})
            assert ok.status_code == 200
            assert (await client.get("/healthz")).status_code == 400


async def test_connect_names_what_is_wrong_with_its_input(sqlite_url: str) -> None:
    async with demo_upstream() as up, recorder_at(sqlite_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            await post_run(client, "/agents/demo", {"threadId": "k", "runId": "k1"})
            url = "/agents/demo/connect"
            cases = [
                (b"xx", "not valid JSON"),
                (b"[]", "must be a JSON object"),
                (b'{"threadId":"a/b"}', "threadId must not contain '/'"),
                (b'{"runId":"r"}', "threadId must be a non-empty string"),
            ]
            for body, said in cases:
                answer = await client.post(
                    url, content=body, headers={"content-type": "application/json"}
                )
                assert answer.status_code == 422, body
                assert said in answer.json()["detail"], (body, answer.text)
            # A connect input needs no runId (a client may send any, or none).
            answer = await client.post(url, json={"threadId": "k"})
            assert answer.status_code == 200 and b"RUN_FINISHED" in answer.content
            # As the proxy: a form or text/plain POST is not JSON.
            plain = await client.post(url, content=b'{"threadId":"k"}')
            assert plain.status_code == 415 and "application/json" in plain.json()["detail"]


async def test_a_probe_s_head_and_a_fork_with_no_body(sqlite_url: str) -> None:
    async with demo_upstream() as up, recorder_at(sqlite_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            head = await client.head("/healthz")
            assert head.status_code == 200 and head.content == b""
            got = await client.get("/agents/demo")  # (a browser's address bar)
            assert got.status_code == 405 and got.headers["allow"] == "POST"
            assert "POST" in got.json()["detail"]
            await post_run(client, "/agents/demo", {"threadId": "h", "runId": "h1"})
            # No body: a fork at the run's end, every option its default.
            forked = await client.post("/runs/h1/fork")
            assert forked.status_code == 200, forked.text
            assert b"RUN_FINISHED" in forked.content
            run_id = forked.headers["x-recorder-run-id"]
            run = (await client.get(f"/runs/{run_id}")).json()
            assert (run["parentRunId"], run["parentSeq"]) == ("h1", None)


async def test_cors_only_for_the_origins_configured(sqlite_url: str) -> None:
    page = "http://localhost:3000"
    preflight = {"origin": page, "access-control-request-method": "POST"}
    preflight["access-control-request-headers"] = "content-type,authorization"
    async with demo_upstream() as up, recorder_at(sqlite_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            # None configured: no page of another origin is told it may read anything.
            answer = await client.options("/agents/demo", headers=preflight)
            assert "access-control-allow-origin" not in answer.headers
            answer = await client.get("/threads", headers={"origin": page})
            assert "access-control-allow-origin" not in answer.headers
    async with (
        demo_upstream() as up,
        recorder_at(sqlite_url, {"demo": up}, cors_origins=[page], api_token=TOKEN) as rec,
    ):
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            for path in ("/agents/demo", "/threads", "/runs/r/fork"):
                answer = await client.options(path, headers=preflight)
                assert answer.status_code == 200, path
                assert answer.headers["access-control-allow-origin"] == page
                allowed = answer.headers["access-control-allow-headers"].lower()
                assert "authorization" in allowed and "content-type" in allowed
            other = {**preflight, "origin": "http://evil.example"}
            assert (await client.options("/agents/demo", headers=other)).status_code == 400
            # The proxy's stream and the API's answers name the origin, and expose the run id.
            body = {"threadId": "c", "runId": "c1", "messages": [user("hi")]}
            async with client.stream(
                "POST", "/agents/demo", json=body, headers={"origin": page}
            ) as streamed:
                assert streamed.status_code == 200
                assert streamed.headers["access-control-allow-origin"] == page
                assert "x-recorder-run-id" in streamed.headers["access-control-expose-headers"]
                await streamed.aread()
            bearer = {"authorization": f"Bearer {TOKEN}", "origin": page}
            listed = await client.get("/threads", headers=bearer)
            assert listed.status_code == 200 and listed.json()["threads"]
            assert listed.headers["access-control-allow-origin"] == page
            # The token is still required.
            refused = await client.get("/threads", headers={"origin": page})
            assert refused.status_code == 401


TOKEN = "s3cret-token"


async def test_the_api_documents_need_the_token_and_only_in_the_header(sqlite_url: str) -> None:
    async with demo_upstream() as up, recorder_at(sqlite_url, {"demo": up}, api_token=TOKEN) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            bearer = {"authorization": f"Bearer {TOKEN}"}
            for path in ("/docs", "/redoc", "/openapi.json", "/threads"):
                assert (await client.get(path)).status_code == 401, path
                by_query = await client.get(path, params={"token": TOKEN})
                assert by_query.status_code == 401, path
                assert (await client.get(path, headers=bearer)).status_code == 200, path
            assert (await client.get("/healthz")).status_code == 200


def nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


def orjson_nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


async def test_json_nested_past_any_parser_is_422_not_500(db_url: str) -> None:
    async with demo_upstream() as up, recorder_at(db_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            await post_run(client, "/agents/demo", run_input("t", "r"))
            as_json = {"content-type": "application/json"}
            for body in (
                b"[" * 100_000 + b"]" * 100_000,
                b'{"threadId":"t","runId":"d","state":' + nested(5000) + b"}",
            ):
                for path in ("/agents/demo", "/agents/demo/connect"):
                    answer = await client.post(path, content=body, headers=as_json)
                    assert answer.status_code == 422, (path, answer.text)
            # past 254 levels (what the recorder folds, copies and answers): refused whole
            deep = b'{"threadId":"t","runId":"d","state":' + nested(300) + b"}"
            answer = await client.post("/agents/demo", content=deep, headers=as_json)
            assert answer.status_code == 422 and "254 levels" in answer.json()["detail"]
            fine = b'{"threadId":"t2","runId":"d2","state":' + nested(200) + b"}"
            async with client.stream("POST", "/agents/demo", content=fine, headers=as_json) as ok:
                assert ok.status_code == 200
                await ok.aread()
            assert (await client.get("/runs/d2")).status_code == 200
            assert (
                await client.get("/threads/t2/stream", params={"live": "false"})
            ).status_code == 200
            fork = await client.post(
                "/runs/r/fork",
                content=b'{"dryRun":true,"state":' + nested(900) + b"}",
                headers=as_json,
            )
            assert fork.status_code == 422 and "nested too deeply" in fork.json()["detail"]
            assert len((await client.get("/threads")).json()["threads"]) == 2
            # Past Python's recursion in FastAPI's own body parsing: 422 too, not a 400
            # that says only "There was an error parsing the body".
            very = b"[" * 100_000 + b"]" * 100_000
            for method, path in [
                ("POST", "/runs/r/fork"),
                ("PATCH", "/threads/t/tags"),
                ("POST", "/threads/t/notes"),
            ]:
                answer = await client.request(method, path, content=very, headers=as_json)
                assert answer.status_code == 422, (path, answer.text)
                assert "nested too deeply" in answer.json()["detail"]


async def test_a_fork_s_dry_run_is_refused_where_the_fork_is(db_url: str) -> None:
    async with (
        demo_upstream() as up,
        recorder_at(db_url, {"demo": up}, max_body_bytes=50_000) as rec,
    ):
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            await post_run(client, "/agents/demo", run_input("t", "r"))
            deep = {"state": orjson_nested(300)}
            large = {"messages": ["x" * 60_000]}
            for body, status, said in [
                (deep, 422, "past 254 levels"),
                (large, 413, "the limit is 50000"),
            ]:
                for dry in (True, False):
                    answer = await client.post("/runs/r/fork", json={**body, "dryRun": dry})
                    assert answer.status_code == status, (dry, answer.text)
                    assert said in answer.json()["detail"], (dry, answer.text)
            assert (await client.get("/threads")).json()["threads"][0]["runCount"] == 1


async def test_forks_racing_into_one_new_thread_are_one_200_and_409s(db_url: str) -> None:
    async with demo_upstream() as up, recorder_at(db_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
            await post_run(client, "/agents/demo", run_input("t", "r"))
            forks = [
                client.post("/runs/r/fork", json={"threadId": "branch", "runId": f"f{i}"})
                for i in range(8)
            ]
            answers = await asyncio.gather(*forks)
            assert sorted(a.status_code for a in answers) == [200] + [409] * 7
            thread = (await client.get("/threads/branch")).json()
            assert thread["runCount"] == 1
