"""The agent-leg HTTP client against raw servers on loopback that misbehave on purpose."""

from __future__ import annotations

import asyncio
import gzip
import shutil
import socket
import ssl
import struct
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from recorder.errors import ConnectFailed, Disconnected, UpstreamTimeout
from recorder.proxy.upstream import Response, UpstreamClient
from tests.servers import free_port

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


class Raw:
    """A TCP server whose every connection runs ``handler(reader, writer, connection_no)``;
    it counts the requests it read."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[tuple[int, bytes]] = []  # (connection number, body)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer, self.connections)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def request(self, reader: asyncio.StreamReader, number: int) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        body = await reader.readexactly(length)
        self.requests.append((number, body))
        return head + body


@asynccontextmanager
async def raw_server(
    handler: Handler, context: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[Raw, str]]:
    raw = Raw(handler)
    port = free_port()
    server = await asyncio.start_server(raw.serve, "127.0.0.1", port, ssl=context)
    scheme = "https" if context else "http"
    try:
        yield raw, f"{scheme}://127.0.0.1:{port}/agent?x=1"
    finally:
        server.close()
        await server.wait_closed()


def answer(body: bytes, *headers: str) -> bytes:
    head = ["HTTP/1.1 200 OK", "Content-Type: text/event-stream", *headers]
    if not any(h.lower().startswith(("transfer-encoding", "content-length")) for h in headers):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


async def read_all(response: Response) -> bytes:
    data = b""
    while chunk := await response.readany():
        data += chunk
    response.close()
    return data


async def test_bodies_by_length_chunked_close_and_gzip() -> None:
    event = b'data: {"type":"RUN_STARTED"}\n\n'
    answers = [
        answer(event),
        answer(chunked(event[:5], event[5:]), "Transfer-Encoding: chunked"),
        answer(gzip.compress(event), "Content-Encoding: gzip"),
    ]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        for reply in answers:
            head = await raw.request(reader, n)
            assert b"\r\nHost: 127.0.0.1:" in head and head.startswith(b"POST /agent?x=1 ")
            assert b"\r\nAccept-Encoding: identity\r\n" in head
            writer.write(reply)
            await writer.drain()
        await raw.request(reader, n)  # the last: no length, the body ends with the connection
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + event)
        await writer.drain()

    async with raw_server(handler) as (raw, url):
        client = UpstreamClient()
        for _ in range(4):
            response = await client.post(url, b'{"a":1}', {"x-trace": "t"})
            assert response.status == 200
            assert response.headers["content-type"] == "text/event-stream"
            assert await read_all(response) == event
        await client.close()
    # Kept alive: one connection carried all four.
    assert raw.connections == 1 and [b for _n, b in raw.requests] == [b'{"a":1}'] * 4


async def test_a_pooled_connection_closed_under_a_request_is_skipped() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await raw.request(reader, n)
        writer.write(answer(b"data: 1\n\n"))
        await writer.drain()
        if n == 1:
            await raw.request(reader, n)  # the idle connection's timeout ran out: closed
            return
        while True:
            await raw.request(reader, n)
            writer.write(answer(b"data: 2\n\n"))
            await writer.drain()

    async with raw_server(handler) as (raw, url):
        client = UpstreamClient()
        assert await read_all(await client.post(url, b"first", {})) == b"data: 1\n\n"
        second = await client.post(url, b"second", {})
        assert await read_all(second) == b"data: 1\n\n"  # connection 2's first answer
        await client.close()
    assert raw.requests == [(1, b"first"), (1, b"second"), (2, b"second")]


async def test_a_pooled_connection_that_spoke_while_idle_is_not_reused() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await raw.request(reader, n)
        writer.write(answer(b"data: %d\n\n" % n))
        if n == 1:  # then, unasked, a stray answer on the idle connection
            writer.write(answer(b"data: stray\n\n"))
        await writer.drain()
        await asyncio.sleep(1)

    async with raw_server(handler) as (raw, url):
        client = UpstreamClient()
        assert await read_all(await client.post(url, b"first", {})) == b"data: 1\n\n"
        await asyncio.sleep(0.1)
        assert await read_all(await client.post(url, b"second", {})) == b"data: 2\n\n"
        await client.close()
    assert raw.requests == [(1, b"first"), (2, b"second")]


async def test_a_new_connection_closed_without_an_answer_is_never_retried() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await raw.request(reader, n)

    async with raw_server(handler) as (raw, url):
        client = UpstreamClient()
        with pytest.raises(Disconnected, match="before answering"):
            await client.post(url, b"once", {})
        await client.close()
    assert raw.requests == [(1, b"once")]


async def test_an_answer_cut_short_delivers_what_came_then_fails() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await raw.request(reader, n)
        writer.write(answer(b"", "Transfer-Encoding: chunked") + b"9\r\ndata: 1\n\n\r\n")
        await writer.drain()

    async with raw_server(handler) as (raw, url):
        client = UpstreamClient()
        response = await client.post(url, b"x", {})
        assert await response.readany() == b"data: 1\n\n"
        with pytest.raises(Disconnected, match="mid-answer"):
            await response.readany()
        response.close()
        await client.close()


async def test_timeouts_refusal_and_garbage() -> None:
    async def stall(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await raw.request(reader, n)
        if n == 2:
            writer.write(answer(b"", "Transfer-Encoding: chunked"))
            await writer.drain()
        await asyncio.sleep(5)

    async with raw_server(stall) as (raw, url):
        client = UpstreamClient(idle_timeout=0.2)
        with pytest.raises(UpstreamTimeout, match="did not answer"):
            await client.post(url, b"x", {})
        response = await client.post(url, b"x", {})
        with pytest.raises(UpstreamTimeout, match=r"sent nothing for 0\.2 s"):
            await response.readany()
        response.close()
        await client.close()

    client = UpstreamClient()
    with pytest.raises(ConnectFailed, match="cannot connect"):
        await client.post(f"http://127.0.0.1:{free_port()}/", b"x", {})
    with pytest.raises(ConnectFailed, match="not an http"):
        await client.post("ftp://127.0.0.1/", b"x", {})

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await raw.request(reader, n)
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(1)

    async with raw_server(garbage) as (raw, url):
        with pytest.raises(Disconnected, match="not valid HTTP"):
            await client.post(url, b"x", {})
    await client.close()


async def test_reading_pauses_while_the_reader_lags() -> None:
    block = b"data: " + b"x" * 65_000 + b"\n\n"
    sent: list[int] = []

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await raw.request(reader, n)
        writer.write(answer(b"", "Transfer-Encoding: chunked"))
        for _ in range(400):  # 26 MB
            writer.write(b"%x\r\n%s\r\n" % (len(block), block))
            await writer.drain()  # blocks once the client stops reading
            sent.append(1)
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    async with raw_server(flood) as (raw, url):
        client = UpstreamClient()
        response = await client.post(url, b"x", {})
        await asyncio.sleep(0.5)
        # The server is held back well before it sent everything...
        assert len(sent) < 300  # (here ~60: what the kernel's socket buffers hold)
        # ...and the client holds, unread, at most the high-water mark plus one socket read.
        assert response._conn._buffered <= 2 * 256 * 1024 + len(block)
        assert len(await read_all(response)) == 400 * len(block)
        await client.close()


async def test_header_values_cannot_write_headers() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        head = await raw.request(reader, n)
        heads.append(head)
        writer.write(answer(b""))
        await writer.drain()

    heads: list[bytes] = []
    async with raw_server(handler) as (raw, url):
        client = UpstreamClient()
        headers = {"x-ok": "fine", "x-evil": "a\r\nX-Injected: 1", "content-length": "999"}
        await read_all(await client.post(url, b"body", headers))
        await client.close()
    assert b"X-Injected" not in heads[0] and b"x-ok: fine" in heads[0]
    assert heads[0].count(b"Content-Length") == 1 and b"Content-Length: 4" in heads[0]


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, and its key."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_https(certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await raw.request(reader, n)
        writer.write(answer(b"data: tls\n\n"))
        await writer.drain()

    async with raw_server(handler, server_context) as (raw, url):
        untrusting = UpstreamClient()
        with pytest.raises(ConnectFailed, match="CERTIFICATE_VERIFY_FAILED"):
            await untrusting.post(url, b"x", {})
        await untrusting.close()
        client = UpstreamClient(ssl_context=ssl.create_default_context(cafile=str(cert)))
        assert await read_all(await client.post(url, b"x", {})) == b"data: tls\n\n"
        await client.close()


async def test_interim_answers_are_skipped() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await raw.request(reader, n)
        writer.write(b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n")
        writer.write(answer(b"data: 1\n\n"))
        await writer.drain()

    async with raw_server(handler) as (raw, url):
        client = UpstreamClient()
        response = await client.post(url, b"x", {})
        assert (response.status, "link" in response.headers) == (200, False)
        assert await read_all(response) == b"data: 1\n\n"
        await client.close()


async def test_a_request_the_agent_held_before_dropping_is_not_sent_again() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await raw.request(reader, n)
        writer.write(answer(b"data: 1\n\n"))
        await writer.drain()
        await raw.request(reader, n)
        await asyncio.sleep(0.3)  # works on it a while, then drops the connection

    async with raw_server(handler) as (raw, url):
        client = UpstreamClient()
        await read_all(await client.post(url, b"first", {}))
        with pytest.raises(Disconnected):
            await client.post(url, b"second", {})
        await client.close()
    assert raw.requests == [(1, b"first"), (1, b"second")]


async def test_bytes_after_an_answer_and_a_reset_mid_body() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await raw.request(reader, n)
        if n == 1:  # a whole answer, then garbage: the answer stands
            writer.write(answer(b"data: 1\n\n") + b"\x00garbage")
            await writer.drain()
            await asyncio.sleep(0.3)
            return
        # a body without a length, cut by a reset: not a complete answer
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 2\n\n")
        await writer.drain()
        await asyncio.sleep(0.1)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    async with raw_server(handler) as (raw, url):
        client = UpstreamClient()
        first = await client.post(url, b"x", {})
        await asyncio.sleep(0.1)
        assert await read_all(first) == b"data: 1\n\n"
        second = await client.post(url, b"y", {})
        assert await second.readany() == b"data: 2\n\n"
        with pytest.raises(Disconnected, match="mid-answer"):
            await second.readany()
        second.close()
        await client.close()
    assert raw.connections == 2  # the first connection, which spoke out of turn, was dropped


async def test_a_connection_whose_answer_was_held_back_is_not_kept() -> None:
    # The agent wrote the whole answer (and started its keep-alive clock) long before the
    # recorder read its end: reusing that connection races the agent closing it.
    big = b"x" * (300 * 1024)  # over the 256 KB at which reading pauses

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await raw.request(reader, n)
            writer.write(answer(big if len(raw.requests) == 1 else b"ok"))
            await writer.drain()

    async with raw_server(handler) as (raw, url):
        client = UpstreamClient(idle_timeout=2)
        first = await client.post(url, b"x", {})
        await asyncio.sleep(0.2)
        assert len(await read_all(first)) == len(big)
        second = await client.post(url, b"y", {})
        assert await read_all(second) == b"ok"
        await client.close()
    assert raw.connections == 2


async def test_a_connection_is_idle_from_when_its_answer_ended() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await raw.request(reader, n)
            writer.write(answer(b"ok"))
            await writer.drain()

    async with raw_server(handler) as (raw, url):
        client = UpstreamClient(keepalive=0.2)
        first = await client.post(url, b"x", {})
        await asyncio.sleep(0.3)  # the answer is whole; the reader comes late
        assert await read_all(first) == b"ok"
        await read_all(await client.post(url, b"x", {}))
        await client.close()
    assert raw.connections == 2  # kept 0.2 s from the answer's end: expired, not reused


async def test_idle_connections_past_their_time_are_closed() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await raw.request(reader, n)
            writer.write(answer(b"ok"))
            await writer.drain()

    async with raw_server(handler) as (raw, url):
        # (Margins a loaded machine keeps: the newest is given back 0.6 s after the burst
        # and asked for 0.6 s later, so it stays fresh unless that takes 0.4 s longer.)
        client = UpstreamClient(keepalive=1.0)
        burst = await asyncio.gather(*(client.post(url, b"x", {}) for _ in range(5)))
        for response in burst:
            await read_all(response)
        pooled = list(client._idle[next(iter(client._idle))])
        assert len(pooled) == 5
        await asyncio.sleep(0.6)
        await read_all(await client.post(url, b"x", {}))  # takes the newest, gives it back
        await asyncio.sleep(0.6)  # now the other four are past their time, it is not
        await read_all(await client.post(url, b"x", {}))
        pooled.remove(client._idle[next(iter(client._idle))][-1])
        assert all(conn.closed for conn in pooled)  # expired: closed, not left open
        await client.close()
