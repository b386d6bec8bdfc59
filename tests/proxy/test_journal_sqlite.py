"""SQLite outages: the database file locked by another process past the deadline, and a
full disk. Streams go on, their frames are journaled, and land byte for byte once the
database takes writes again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from recorder.api import create_app
from recorder.config import AgentConfig, Settings
from recorder.store import open_store
from tests.proxy.down import Late, Switchable
from tests.proxy.outage import (
    assert_clean,
    assert_recorded,
    degraded,
    drained,
    gather_streams,
    stream,
)
from tests.servers import (
    demo_upstream,
    eventually,
    recorder_at,
    scripted_upstream,
    serving,
    sse,
)

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


@contextlib.asynccontextmanager
async def _demo_recorder(
    tmp_path: Path, **settings: Any
) -> AsyncIterator[tuple[Path, str, str, httpx.AsyncClient]]:
    """A recorder on a SQLite file, in front of the demo agent, its writes journaled past
    0.3 s: the file, its URL, the recorder's base URL, a client."""
    path = tmp_path / "recorder.db"
    url = f"sqlite+aiosqlite:///{path}"
    async with (
        demo_upstream() as agent,
        recorder_at(url, {"demo": agent}, store_deadline=0.3, **settings) as base,
        httpx.AsyncClient(timeout=60, trust_env=False) as client,
    ):
        yield path, url, base, client


async def test_sqlite_locked_past_the_deadline(tmp_path: Path) -> None:
    async with _demo_recorder(tmp_path) as (path, url, base, client):
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
        metrics = (await client.get(f"{base}/metrics")).text
        (held,) = [
            line for line in metrics.splitlines() if line.startswith("recorder_journal_bytes")
        ]
        assert float(held.split()[-1]) > 0
        during = await stream(client, proxy, "t-new", "during", extra=5)
        # A run held in the journal cannot be read yet: 503, saying why (not 404).
        held = await client.get(f"{base}/runs/during")
        assert held.status_code == 503 and "journal" in held.json()["detail"]
        # So is its state (the state routes' own endpoint answers it, the same way).
        state = await client.get(f"{base}/runs/during/state", params={"seq": "0"})
        assert state.status_code == 503 and state.headers["retry-after"] == "1"
        assert "journal" in state.json()["detail"]
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


def _fill(disk: Path) -> Path:
    """Take every free byte of the filesystem at ``disk``; the file that holds them."""
    filler = disk / "filler"
    block = b"\0" * 65536
    # Unbuffered: a write the disk refuses leaves nothing behind for close() to flush.
    with filler.open("wb", buffering=0) as file:
        try:
            while True:
                file.write(block)
        except OSError:
            pass
    return filler


@contextlib.asynccontextmanager
async def _full_disk_recorder(
    tmp_path: Path, agent: str
) -> AsyncIterator[tuple[str, str, Any, Any]]:
    """A recorder whose database's filesystem can be filled and freed: a small tmpfs when
    this machine lets us mount one, else a store whose writes fail as a full disk makes
    them fail (at the store boundary). Yields its base URL, its database URL, fill, free."""
    journal = str(tmp_path / "journal")
    with _tmpfs(tmp_path / "disk", "16m") as mounted:
        if mounted:
            url = f"sqlite+aiosqlite:///{tmp_path / 'disk' / 'recorder.db'}"
            filler: list[Path] = []
            async with recorder_at(url, {"demo": agent}, journal_dir=journal) as base:
                yield (
                    base,
                    url,
                    lambda: filler.append(_fill(tmp_path / "disk")),
                    lambda: filler.pop().unlink(),
                )
            return
        url = f"sqlite+aiosqlite:///{tmp_path / 'recorder.db'}"
        store = Switchable(await open_store(url, migrate=True))
        settings = Settings(db=url, agents={"demo": agent}, journal_dir=journal)
        try:
            async with serving(create_app(settings, store=store)) as base:  # type: ignore[arg-type]
                yield (
                    base,
                    url,
                    lambda: setattr(store, "down", True),
                    lambda: setattr(store, "down", False),
                )
        finally:
            await store.store.close()


