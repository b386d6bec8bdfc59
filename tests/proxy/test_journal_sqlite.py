"""SQLite outages: the database file locked by another process past the deadline, and a
full disk. Streams go on, their frames are journaled, and land byte for byte once the
database takes writes again."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx

from recorder.store import open_store
from tests.proxy.outage import (
    assert_clean,
    assert_recorded,
    degraded,
    drained,
    gather_streams,
    stream,
)
from tests.servers import demo_upstream, recorder_at

_LOCKER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("ROLLBACK")
"""


async def _lock(path: Path, seconds: float) -> asyncio.subprocess.Process:
    """Another process holding the database's write lock for ``seconds``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _LOCKER, str(path), str(seconds), stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    assert (await proc.stdout.readline()).strip() == b"locked"
    return proc


async def test_sqlite_locked_past_the_deadline(tmp_path: Path) -> None:
    path = tmp_path / "recorder.db"
    url = f"sqlite+aiosqlite:///{path}"
    async with (
        demo_upstream() as agent,
        recorder_at(url, {"demo": agent}, store_deadline=0.3) as base,
        httpx.AsyncClient(timeout=60, trust_env=False) as client,
    ):
        proxy = f"{base}/agents/demo"
        before = await stream(client, proxy, "t0", "before")
        streams = [
            asyncio.create_task(stream(client, proxy, f"t{i}", f"r{i}", extra=60, delay=0.05))
            for i in range(5)
        ]
        await asyncio.sleep(0.5)
        locker = await _lock(path, 4)
        health = await degraded(client, base)
        assert health["journal"]["bytes"] > 0
        during = await stream(client, proxy, "t-new", "during", extra=5)
        await locker.wait()
        seen = await gather_streams(*streams)
        await drained(client, base)
        after = await stream(client, proxy, "t-new", "after", extra=5)
        store = await open_store(url)
        try:
            for one in [before, *seen, during, after]:
                assert_clean(one)
                await assert_recorded(store, one)
            # The run created while the database was locked is the thread's first: the next
            # run's parent was inferred from it once both were in.
            assert (await store.get_run("after")).parent_run_id == "during"
        finally:
            await store.close()


@contextlib.contextmanager
def _tmpfs(where: Path, size: str) -> Iterator[bool]:
    """A small tmpfs at ``where`` if this machine lets us mount one."""
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    try:
        yield done.returncode == 0
    finally:
        if done.returncode == 0:
            subprocess.run(["umount", "-l", str(where)], check=False)
