"""The private cluster that outage tests stop and start really goes away and comes back."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tests.conftest import require
from tests.pgcluster import pg_bin, private_cluster


async def test_a_private_cluster_stops_and_starts() -> None:
    require(pg_bin() is not None, "PostgreSQL's server programs (initdb, pg_ctl)")
    async with private_cluster() as cluster:
        conn = await asyncpg.connect(cluster.dsn)
        assert await conn.fetchval("SELECT 1") == 1
        await asyncio.to_thread(cluster.stop)
        with pytest.raises((OSError, asyncpg.PostgresError, asyncpg.InterfaceError)):
            await conn.fetchval("SELECT 1")
        with pytest.raises(OSError):
            await asyncpg.connect(cluster.dsn, timeout=2)
        await asyncio.to_thread(cluster.start)
        conn = await asyncpg.connect(cluster.dsn)
        assert await conn.fetchval("SELECT 2") == 2
        await conn.close()