async def test_disk_full_on_the_database_filesystem(tmp_path: Path) -> None:
    async with (
        demo_upstream() as agent,
        _full_disk_recorder(tmp_path, agent) as (
            base,
            url,
            fill,
            free,
        ),
        httpx.AsyncClient(timeout=60, trust_env=False) as client,
    ):
        proxy = f"{base}/agents/demo"
        streams = [
            asyncio.create_task(stream(client, proxy, f"t{i}", f"r{i}", extra=200, delay=0.03))
            for i in range(4)
        ]
        await asyncio.sleep(0.5)
        fill()
        await degraded(client, base)
        during = await stream(client, proxy, "t-new", "during", extra=20)
        await asyncio.sleep(1)
        free()
        seen = await gather_streams(*streams)
        await drained(client, base)
        store = await open_store(url)
        try:
            for one in [*seen, during]:
                assert_clean(one)
                await assert_recorded(store, one)
        finally:
            await store.close()


@pytest.mark.parametrize("bound, policy", [("bytes", "error"), ("outage", "continue")])
async def test_past_the_bounds_on_store_failure_applies(
    tmp_path: Path, bound: str, policy: str
) -> None:
    """Past the journal's size or the outage's length, new frames get ``on_store_failure``;
    what the journal holds is kept and lands."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'recorder.db'}"
    store = Switchable(await open_store(url, migrate=True))
    limits = {"journal_max_bytes": 4000} if bound == "bytes" else {"journal_max_outage": 1.0}
    settings = Settings(
        db=url,
        agents={},
        journal_dir=str(tmp_path / "journal"),
        on_store_failure=policy,
        **limits,
    )
    try:
        async with (
            demo_upstream() as agent,
            serving(
                create_app(
                    settings.model_copy(update={"agents": {"demo": AgentConfig(url=agent)}}),
                    store=store,
                )  # type: ignore[arg-type]
            ) as base,
            httpx.AsyncClient(timeout=60, trust_env=False) as client,
        ):
            task = asyncio.create_task(
                stream(client, f"{base}/agents/demo", "t", "r", extra=150, delay=0.02)
            )
            await asyncio.sleep(0.3)
            store.down = True
            seen = await task
            store.down = False
            await drained(client, base)
    finally:
        events = await store.store.read_events("r")
        run = await store.store.get_run("r")
        await store.store.close()
    assert seen.error is None and seen.status == 200
    recorded = [(e.seq, e.payload) for e in events]
    assert run.status == "error" and run.error is not None and "store failure" in run.error
    if policy == "error":
        # The client's stream ended with the recorder's store_failure RUN_ERROR, the one
        # frame not in the log; every frame before it is.
        assert b"store_failure" in seen.frames[-1][1]
        assert recorded == seen.frames[:-1]
    else:
        # The client got the whole run; the log holds what came before the bound.
        assert b"RUN_FINISHED" in seen.frames[-1][1]
        assert recorded == seen.frames[: len(recorded)] and len(recorded) < len(seen.frames)
    assert len(recorded) > 5  # frames were journaled before the bound


async def test_writes_that_commit_past_the_deadline_land_once(tmp_path: Path) -> None:
    """A slow database: writes time out, are journaled, and then commit anyway. The drain
    finds them in and writes nothing twice (a run, its events)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'recorder.db'}"
    store = Late(await open_store(url, migrate=True), delay=0.6)
    settings = Settings(
        db=url,
        agents={},
        journal_dir=str(tmp_path / "journal"),
        store_deadline=0.2,
    )
    try:
        async with (
            demo_upstream() as agent,
            serving(
                create_app(
                    settings.model_copy(update={"agents": {"demo": AgentConfig(url=agent)}}),
                    store=store,
                )  # type: ignore[arg-type]
            ) as base,
            httpx.AsyncClient(timeout=60, trust_env=False) as client,
        ):
            proxy = f"{base}/agents/demo"
            streams = [
                asyncio.create_task(stream(client, proxy, f"t{i}", f"r{i}", extra=80, delay=0.02))
                for i in range(3)
            ]
            await asyncio.sleep(0.3)
            store.slow = True
            during = asyncio.create_task(stream(client, proxy, "t-new", "during", extra=10))
            await asyncio.sleep(1.0)
            store.slow = False
            seen = await gather_streams(*streams, during)
            await drained(client, base)
            assert store.late > 0
        # Found in already, not refused: nothing was set aside.
        assert not (tmp_path / "journal" / "rejected.log").exists()
        for one in seen:
            assert_clean(one)
            await assert_recorded(store.store, one)
        assert [r.run_id for r in await store.store.list_runs("t-new")] == ["during"]
    finally:
        await store.store.close()


