"""A PostgreSQL outage under load: a private cluster stopped (``-m immediate``) for ten
seconds while 20 streams run, then started. No client sees an error; once the journal is
drained every frame every client saw is in the database, byte for byte, seqs gap-free, runs
finished. The same with the recorder killed (``kill -9``) during the outage and restarted
after it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import httpx

from recorder.store import open_store
from tests.conftest import require
from tests.pgcluster import Cluster, pg_bin, private_cluster
from tests.proxy.outage import (
    Seen,
    assert_clean,
    assert_recorded,
    degraded,
    drained,
    gather_streams,
    stream,
)
from tests.servers import demo_upstream, eventually, free_port, healthy, recorder_at

STREAMS = 20
OUTAGE = 10.0


async def _migrated(cluster: Cluster) -> None:
    store = await open_store(cluster.url, migrate=True)
    await store.close()


async def test_postgres_outage_under_20_streams(tmp_path: Path) -> None:
    require(pg_bin() is not None, "PostgreSQL's server programs (initdb, pg_ctl)")
    async with private_cluster() as cluster, demo_upstream() as agent:
        await _migrated(cluster)
        async with (
            recorder_at(
                cluster.url, {"demo": agent}, store_deadline=1.0, journal_dir=str(tmp_path / "j")
            ) as base,
            httpx.AsyncClient(timeout=120, trust_env=False) as client,
        ):
            proxy = f"{base}/agents/demo"
            streams = [
                asyncio.create_task(stream(client, proxy, f"t{i}", f"r{i}", extra=150, delay=0.1))
                for i in range(STREAMS)
            ]
            await asyncio.sleep(2)
            await asyncio.to_thread(cluster.stop, "immediate")
            stopped = time.monotonic()
            health = await degraded(client, base)
            assert health["journal"]["bytes"] > 0 and health["journal"]["ageSeconds"] >= 0
            # Reads cannot be answered meanwhile, and say why.
            read = await client.get(f"{base}/runs/r0")
            assert read.status_code == 503 and "unavailable" in read.json()["detail"]
            during = [
                await stream(client, proxy, "t-new", f"during{i}", extra=10) for i in range(3)
            ]
            await asyncio.sleep(max(0.0, OUTAGE - (time.monotonic() - stopped)))
            await asyncio.to_thread(cluster.start)
            seen = await gather_streams(*streams)
            await drained(client, base)
            after = await stream(client, proxy, "t-new", "after", extra=10)
        store = await open_store(cluster.url)
        try:
            for one in [*seen, *during, after]:
                assert_clean(one)
                await assert_recorded(store, one)
            runs = [r.run_id for r in await store.list_runs("t-new")]
            assert runs == ["during0", "during1", "during2", "after"]
            assert (await store.get_run("after")).parent_run_id == "during2"
        finally:
            await store.close()


async def _serve(db: str, agent: str, port: int, journal: Path) -> asyncio.subprocess.Process:
    env = {
        **os.environ,
        "RECORDER_DB": db,
        "RECORDER_HEARTBEAT_INTERVAL": "0.3",
        "RECORDER_STORE_DEADLINE": "1",
        "RECORDER_JOURNAL_DIR": str(journal),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "recorder.cli.main",
        "serve",
        "--agent",
        f"demo={agent}",
        "--port",
        str(port),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    async with httpx.AsyncClient(trust_env=False) as client:
        await healthy(client, f"http://127.0.0.1:{port}", timeout=30)
    return proc


async def test_kill_9_during_a_postgres_outage(tmp_path: Path) -> None:
    require(pg_bin() is not None, "PostgreSQL's server programs (initdb, pg_ctl)")
    journal = tmp_path / "journal"
    async with private_cluster() as cluster, demo_upstream() as agent:
        await _migrated(cluster)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        proc = await _serve(cluster.url, agent, port, journal)
        try:
            async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
                streams = [
                    asyncio.create_task(
                        stream(
                            client, f"{base}/agents/demo", f"t{i}", f"r{i}", extra=300, delay=0.05
                        )
                    )
                    for i in range(STREAMS)
                ]
                await asyncio.sleep(1.5)
                await asyncio.to_thread(cluster.stop, "immediate")
                await degraded(client, base)
                during = await stream(client, f"{base}/agents/demo", "t-new", "during", extra=5)
                await asyncio.sleep(2)
                os.kill(proc.pid, signal.SIGKILL)
                await proc.wait()
                seen: list[Seen] = await gather_streams(*streams)
        finally:
            if proc.returncode is None:
                proc.kill()
        assert any(journal.glob("journal-*.log"))
        await asyncio.to_thread(cluster.start)
        restarted = await _serve(cluster.url, agent, port, journal)
        try:
            store = await open_store(cluster.url)
            try:
                assert_clean(during)
                await assert_recorded(store, during)
                for one in seen:
                    assert len(one.frames) > 20, one.run_id
                    # Cut off by the kill: every frame its client saw landed, and the run,
                    # whose recorder is gone, is closed.
                    await assert_recorded(store, one, status="incomplete")
            finally:
                await store.close()
            # The adopted journal was replayed and removed; this process has its own.
            assert len(list(journal.glob("journal-*.log"))) == 1
            async with httpx.AsyncClient(timeout=60, trust_env=False) as client:
                after = await stream(client, f"{base}/agents/demo", "t-new", "after", extra=5)
                assert_clean(after)

                async def listed() -> bool:
                    r = await client.get(f"{base}/runs/after")
                    return r.status_code == 200 and r.json()["status"] == "finished"

                await eventually(listed, "the run after the restart recorded")
        finally:
            restarted.send_signal(signal.SIGTERM)
            await restarted.wait()
