"""A PostgreSQL outage mid-stream, on a private cluster stopped and started under a live
recorder: clients get a clear answer during it, and once the database is back the same
process closes the runs the outage cut off (no run stays ``running``)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import orjson
from starlette.requests import Request
from starlette.responses import Response

from recorder.store import open_store
from recorder.wire.sse import FrameSplitter
from tests.conftest import require
from tests.pgcluster import pg_bin, private_cluster
from tests.servers import eventually, recorder_at, run_recorded, scripted_upstream, serving, sse


def slow_run(thread: str, run: str, frames: int = 400) -> list[bytes]:
    chunks = [f'data: {{"type":"RUN_STARTED","threadId":"{thread}","runId":"{run}"}}\n\n'.encode()]
    chunks.append(b'data: {"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}\n\n')
    chunks += [
        f'data: {{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"w{i} "}}\n\n'.encode()
        for i in range(frames)
    ]
    chunks.append(b'data: {"type":"TEXT_MESSAGE_END","messageId":"m"}\n\n')
    chunks.append(
        f'data: {{"type":"RUN_FINISHED","threadId":"{thread}","runId":"{run}"}}\n\n'.encode()
    )
    return chunks


def frames_of(raw: bytes) -> list[dict[str, Any]]:
    splitter = FrameSplitter()
    return [orjson.loads(f.data) for f in splitter.feed(raw) + splitter.close()]


async def test_runs_cut_off_by_an_outage_are_closed_when_the_database_returns() -> None:
    require(pg_bin() is not None, "PostgreSQL's server programs (initdb, pg_ctl)")

    def agent(request: Request) -> Response:
        return sse(slow_run("t", "r"), delay=0.02)

    async with private_cluster() as cluster, serving(scripted_upstream({"a": agent})) as up:
        # Without the journal (``journal = false``): the outage is fail-closed, as the
        # recorder is where the journal is off or past its bounds (the journal's own outage
        # tests: tests/proxy/test_journal_pg.py).
        async with recorder_at(cluster.url, {"a": f"{up}/a"}, journal=False) as rec:
            async with httpx.AsyncClient(base_url=rec, timeout=60) as client:
                body = {"threadId": "t", "runId": "r", "messages": []}
                proxied = asyncio.create_task(client.post("/agents/a", json=body))
                await run_recorded(client, rec, "r")
                attach = asyncio.create_task(client.get("/runs/r/stream"))
                await asyncio.sleep(0.5)
                await asyncio.to_thread(cluster.stop)

                answer = await asyncio.wait_for(proxied, 30)
                last = frames_of(answer.content)[-1]
                assert (last["type"], last["code"]) == ("RUN_ERROR", "store_failure")

                # during the outage: a clear 503 from reads and /healthz, never a 500
                for path in (
                    "/healthz",
                    "/runs/r",
                    "/threads",
                    "/runs/r/events",
                    "/threads/t",
                    "/export",
                ):
                    during = await client.get(path)
                    assert during.status_code == 503, (path, during.text)
                    assert during.json() == {"detail": "the database is unavailable"}
                refused = await client.post(
                    "/agents/a", json={"threadId": "t", "runId": "r2", "messages": []}
                )
                assert refused.status_code == 503, refused.text
                assert not attach.done(), "a live attach waits for the run's end"

                await asyncio.to_thread(cluster.start)

                async def closed() -> bool:
                    with contextlib.suppress(httpx.HTTPError):
                        got = await client.get("/runs/r")
                        return got.status_code == 200 and got.json()["status"] != "running"
                    return False

                await eventually(closed, "the cut-off run closed by the same process", 20)
                run = (await client.get("/runs/r")).json()
                assert run["status"] == "error"
                assert "store" in run["error"] and "unavailable" in run["error"]
                attached = await asyncio.wait_for(attach, 20)
                assert attached.status_code == 200
                ending = frames_of(attached.content)[-1]
                assert (ending["type"], ending["code"]) == ("RUN_ERROR", "store_failure")
                events = (await client.get("/runs/r/events")).json()["events"]
                assert events[-1]["origin"] == "recorder"
                assert [e["seq"] for e in events] == list(range(len(events)))
                assert (await client.get("/healthz")).status_code == 200
        store = await open_store(cluster.url)
        try:
            assert (await store.get_run("r")).status == "error"
        finally:
            await store.close()
