"""nginx as the production pass-through anchor for the proxy and first-event benchmarks.

The benchmark starts its own nginx: a temporary configuration in the work directory, one
worker, on a free loopback port, forwarding ``/agents/up`` and ``/agents/small`` to the
benchmark's upstream with ``proxy_buffering off`` and kept-alive upstream connections (what
a streaming deployment sets), each kept-alive connection dropped after 4 s idle, before the
upstream's own 5 s (uvicorn's): nginx does not send a POST again on a connection the upstream
closed as it was reused, it answers 502. Where nginx is not installed, its rows say "skipped"
and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import time
from pathlib import Path

from bench.servers import Server, ServerPool, free_port

NAME = "nginx"
CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")

CONFIG = """
worker_processes 1;
daemon off;
pid {workdir}/nginx.pid;
error_log {workdir}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {workdir}/nginx-body;
    proxy_temp_path {workdir}/nginx-proxy;
    fastcgi_temp_path {workdir}/nginx-fastcgi;
    uwsgi_temp_path {workdir}/nginx-uwsgi;
    scgi_temp_path {workdir}/nginx-scgi;
    upstream agent {{
        server {upstream};
        keepalive 64;
        keepalive_timeout 4s;
    }}
    server {{
        listen 127.0.0.1:{port};
        location = /agents/up {{ proxy_pass http://agent/events; {proxy} }}
        location = /agents/small {{ proxy_pass http://agent/small; {proxy} }}
        location = /healthz {{ return 200 "ok"; }}
    }}
}}
"""
PROXY = (
    'proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off; '
    "proxy_request_buffering off; proxy_read_timeout 300s;"
)


def binary() -> str | None:
    found = shutil.which("nginx")
    if found:
        return found
    return next((path for path in CANDIDATES if Path(path).is_file()), None)


async def start(pool: ServerPool, upstream: str) -> tuple[str | None, str]:
    """nginx in front of ``upstream`` (a base URL): its base URL, or None and why not."""
    running = pool.url(NAME)
    if running is not None:
        return running, ""
    nginx = binary()
    if nginx is None:
        return None, "nginx is not installed (apt-get install nginx)"
    workdir = pool.workdir
    port = free_port()
    config = workdir / "nginx.conf"
    config.write_text(
        CONFIG.format(
            workdir=workdir,
            upstream=upstream.removeprefix("http://"),
            port=port,
            proxy=PROXY,
        )
    )
    log = workdir / "nginx-error.log"
    process = _spawn([nginx, "-c", str(config), "-p", str(workdir)])
    server = Server(NAME, f"http://127.0.0.1:{port}", process, log)
    pool.servers[NAME] = server  # terminated with the others
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-500:] if log.exists() else ""
            await pool.stop(NAME)
            return None, f"nginx did not start: {tail.strip() or 'exit ' + str(process.returncode)}"
        with contextlib.suppress(OSError):
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return server.url, ""
        await asyncio.sleep(0.05)
    await pool.stop(NAME)
    return None, "nginx did not start within 15 s"


def _spawn(command: list[str]) -> subprocess.Popen[bytes]:
    # Popen returns at once (nginx stays in the foreground: ``daemon off``).
    return subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
