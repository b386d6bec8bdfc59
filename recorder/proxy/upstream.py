"""The HTTP/1.1 client for the proxy's agent leg: one POST, a streamed answer, kept-alive
connections.

The recorder asks one thing of its client: send a body, then hand over the answer's bytes
as they arrive. General-purpose clients pay for much more on every request and chunk
(redirects, cookies, URL objects, middleware, tracing); on a 2-core machine that was a
fifth of a millisecond per request with aiohttp, and more with httpx, out of the
millisecond the recorder may add to a run's first event. Here the parsing is httptools
(llhttp, the parser uvicorn uses) and the rest is an asyncio protocol.

What it does: http and https URLs; Content-Length, chunked and close-delimited bodies
(gzip and deflate decoded, though it asks for neither); a connect timeout, and an idle
timeout on every wait; backpressure (reading pauses while 256 KB wait unread); a pool
of idle connections, each kept 2 s from the end of its last answer (under the 5 s after
which common servers close theirs), and none whose answer had to wait for the recorder to
read it (the agent's clock started when it wrote that answer, maybe long before).

A request that meets a pooled connection ending at once (within 0.1 s) and before any
byte of an answer goes again, once, on a new connection: that is a server closing an
idle connection as the request arrived. Otherwise a request is never repeated: the agent
may be running it. 1xx interim answers are skipped; at most 64 idle connections are kept
per agent.

Every failure is one of ``recorder.errors``' ``UpstreamError``s: ``ConnectFailed`` (no
connection), ``Disconnected`` (the answer broke off, or is not HTTP), ``UpstreamTimeout``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
import time
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

import httptools

from recorder.errors import ConnectFailed, Disconnected, UpstreamError, UpstreamTimeout

_HIGH_WATER = 256 * 1024  # unread bytes at which reading pauses (until they are read)
_STALE_WINDOW = 0.1  # seconds: a pooled connection that dies this fast was closed idle
_MAX_IDLE = 64  # idle connections kept per agent


@dataclass(frozen=True, slots=True)
class _Target:
    key: tuple[str, str, int]
    host: str  # for the Host header: a bracketed IPv6 literal, and the port unless default
    path: str


@functools.lru_cache(maxsize=256)  # an agent's URL, parsed once rather than per request
def _target(url: str) -> _Target:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ConnectFailed(f"not an http(s) URL: {url!r}")
    default = 443 if scheme == "https" else 80
    port = parts.port or default
    name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    host = name if port == default else f"{name}:{port}"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Target((scheme, parts.hostname, port), host, path)


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection; one request/response on it at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._reset_exchange()

    def _reset_exchange(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._header_list: list[tuple[bytes, bytes]] = []
        self.head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.status = 0
        self.headers: dict[str, str] = {}
        self.keep_alive = False
        self.answered = False  # a byte of the answer arrived
        self.complete = False
        self._buffer: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False
        self._held_back = False  # reading was paused during this answer
        self._waiter: asyncio.Future[bool] | None = None
        self._error: UpstreamError | None = None
        self._decoder: Any = None
        self._until_close = False
        self._stray = False  # bytes after the answer's end: the connection is not reused
        self._interim = False  # inside a 1xx answer

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.answered = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if self.complete:  # garbage after a whole answer: that answer stands
                self._stray = True
            else:
                self.fail(Disconnected(f"the agent's answer is not valid HTTP: {exc}"))
            self.close()

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost tells the rest

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._until_close and self.head.done() and self._error is None and exc is None:
            self._end_of_body()  # a body without a length ends with the connection
        elif not self.complete:
            reason = f": {exc}" if exc is not None else ""
            if not self.head.done():
                self.fail(Disconnected(f"the agent closed the connection before answering{reason}"))
            else:
                self.fail(Disconnected(f"the agent closed the connection mid-answer{reason}"))
        self._wake()

    # -- httptools callbacks -----------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_list.append((name, value))

    def on_headers_complete(self) -> None:
        if self.complete:  # a second answer to one request: ignored, never read as ours
            self._stray = True
            return
        if 100 <= self._parser.get_status_code() < 200:
            self._interim = True  # 100 Continue, 103 Early Hints: the answer follows
            self._header_list.clear()
            return
        headers: dict[str, str] = {}
        for raw_name, raw_value in self._header_list:
            name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        self.status = self._parser.get_status_code()
        self.headers = headers
        self.keep_alive = self._parser.should_keep_alive()
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding in ("gzip", "x-gzip", "deflate"):
            self._decoder = zlib.decompressobj(wbits=47)  # zlib or gzip, by their header
        elif encoding != "identity":
            self.fail(Disconnected(f"the agent's answer uses content-encoding {encoding!r}"))
        self._until_close = (
            "content-length" not in headers
            and "chunked" not in headers.get("transfer-encoding", "").lower()
            and self.status not in (204, 304)
            and self.status >= 200
        )
        if not self.head.done():
            self.head.set_result(None)

    def on_body(self, body: bytes) -> None:
        if self.complete:
            self._stray = True
            return
        if self._decoder is not None:
            try:
                body = self._decoder.decompress(body)
            except zlib.error as exc:
                self.fail(Disconnected(f"the agent's compressed answer is corrupt: {exc}"))
                return
        if body:
            self._buffer.append(body)
            self._buffered += len(body)
            if self._buffered > _HIGH_WATER and not self._paused and self.transport is not None:
                self._paused = self._held_back = True
                self.transport.pause_reading()
            self._wake()

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        if self.complete:
            self._stray = True
            return
        self._end_of_body()

    # -- the exchange ------------------------------------------------------------------------

    def send(self, request: bytes) -> None:
        if self.transport is None or self.closed or self.transport.is_closing():
            raise Disconnected("the connection was closed")
        self.transport.write(request)

    async def read(self, timeout: float) -> bytes | None:
        """The next bytes of the body, b"" at its end, None if none came within ``timeout``."""
        while not self._buffer:
            if self.complete:
                return b""
            if self._error is not None:
                raise self._error
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            # A timer handle per wait: the cheapest timeout asyncio has.
            timer = loop.call_later(timeout, _settle, waiter, False)
            try:
                woken = await waiter
            finally:
                timer.cancel()
                self._waiter = None
            if not woken and not self._buffer and not self.complete and self._error is None:
                return None
        data = b"".join(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
        self._buffer.clear()
        self._buffered = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return data

    def reusable(self) -> bool:
        # An answer whose reading was paused may have been written whole by the agent long
        # before its end reached us, so the agent's keep-alive clock (which starts when it
        # has written the answer) may be about to run out while ours would not have
        # started: such a connection is not kept, or a request could meet it as it closes.
        return (
            self.complete
            and not self._held_back
            and self.keep_alive
            and not self._stray
            and self._error is None
            and not self.closed
            and self.transport is not None
            and not self.transport.is_closing()
            and not self._until_close
        )

    def recycle(self) -> None:
        self._reset_exchange()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _end_of_body(self) -> None:
        if self._decoder is not None:
            rest = self._decoder.flush()
            if rest:
                self._buffer.append(rest)
        self.complete = True
        # Idle from here, when the answer's end arrived, as for the agent (it started its
        # keep-alive clock when it wrote that end), not from when the recording read it.
        self.idle_since = time.monotonic()
        self._wake()

    def fail(self, error: UpstreamError) -> None:
        if self._error is None:
            self._error = error
        if not self.head.done():
            self.head.set_exception(error)
            self.head.exception()  # marked retrieved; the request awaiting it still raises it
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None:
            _settle(self._waiter, True)


def _settle(waiter: asyncio.Future[bool], woken: bool) -> None:
    if not waiter.done():
        waiter.set_result(woken)


class Response:
    """The agent's answer: status and headers (lower-case names), then the body by
    ``readany()``. ``close()`` when done: a connection read to its end is kept for reuse."""

    def __init__(
        self, client: UpstreamClient, key: tuple[str, str, int], conn: _Connection
    ) -> None:
        self._client = client
        self._key = key
        self._conn = conn
        self.status = conn.status
        self.headers = conn.headers
        self._done = False

    async def readany(self) -> bytes:
        """The next bytes of the body (b"" at its end); UpstreamTimeout after the client's
        idle timeout without any."""
        data = await self._conn.read(self._client.idle_timeout)
        if data is None:
            raise UpstreamTimeout(f"the agent sent nothing for {self._client.idle_timeout:g} s")
        return data

    async def read_within(self, seconds: float) -> bytes | None:
        """Like ``readany``, but None when nothing came within ``seconds``."""
        return await self._conn.read(seconds)

    def close(self) -> None:
        if self._done:
            return
        self._done = True
        self._client._release(self._key, self._conn)


class UpstreamClient:
    def __init__(
        self,
        *,
        connect_timeout: float = 10.0,
        idle_timeout: float = 60.0,
        keepalive: float = 2.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.keepalive = keepalive
        self._ssl = ssl_context
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}
        self._closed = False

    async def post(
        self,
        url: str,
        body: bytes,
        headers: dict[str, str],
        sent: Callable[[], None] | None = None,
    ) -> Response:
        """Send ``body``; returns once the answer's head arrived. ``sent()`` is called once,
        when the request is first written."""
        target = _target(url)
        request = _request(target, body, headers)
        conn = self._pooled(target.key)
        if conn is not None:
            began = time.monotonic()
            try:
                return await self._exchange(target.key, conn, request, sent)
            except Disconnected:
                # Retried once, on a new connection, only when the pooled connection ended
                # at once and without a byte of answer: the agent had closed it, idle, as
                # the request came. Later, the agent may have been running the request.
                if conn.answered or time.monotonic() - began > _STALE_WINDOW:
                    raise
                sent = None  # (called already)
        conn = await self._connect(target.key)
        return await self._exchange(target.key, conn, request, sent)

    async def close(self) -> None:
        self._closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()

    async def _exchange(
        self,
        key: tuple[str, str, int],
        conn: _Connection,
        request: bytes,
        sent: Callable[[], None] | None = None,
    ) -> Response:
        late = UpstreamTimeout(f"the agent did not answer within {self.idle_timeout:g} s")
        timer = asyncio.get_running_loop().call_later(self.idle_timeout, conn.fail, late)
        try:
            conn.send(request)
            if sent is not None:
                sent()
            await conn.head
        except BaseException:
            conn.close()
            raise
        finally:
            timer.cancel()
        return Response(self, key, conn)

    def _pooled(self, key: tuple[str, str, int]) -> _Connection | None:
        conns = self._idle.get(key)
        if not conns:
            return None
        now = time.monotonic()
        # Oldest first: close the ones kept too long (or closed, or that spoke while idle).
        while conns and not _fresh(conns[0], now, self.keepalive):
            conns.pop(0).close()
        while conns:
            conn = conns.pop()
            if _fresh(conn, now, self.keepalive):
                return conn
            conn.close()
        return None

    async def _connect(self, key: tuple[str, str, int]) -> _Connection:
        scheme, host, port = key
        context: ssl.SSLContext | None = None
        if scheme == "https":
            context = self._ssl or ssl.create_default_context()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _transport, conn = await loop.create_connection(
                    _Connection, host, port, ssl=context, server_hostname=host if context else None
                )
        except TimeoutError:
            raise ConnectFailed(
                f"cannot connect to {host}:{port}: no answer within {self.connect_timeout:g} s"
            ) from None
        except (OSError, ssl.SSLError) as exc:
            raise ConnectFailed(f"cannot connect to {host}:{port}: {exc}") from exc
        return conn

    def _release(self, key: tuple[str, str, int], conn: _Connection) -> None:
        idle = self._idle.setdefault(key, [])
        if self._closed or not conn.reusable() or len(idle) >= _MAX_IDLE:
            conn.close()
            return
        conn.recycle()
        idle.append(conn)


def _fresh(conn: _Connection, now: float, keepalive: float) -> bool:
    # (Bytes that came while it sat idle answer no request of ours.)
    return not conn.closed and not conn.answered and now - conn.idle_since < keepalive


def _request(target: _Target, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"POST {target.path} HTTP/1.1", f"Host: {target.host}"]
    for name, value in headers.items():
        if name.lower() in ("host", "content-length", "accept-encoding", "connection"):
            continue
        if any(c in name + value for c in "\r\n\0"):
            continue  # never let a header value write another header
        lines.append(f"{name}: {value}")
    # The stream's bytes as the agent wrote them: compression would only hold events back
    # in the agent's compressor (an agent that compresses anyway is decoded, though).
    lines += ["Accept-Encoding: identity", f"Content-Length: {len(body)}", "", ""]
    with contextlib.suppress(UnicodeEncodeError):
        return "\r\n".join(lines).encode("latin-1") + body
    return "\r\n".join(lines).encode("utf-8") + body
