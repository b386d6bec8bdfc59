"""A client that does not read what it asked for (or reads a byte a second) is dropped after
``client_write_timeout``: its run goes on recorded to the end, and its slot is freed."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response

from tests.servers import eventually, post_run, recorder_at, scripted_upstream, serving, sse

FRAMES = 60


def big_run(thread: str, run: str) -> list[bytes]:
    filler = "x" * 150_000  # 60 frames of 150 kB: more than any socket buffers hold
    chunks = [f'data: {{"type":"RUN_STARTED","threadId":"{thread}","runId":"{run}"}}\n\n'.encode()]
    chunks += [
        f'data: {{"type":"CUSTOM","name":"n{i}","value":"{filler}"}}\n\n'.encode()
        for i in range(FRAMES)
    ]
    chunks.append(
        f'data: {{"type":"RUN_FINISHED","threadId":"{thread}","runId":"{run}"}}\n\n'.encode()
    )
    return chunks


def agent(request: Request) -> Response:
    return sse(big_run("t", "r"), delay=0.01)


def small(request: Request) -> Response:
    return sse(
        [
            b'data: {"type":"RUN_STARTED","threadId":"t0","runId":"r0"}\n\n',
            b'data: {"type":"RUN_FINISHED","threadId":"t0","runId":"r0"}\n\n',
        ]
    )


def stalled_post(base: str, path: str, body: dict[str, object]) -> socket.socket:
    """Send a POST and read nothing: a receive buffer of 4 kB, never emptied."""
    host, port = base.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    sock.sendall(head.encode() + payload)
    return sock


def read_to_end(sock: socket.socket, seconds: float) -> bytes:
    sock.settimeout(seconds)
    data = b""
    while chunk := sock.recv(1 << 16):
        data += chunk
    return data


@pytest.mark.parametrize("route", ["proxy", "fork"])
async def test_a_client_that_does_not_read_is_dropped_and_its_run_recorded(
    sqlite_url: str, route: str
) -> None:
    async with serving(scripted_upstream({"a": agent, "s": small})) as up:
        agents = {"a": f"{up}/a", "s": f"{up}/s"}
        async with recorder_at(
            sqlite_url, agents, client_write_timeout=1.0, max_concurrent_runs=1
        ) as rec:
            async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
                if route == "proxy":
                    sock = stalled_post(rec, "/agents/a", {"threadId": "t", "runId": "r"})
                    run_id = "r"
                else:
                    await post_run(client, "/agents/a", {"threadId": "t1", "runId": "p"})
                    sock = stalled_post(rec, "/runs/p/fork", {"runId": "f"})
                    run_id = "f"

                async def ended() -> bool:
                    got = await client.get(f"/runs/{run_id}")
                    return got.status_code == 200 and got.json()["status"] != "running"

                await eventually(ended, "the stalled client's run recorded to its end", 30)
                run = (await client.get(f"/runs/{run_id}")).json()
                assert (run["status"], run["eventCount"]) == ("finished", FRAMES + 2)

                # The run is closed with its last events; its slot is given back once its
                # client has them, or is dropped for not taking them.
                async def freed() -> bool:
                    return (await client.get("/healthz")).json()["activeRuns"] == 0

                await eventually(freed, "the stalled client's slot given back", 10)
                # the one slot is free again: another run goes through
                await post_run(client, "/agents/s", {"threadId": "t2", "runId": "r2"})
                received = await asyncio.to_thread(read_to_end, sock, 10)
                sock.close()
                assert len(received) < FRAMES * 150_000, "the stalled client was dropped"


def stalled_get(base: str, path: str) -> socket.socket:
    """Send a GET and read nothing: a receive buffer of 4 kB, never emptied."""
    host, port = base.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    return sock


LONG = 10_000  # frames of 1.5 kB: 15 MB in pages of 1,000 frames


def long_agent(request: Request) -> Response:
    filler = "y" * 1500
    chunks = [b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n']
    chunks += [
        f'data: {{"type":"CUSTOM","name":"n{i}","value":"{filler}"}}\n\n'.encode()
        for i in range(LONG)
    ]
    chunks.append(b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r"}\n\n')
    return sse(chunks)


@pytest.mark.parametrize("route", ["replay", "thread", "connect"])
async def test_a_reader_of_recorded_streams_that_does_not_read_is_dropped(
    sqlite_url: str, route: str
) -> None:
    async with serving(scripted_upstream({"a": long_agent})) as up:
        async with recorder_at(sqlite_url, {"a": f"{up}/a"}, client_write_timeout=1.0) as rec:
            async with httpx.AsyncClient(base_url=rec, timeout=30) as client:
                await post_run(client, "/agents/a", {"threadId": "t", "runId": "r"})
            if route == "replay":
                sock = stalled_get(rec, "/runs/r/stream")
            elif route == "thread":
                sock = stalled_get(rec, "/threads/t/stream")
            else:
                sock = stalled_post(rec, "/agents/a/connect", {"threadId": "t", "runId": "c"})
            await asyncio.sleep(3)  # three times the write timeout, reading nothing
            received = await asyncio.to_thread(read_to_end, sock, 10)
            sock.close()
            # Dropped: the answer ends (the read above does not time out) well short of the
            # 15 MB recorded; a reader kept waiting would now get all of it.
            assert received.startswith(b"HTTP/1.1 200")
            assert len(received) < LONG * 1500 / 2