async def test_a_split_secret_recorded_through_an_outage_is_redacted_once_it_lands(
    tmp_path: Path,
) -> None:
    """Behind a run, the recorder redacts what its deltas hold together; a run whose end the
    journal held is redacted once the journal has drained, not skipped."""
    path = tmp_path / "recorder.db"
    url = f"sqlite+aiosqlite:///{path}"
    frames = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "mail carol@exa"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "mple.org now"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    chunks = [b"data: " + json.dumps(f).encode() + b"\n\n" for f in frames]
    agent = scripted_upstream({"a": lambda _request: sse(chunks)})
    rules = {"rules": ["email"]}
    async with (
        serving(agent) as scripted,
        recorder_at(url, {"a": f"{scripted}/a"}, store_deadline=0.3, redaction=rules) as base,
        httpx.AsyncClient(timeout=60, trust_env=False) as client,
    ):
        locker = await _lock(path, 3)
        body = {"threadId": "t", "runId": "r", "messages": []}
        answer = await client.post(f"{base}/agents/a", json=body)
        assert answer.status_code == 200 and b"RUN_FINISHED" in answer.content
        await degraded(client, base)
        await locker.wait()
        await drained(client, base)

        async def redacted() -> bool:
            store = await open_store(url)
            try:
                payloads = [e.payload for e in await store.read_events("r")]
            finally:
                await store.close()
            return b"[REDACTED:email]" in payloads[2] and b"mple.org" not in payloads[3]

        await eventually(redacted, "the split address redacted", 20)


async def test_a_run_id_posted_twice_during_an_outage_stays_one_run(tmp_path: Path) -> None:
    """A second run of an id while the first is being recorded is refused at once (its seqs
    would mix with the first's in the journal); one of an id the database holds already is
    refused at replay, whole, into rejected.log (never merged, never dropped unseen)."""
    journal = tmp_path / "journal"
    async with _demo_recorder(tmp_path, journal_dir=str(journal)) as (path, url, base, client):
        proxy = f"{base}/agents/demo"
        before = await stream(client, proxy, "td", "done-before")
        assert_clean(before)
        locker = await _lock(path, 4)
        first = asyncio.create_task(stream(client, proxy, "tl", "live", extra=20, delay=0.05))
        await degraded(client, base)
        again = await client.post(proxy, json={"threadId": "tl", "runId": "live", "messages": []})
        assert again.status_code == 409 and "already exists" in again.json()["detail"]
        # The database holds this one (recorded before the outage): only the replay knows.
        duplicate = await stream(client, proxy, "td", "done-before")
        assert duplicate.status == 200
        await locker.wait()
        live = await first
        await drained(client, base)
        store = await open_store(url)
        try:
            assert_clean(live)
            await assert_recorded(store, live)
            await assert_recorded(store, before)  # as it was: nothing of the duplicate
            assert (await store.verify_chains(run_ids=["live", "done-before"])).ok
        finally:
            await store.close()
    rejected = (journal / "rejected.log").read_bytes()
    assert b"done-before" in rejected


async def test_a_run_that_ended_during_an_outage_keeps_its_end_time(tmp_path: Path) -> None:
    async with _demo_recorder(tmp_path) as (path, url, base, client):
        locker = await _lock(path, 4)
        seen = await stream(client, f"{base}/agents/demo", "te", "quick")
        assert_clean(seen)
        await degraded(client, base)
        await locker.wait()
        await drained(client, base)
        store = await open_store(url)
        try:
            run = await store.get_run("quick")
            last = (await store.read_events("quick"))[-1]
        finally:
            await store.close()
    # Its end is when it ended (its last frame), not when the journal reached the database.
    assert run.finished_at is not None and last.recorded_at is not None
    assert abs(run.finished_at - last.recorded_at) < 1.0
    assert run.finished_at - run.created_at < 1.5
