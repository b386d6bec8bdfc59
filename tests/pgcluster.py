"""A private PostgreSQL cluster for outage tests: stopped and started at will.

The shared server at 127.0.0.1:5432 is never stopped; a test that needs the database to go
away gets a cluster of its own: ``initdb`` into a temporary directory, on its own port, run
as a non-root user (PostgreSQL refuses to run as root; under root the ``postgres`` system
account is used).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg

from tests.servers import free_port


def pg_bin() -> Path | None:
    """The folder of PostgreSQL's server programs (initdb, pg_ctl), if installed."""
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"), reverse=True)
    return candidates[0].parent if candidates else None


def _runner() -> list[str]:
    """The command prefix that runs a program as a user PostgreSQL accepts."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        return []
    return ["runuser", "-u", "postgres", "--"]


class Cluster:
    """One private cluster; ``url`` is its asyncpg-SQLAlchemy URL (database ``recorder``)."""

    def __init__(self, root: Path, port: int, binaries: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.port = port
        self._bin = binaries
        self.url = f"postgresql+asyncpg://postgres@127.0.0.1:{port}/recorder"
        self.dsn = f"postgresql://postgres@127.0.0.1:{port}/recorder"

    def _run(self, *args: str, timeout: float = 60) -> None:
        subprocess.run(
            [*_runner(), *args], check=True, capture_output=True, timeout=timeout, cwd=self.root
        )

    def init(self) -> None:
        self._run(
            str(self._bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        )
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.root}'\nfsync = off\n"
                "max_connections = 200\n"
            )

    def start(self) -> None:
        self._run(
            str(self._bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self, mode: str = "immediate") -> None:
        """Stop the server; ``immediate`` is a crash as far as clients can tell."""
        self._run(str(self._bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """The server and its backends stopped (SIGSTOP) inside: connections stay open and
        nothing answers, as with a database host frozen or cut off; resumed on the way out."""
        master = int((self.data / "postmaster.pid").read_text().split()[0])
        children = subprocess.run(
            ["pgrep", "-P", str(master)], capture_output=True, text=True, check=False
        ).stdout.split()
        pids = [master, *map(int, children)]
        try:
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            yield
        finally:
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)

    async def create_database(self) -> None:
        conn = await asyncpg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/postgres")
        try:
            await conn.execute("CREATE DATABASE recorder")
        finally:
            await conn.close()


@contextlib.contextmanager
def _workdir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="recorder-pg-"))
    try:
        if _runner():
            shutil.chown(root, "postgres", "postgres")
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@asynccontextmanager
async def private_cluster() -> AsyncIterator[Cluster]:
    """A running private cluster with an empty ``recorder`` database; removed afterwards."""
    binaries = pg_bin()
    if binaries is None:
        raise RuntimeError("PostgreSQL's server programs (initdb, pg_ctl) are not installed")
    with _workdir() as root:
        cluster = Cluster(root, free_port(), binaries)
        await asyncio.to_thread(cluster.init)
        await asyncio.to_thread(cluster.start)
        try:
            await cluster.create_database()
            yield cluster
        finally:
            with contextlib.suppress(subprocess.SubprocessError):
                await asyncio.to_thread(cluster.stop, "immediate")
