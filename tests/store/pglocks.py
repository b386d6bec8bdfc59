"""Waiting, in a PostgreSQL test, until sessions are blocked on locks (not for a while)."""

from __future__ import annotations

import asyncio

import asyncpg


async def waiting_on_locks(conn: asyncpg.Connection, count: int) -> None:
    """Return once ``count`` sessions of the database wait for a lock (within 10 s)."""
    for _ in range(200):
        # Inside a transaction the activity view is read once and kept: read it afresh.
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        waiting = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        if waiting >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{count} sessions never came to wait for a lock")
