"""Server processes for the benchmarks: started on loopback ports, always terminated.

Each server is a child process (``python -m bench.serve ...``) so the client's event loop
never shares a CPU-bound loop with a server. Children are told to die with the benchmark
(``PR_SET_PDEATHSIG`` on Linux) and are terminated in ``close()`` however the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from recorder.cli.serve import free_port

ROOT = Path(__file__).resolve().parents[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, Linux only
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def child_env() -> dict[str, str]:
    # No RECORDER_* setting from the caller's environment may change what is measured.
    env = {k: v for k, v in os.environ.items() if not k.startswith("RECORDER_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


@dataclass(slots=True)
class Server:
    name: str
    url: str
    process: subprocess.Popen[bytes]
    log: Path


_PORT_TRIES = 3
_PORT_TAKEN = "address already in use"


class ServerPool:
    """Starts servers on demand; ``close()`` terminates every one of them."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.servers: dict[str, Server] = {}

    async def start(self, specs: dict[str, list[str]], timeout: float = 60.0) -> dict[str, str]:
        """Start ``{name: [kind, args...]}`` together; their base URLs once all answer."""
        started = await asyncio.gather(
            *(self._start(name, args, timeout) for name, args in specs.items())
        )
        return {server.name: server.url for server in started}

    async def _start(self, name: str, args: list[str], timeout: float) -> Server:
        # The port is free when chosen, but a server takes about a second to bind it, and
        # meanwhile any connection made on this machine may get it as its own local port:
        # a server that finds its port taken is started again on another.
        for attempt in range(_PORT_TRIES):
            server = self._spawn(name, args)
            try:
                await self._ready(server, timeout)
                return server
            except RuntimeError:
                taken = _PORT_TAKEN in server.log.read_text(errors="replace")
                if not taken or attempt == _PORT_TRIES - 1:
                    raise
                await self.stop(name)
        raise AssertionError("unreachable")

    def url(self, name: str) -> str | None:
        server = self.servers.get(name)
        return None if server is None else server.url

    def rss_mb(self, name: str) -> float:
        """The server process's resident memory now, in MB (Linux /proc)."""
        pid = self.servers[name].process.pid
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    async def idle(self, name: str, timeout: float = 30.0) -> None:
        """Wait until the server process stops using the CPU (under 1 ms of it in 20 ms):
        what a recorder does behind a closed run (checkpoints, search indexing) is its own
        cost, and must not land on the next path measured, nginx's say."""
        pid = self.servers[name].process.pid
        deadline = time.monotonic() + timeout
        before = _cpu_seconds(pid)
        while time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            now = _cpu_seconds(pid)
            if now - before < 0.001:
                return
            before = now

    async def stop(self, name: str) -> None:
        server = self.servers.pop(name, None)
        if server is not None:
            await asyncio.to_thread(_terminate, server.process)

    async def close(self) -> None:
        for name in list(self.servers):
            await self.stop(name)

    def _spawn(self, name: str, args: list[str]) -> Server:
        port = free_port()
        log = self.workdir / f"server-{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "bench.serve", *args, "--port", str(port)],
                cwd=ROOT,
                env=child_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        server = Server(name, f"http://127.0.0.1:{port}", process, log)
        self.servers[name] = server
        return server

    async def _ready(self, server: Server, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(trust_env=False, timeout=2.0) as client:
            while time.monotonic() < deadline:
                if server.process.poll() is not None:
                    break
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(server.url + "/healthz")).status_code == 200:
                        return
                await asyncio.sleep(0.05)
        tail = server.log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"server {server.name!r} did not start:\n{tail}")


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _busy_seconds() -> float:
    """CPU time the whole machine spent busy so far, all cores (Linux /proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(value) for value in fields]
    idle = ticks[3] + ticks[4]  # idle and iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


async def quiet(busy: float = 0.1, window: float = 0.25, timeout: float = 60.0) -> float:
    """Wait until the machine is quiet (under ``busy`` of one core in use over ``window``
    seconds), at most ``timeout`` seconds; the seconds waited. What one benchmark leaves
    behind (PostgreSQL vacuuming the databases it filled, a server's work behind its last
    run) then lands on no measurement of the next."""
    started = time.monotonic()
    before = _busy_seconds()
    while time.monotonic() - started < timeout:
        await asyncio.sleep(window)
        now = _busy_seconds()
        if now - before < busy * window:
            break
        before = now
    return time.monotonic() - started
