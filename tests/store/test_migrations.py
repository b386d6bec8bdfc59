"""Alembic is the only path for DDL: up, down, up again on both databases, and no drift."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import create_async_engine

from recorder.store.migrations import alembic_config, upgrade
from recorder.store.schema import described, metadata

ROOT = Path(__file__).resolve().parents[2]


def _tables(sync_conn: object) -> set[str]:
    names = set(inspect(sync_conn).get_table_names()) - {"alembic_version"}
    return {name for name in names if described(None, name, "table", True, None)}


def _diff(sync_conn: object) -> list[object]:
    opts = {"compare_type": True, "include_object": described}
    context = MigrationContext.configure(sync_conn, opts=opts)  # type: ignore[arg-type]
    return list(compare_metadata(context, metadata))


async def test_upgrade_downgrade_upgrade_without_drift(db_url: str) -> None:
    engine = create_async_engine(db_url)
    try:
        await upgrade(engine)
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) == {
                "threads",
                "runs",
                "run_inputs",
                "input_chunks",
                "events",
                "checkpoints",
                "sanctioned",
                "purges",
                "rewrites",
                "audit_log",
                "search_docs",
                "search_runs",
                "tags",
                "notes",
                "scores",
                "redactions",
            }
            assert await conn.run_sync(_diff) == []
        async with engine.begin() as conn:
            await conn.run_sync(lambda sync: command.downgrade(alembic_config(sync), "base"))
        async with engine.connect() as conn:
            assert await conn.run_sync(_tables) == set()
        await upgrade(engine)
        async with engine.connect() as conn:
            assert await conn.run_sync(_diff) == []
    finally:
        await engine.dispose()


def test_alembic_command_line(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'cli.db'}"
    env = {**os.environ, "RECORDER_DB": url}
    for args in (["upgrade", "head"], ["downgrade", "base"], ["upgrade", "head"], ["check"]):
        done = subprocess.run(
            [sys.executable, "-m", "alembic", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr


async def test_concurrent_starts_migrate_once(pg_url: str) -> None:
    import asyncio

    from recorder.store import open_store

    # Without the migration lock these deadlock on each other's DDL (or collide).
    starts = asyncio.gather(*(open_store(pg_url, migrate=True) for _ in range(4)))
    stores = await asyncio.wait_for(starts, 60)
    try:
        from recorder.store import NewRun

        await stores[0].create_run(NewRun("r", "t"))
        assert (await stores[3].get_run("r")).thread_id == "t"
    finally:
        for s in stores:
            await s.close()


async def test_downgrading_deltas_puts_inputs_back_whole(db_url: str) -> None:
    """Inputs kept as deltas (0007) come back whole below it, and again after upgrading."""
    from sqlalchemy import text

    from recorder.store import NewRun, open_store

    def posted(turn: int) -> bytes:
        history = b",".join(b'{"id":"m%d","c":"%s"}' % (i, b"word " * 30) for i in range(turn + 9))
        return b'{"runId":"r%d","messages":[%s]}' % (turn, history)

    store = await open_store(db_url, migrate=True)
    try:
        for turn in range(5):
            parent = f"r{turn - 1}" if turn else None
            await store.create_run(
                NewRun(f"r{turn}", "t", input=posted(turn), parent_run_id=parent)
            )
    finally:
        await store.close()
    engine = create_async_engine(db_url)
    try:
        async with engine.connect() as conn:
            bases = (await conn.execute(text("SELECT count(base) FROM run_inputs"))).scalar()
            assert bases == 4
        async with engine.begin() as conn:
            await conn.run_sync(lambda sync: command.downgrade(alembic_config(sync), "0006_access"))
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT run_id, input, root FROM run_inputs"))).all()
            whole = {run_id: bytes(kept) for run_id, kept, root in rows if root is None}
            assert whole == {f"r{turn}": posted(turn) for turn in range(1, 5)}
        await upgrade(engine)
    finally:
        await engine.dispose()
    store = await open_store(db_url)
    try:
        for turn in range(5):
            assert (await store.get_run(f"r{turn}")).input == posted(turn)
    finally:
        await store.close()


async def test_downgrading_compression_puts_deltas_and_leaves_back_plain(db_url: str) -> None:
    """Compressed deltas and leaves (0013) are kept plain below it, as that revision reads
    them; checkpoints kept as deltas go (derived); all comes back after upgrading."""
    from sqlalchemy import text

    from recorder.store import NewEvent, NewRun, open_store
    from recorder.store.deltas import compressed, patch
    from recorder.store.inputs import PACKED, Chunk, reassemble

    def posted(turn: int) -> bytes:
        said = b",".join(
            b'{"id":"m%d","c":"%s"}' % (i, b"word %d " % i * 9) for i in range(turn + 40)
        )
        return b'{"runId":"r%d","messages":[%s]}' % (turn, said)

    store = await open_store(db_url, migrate=True, checkpoint_deltas=True)
    try:
        for turn in range(4):
            run_id = f"r{turn}"
            await store.create_run(NewRun(run_id, "t", input=posted(turn)))
            await store.append(run_id, [NewEvent(b"{}", "CUSTOM")])
            await store.set_status(run_id, "finished")
            seen = await store.get_run(run_id, input=False)
            await store.save_checkpoint(run_id, 0, posted(turn) + b" and more", seen=seen)
    finally:
        await store.close()
    engine = create_async_engine(db_url)
    try:
        async with engine.connect() as conn:
            levels = (await conn.execute(text("SELECT level FROM input_chunks"))).scalars()
            assert PACKED in set(levels)
            deltas = (
                await conn.execute(text("SELECT input FROM run_inputs WHERE base IS NOT NULL"))
            ).scalars()
            assert any(compressed(bytes(kept)) for kept in deltas)
            assert (
                await conn.execute(text("SELECT count(*) FROM checkpoints WHERE from_input"))
            ).scalar() == 4
        async with engine.begin() as conn:
            await conn.run_sync(
                lambda sync: command.downgrade(alembic_config(sync), "0012_input_rewrites")
            )
        async with engine.connect() as conn:
            chunks = {
                bytes(key): Chunk(bytes(key), int(level), bytes(data))
                for key, level, data in await conn.execute(
                    text("SELECT hash, level, data FROM input_chunks")
                )
            }
            assert all(chunk.level >= 0 for chunk in chunks.values())
            rows = {
                run_id: (kept, root, base)
                for run_id, kept, root, base in await conn.execute(
                    text("SELECT run_id, input, root, base FROM run_inputs")
                )
            }
            assert (await conn.execute(text("SELECT count(*) FROM checkpoints"))).scalar() == 0

        def plain(run_id: str) -> bytes:  # as the revision below rebuilds an input
            kept, root, base = rows[run_id]
            if base is None:
                return reassemble(bytes(root), chunks) if kept is None else bytes(kept)
            assert not compressed(bytes(kept))
            return patch(plain(base), bytes(kept))

        assert {run_id: plain(run_id) for run_id in rows} == {f"r{t}": posted(t) for t in range(4)}
        await upgrade(engine)
    finally:
        await engine.dispose()
    store = await open_store(db_url)
    try:
        for turn in range(4):
            assert (await store.get_run(f"r{turn}")).input == posted(turn)
    finally:
        await store.close()


async def test_downgrading_storage_puts_chunked_inputs_back_whole(db_url: str) -> None:
    from sqlalchemy import text

    from recorder.store import NewRun, open_store

    store = await open_store(db_url, migrate=True)
    big = b'{"messages":[' + b",".join(b'{"id":"m%d","c":"%d"}' % (i, i * 7) for i in range(300))
    big += b"]}"
    try:
        await store.create_run(NewRun("r1", "t", input=big))
    finally:
        await store.close()
    engine = create_async_engine(db_url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(lambda sync: command.downgrade(alembic_config(sync), "0002"))
        async with engine.connect() as conn:
            kept = (await conn.execute(text("SELECT input FROM run_inputs"))).scalar()
            assert bytes(kept) == big
        await upgrade(engine)
    finally:
        await engine.dispose()
    store = await open_store(db_url)
    try:
        assert (await store.get_run("r1")).input == big
    finally:
        await store.close()
