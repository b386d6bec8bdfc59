"""A PostgreSQL that stops answering (its host frozen, a partition: connections open, no
answer) neither hangs the health probe nor the reads: each is a 503 past its deadline, and
once the database answers again the same process serves everything it recorded."""

from __future__ import annotations

import asyncio
import time

import httpx
from starlette.requests import Request
from starlette.responses import Response

from tests.conftest import require
from tests.hostile.test_outage import slow_run
from tests.pgcluster import pg_bin, private_cluster
from tests.servers import recorder_at, scripted_upstream, serving, sse

READS = ("/threads", "/threads/t", "/runs/r", "/runs/r/events", "/runs/r/state?seq=5")


async def test_reads_answer_503_past_their_deadline_while_the_database_is_paused() -> None:
    require(pg_bin() is not None, "PostgreSQL's server programs (initdb, pg_ctl)")

    def agent(request: Request) -> Response:
        return sse(slow_run("t", "r", frames=20))

    async with (
        private_cluster() as cluster,
        serving(scripted_upstream({"a": agent})) as up,
        recorder_at(
            cluster.url, {"a": f"{up}/a"}, journal=False, store_deadline=0.5, read_deadline=1.0
        ) as rec,
        httpx.AsyncClient(base_url=rec, timeout=30, trust_env=False) as client,
    ):
        proxied = await client.post("/agents/a", json={"threadId": "t", "runId": "r"})
        assert proxied.status_code == 200 and b"RUN_FINISHED" in proxied.content
        before = {path: (await client.get(path)).json() for path in READS}

        with cluster.paused():
            began = time.monotonic()
            health = await client.get("/healthz")
            assert health.status_code == 503
            assert health.json() == {"detail": "the database did not answer within 0.5 s"}
            assert time.monotonic() - began < 3
            # Every pooled connection a read left behind is still waiting: the next reads
            # are released at their deadline all the same, one by one and at once.
            for path in (*READS, "/search?q=w1"):
                began = time.monotonic()
                answer = await client.get(path)
                assert answer.status_code == 503, path
                assert answer.json() == {"detail": "the database did not answer within 1 s"}
                assert time.monotonic() - began < 5, path
            together = await asyncio.gather(*(client.get(path) for path in READS))
            assert [answer.status_code for answer in together] == [503] * len(READS)

        async def answered() -> bool:
            return (await client.get("/healthz")).status_code == 200

        deadline = time.monotonic() + 20
        while not await answered():
            assert time.monotonic() < deadline, "the database answers, the recorder does not"
            await asyncio.sleep(0.1)
        after = {path: (await client.get(path)).json() for path in READS}
        assert after == before
