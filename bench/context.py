"""What every benchmark gets: the plan (counts), a work directory, the servers, PostgreSQL."""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from bench import nginx
from bench.servers import ServerPool

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
SEED = 1


@dataclass(frozen=True, slots=True)
class Plan:
    """Counts and rounds: the full run (the issue's numbers) or ``--quick``."""

    quick: bool
    rounds: int
    proxy_events: int
    ttfe_requests: int
    append_batches: int
    batch_size: int
    read_events: int
    read_repeats: int
    fold_events: int
    state_events: int
    state_points: int
    peer_turns: int
    peer_rounds: int
    peer_reads: int
    concurrent_streams: int
    aggregate_streams: int

    @classmethod
    def full(cls) -> Plan:
        return cls(
            quick=False,
            rounds=5,
            proxy_events=20_000,
            ttfe_requests=200,
            append_batches=20,
            batch_size=1000,
            read_events=10_000,
            read_repeats=5,
            fold_events=100_000,
            state_events=100_000,
            state_points=50,
            peer_turns=1000,
            peer_rounds=3,
            peer_reads=50,
            concurrent_streams=50,
            aggregate_streams=200,
        )

    @classmethod
    def small(cls) -> Plan:
        return cls(
            quick=True,
            rounds=2,
            proxy_events=2_000,
            ttfe_requests=30,
            append_batches=3,
            batch_size=1000,
            read_events=2_000,
            read_repeats=2,
            fold_events=10_000,
            state_events=10_000,
            state_points=10,
            peer_turns=60,
            peer_rounds=1,
            peer_reads=10,
            concurrent_streams=5,
            aggregate_streams=10,
        )


class Postgres:
    """Fresh databases for one benchmark run, all dropped at the end; or why there are none."""

    def __init__(self, admin: str = PG_ADMIN) -> None:
        self.admin = admin
        self.created: list[str] = []
        self.unavailable: str | None = None
        self.version: str | None = None
        self._checked = False

    async def available(self) -> bool:
        if not self._checked:
            self._checked = True
            try:
                conn = await asyncpg.connect(self.admin, timeout=5)
            except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
                self.unavailable = f"PostgreSQL at {self.admin} unreachable ({exc}); skipped"
            else:
                self.version = str(await conn.fetchval("SHOW server_version"))
                await conn.close()
        return self.unavailable is None

    async def create(self, purpose: str) -> str:
        """A new, empty database; its plain ``postgresql://`` DSN."""
        name = f"bench_{purpose}_{uuid.uuid4().hex[:10]}"
        conn = await asyncpg.connect(self.admin)
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        self.created.append(name)
        return self.admin.rsplit("/", 1)[0] + "/" + name

    async def drop_all(self) -> None:
        if not self.created:
            return
        conn = await asyncpg.connect(self.admin)
        try:
            for name in self.created:
                with contextlib.suppress(asyncpg.PostgresError):
                    await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()
        self.created.clear()


def store_url(dsn: str) -> str:
    """The recorder's URL for a plain DSN or a SQLite path."""
    if dsn.startswith("postgresql://"):
        return dsn.replace("postgresql://", "postgresql+asyncpg://", 1)
    return f"sqlite+aiosqlite:///{dsn}"


@dataclass(slots=True)
class Context:
    plan: Plan
    workdir: Path
    pool: ServerPool
    pg: Postgres

    async def http_servers(self) -> dict[str, str]:
        """The upstream, the bare proxy and the recorder (both durabilities), started once."""
        names = ("upstream", "bare", "commit", "buffered")
        if all(self.pool.url(n) for n in names):
            return {n: self.pool.url(n) or "" for n in names}
        upstream = (
            await self.pool.start(
                {
                    "upstream": [
                        "upstream",
                        "--events",
                        str(self.plan.proxy_events),
                        "--seed",
                        str(SEED),
                    ]
                }
            )
        )["upstream"]
        agents = _agents(upstream)
        started = await self.pool.start(
            {
                "bare": ["bare", *agents],
                "commit": [
                    "recorder",
                    "--db",
                    self._db("commit"),
                    *agents,
                ],
                "buffered": [
                    "recorder",
                    "--db",
                    self._db("buffered"),
                    "--durability",
                    "buffered",
                    *agents,
                ],
            }
        )
        return {"upstream": upstream, **started}

    async def anchors(self) -> tuple[dict[str, str], dict[str, str]]:
        """nginx in front of the upstream, and a recorder on a fresh PostgreSQL database,
        started once: ``({"nginx": url, "pg": url}, {name: why skipped})``."""
        upstream = (await self.http_servers())["upstream"]
        urls: dict[str, str] = {}
        skipped: dict[str, str] = {}
        found, why = await nginx.start(self.pool, upstream)
        if found is None:
            skipped["nginx"] = why
        else:
            urls["nginx"] = found
        running = self.pool.url("commit-pg")
        if running is not None:
            urls["pg"] = running
            urls["pg2"] = self.pool.url("commit-pg2") or ""
        elif not await self.pg.available():
            skipped["pg"] = skipped["pg2"] = self.pg.unavailable or "PostgreSQL unavailable"
        else:
            # Two recorder processes on one database: the scale-out rows use both.
            dsn = await self.pg.create("proxy")
            agents = _agents(upstream)
            recorder = ["recorder", "--db", store_url(dsn), *agents]
            first = await self.pool.start({"commit-pg": recorder})  # it migrates
            second = await self.pool.start({"commit-pg2": recorder})
            urls["pg"], urls["pg2"] = first["commit-pg"], second["commit-pg2"]
        return urls, skipped

    async def paired(self, flags: dict[str, list[str]]) -> dict[str, str]:
        """SQLite recorders that differ only in ``flags`` (server name -> its options),
        each on a fresh file, started together the first time they are asked for: a
        comparison between them measures the option, not the "commit" recorder's file,
        which holds every run of the benchmarks before by then."""
        upstream = (await self.http_servers())["upstream"]
        agents = _agents(upstream)
        missing = {
            name: ["recorder", "--db", self._db(name), *more, *agents]
            for name, more in flags.items()
            if self.pool.url(name) is None
        }
        if missing:
            await self.pool.start(missing)
        return {name: self.pool.url(name) or "" for name in flags}

    def _db(self, server: str) -> str:
        """The URL of the SQLite file of the recorder ``server`` of the pool."""
        return store_url(str(self.workdir / f"proxy-{server}.db"))


def _agents(upstream: str) -> list[str]:
    """A recorder's options naming the upstream's two endpoints as its agents."""
    return ["--agent", f"up={upstream}/events", "--agent", f"small={upstream}/small"]
