"""The in-process leg: an ASGI app of this process answers the run, with no network between.

``AppLeg.post`` calls the app on a task of its own with an HTTP scope (the client's
request's own scope when there is one, so the app sees the same path, client, headers and
lifespan state), the body as one message, and a ``send`` that hands the answer over:

- the head (``http.response.start``) resolves ``post``; an app that fails or ends before
  it is ``Disconnected`` (the run closes as ``upstream_unreachable``);
- body messages wait in a small queue (``QUEUED``): an app that streams faster than the
  recording commits waits in its ``send``, as a remote agent waits on its socket;
- an app that fails mid-answer breaks the answer (``Disconnected``: ``upstream_dropped``);
- ``close()`` before the end tells the app the client left (``http.disconnect``) and
  cancels it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from recorder.errors import Disconnected, UpstreamTimeout

QUEUED = 64  # body messages the app may send ahead of the recording

ASGIApp = Any  # (scope, receive, send) -> awaitable; typed loosely to keep ASGI libraries out
Scope = Mapping[str, Any]

_END = b""


class AppAnswer:
    def __init__(self, idle_timeout: float) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self._idle = idle_timeout
        # Unbounded, so that the app's end or failure always fits; ``_room`` bounds the body.
        self._chunks: asyncio.Queue[bytes | BaseException] = asyncio.Queue()
        self._room = asyncio.Semaphore(QUEUED)
        self._head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._left = asyncio.Event()
        self._ended = False
        self.task: asyncio.Task[None] | None = None

    # -- the app's side -----------------------------------------------------------------------

    async def receive_after(self) -> dict[str, Any]:
        await self._left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Mapping[str, Any]) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            self.status = int(message["status"])
            self.headers = {
                bytes(k).decode("latin-1").lower(): bytes(v).decode("latin-1")
                for k, v in message.get("headers", ())
            }
            if not self._head.done():
                self._head.set_result(None)
        elif kind == "http.response.body" and self._head.done() and not self._ended:
            body = bytes(message.get("body", b""))
            if body:
                await self._room.acquire()
                self._chunks.put_nowait(body)
            if not message.get("more_body", False):
                self._ended = True
                self._chunks.put_nowait(_END)

    def app_done(self, task: asyncio.Task[None]) -> None:
        failure: BaseException | None = None
        if task.cancelled():
            failure = Disconnected("the agent's app was cancelled")
        elif task.exception() is not None:
            exc = task.exception()
            failure = Disconnected(f"the agent's app failed: {type(exc).__name__}: {exc}")
        if not self._head.done():
            silent = Disconnected("the agent's app ended without answering")
            self._head.set_exception(failure or silent)
            self._head.exception()  # retrieved: post() raises it
            return
        if not self._ended:
            self._ended = True
            item: bytes | BaseException = failure or Disconnected(
                "the agent's app ended mid-answer"
            )
            self._chunks.put_nowait(item)

    async def head(self) -> None:
        async with asyncio.timeout(self._idle):
            await self._head

    # -- the recording's side -----------------------------------------------------------------

    async def readany(self) -> bytes:
        data = await self.read_within(self._idle)
        if data is None:
            raise UpstreamTimeout(f"the agent sent nothing for {self._idle:g} s")
        return data

    async def read_within(self, seconds: float) -> bytes | None:
        try:
            async with asyncio.timeout(seconds):
                first = await self._chunks.get()
        except TimeoutError:
            return None
        parts = [first]
        while not self._chunks.empty() and isinstance(parts[-1], bytes) and parts[-1]:
            parts.append(self._chunks.get_nowait())
        for part in parts:
            if isinstance(part, bytes) and part:
                self._room.release()
        return self._join(parts)

    def _join(self, parts: list[bytes | BaseException]) -> bytes:
        data = b"".join(p for p in parts if isinstance(p, bytes))
        last = parts[-1]
        if isinstance(last, BaseException) or (last == _END and data):
            if not data:
                assert isinstance(last, BaseException)
                raise last
            # What came before the end or failure first; that on the next read. (Nothing
            # else is queued: the app is done.)
            self._chunks.put_nowait(last)
        return data

    def close(self) -> None:
        self._left.set()
        if self.task is not None and not self.task.done():
            self.task.cancel()


class AppLeg:
    """An AG-UI endpoint of ``app`` at ``path``, called in this process."""

    def __init__(
        self,
        app: ASGIApp,
        path: str,
        *,
        idle_timeout: float,
        scope: Scope | None = None,
        state: dict[str, Any] | None = None,
    ) -> None:
        self.app = app
        self.path = path
        self._idle = idle_timeout
        self._scope = scope
        # The app's lifespan state, for requests made without a client's scope (forks):
        # ASGI servers give each request a copy of it.
        self.state = state

    def for_request(self, scope: Scope) -> AppLeg:
        """This leg, calling the app with the client's own request scope."""
        return AppLeg(self.app, self.path, idle_timeout=self._idle, scope=scope)

    async def post(self, body: bytes, headers: Mapping[str, str]) -> AppAnswer:
        answer = AppAnswer(self._idle)
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await answer.receive_after()

        task = asyncio.create_task(
            self.app(self._request_scope(body, headers), receive, answer.send),
            name=f"agent-app {self.path}",
        )
        answer.task = task
        task.add_done_callback(answer.app_done)
        try:
            await answer.head()
        except TimeoutError:
            answer.close()
            raise Disconnected(f"the agent's app did not answer within {self._idle:g} s") from None
        except BaseException:
            answer.close()
            raise
        return answer

    def _request_scope(self, body: bytes, headers: Mapping[str, str]) -> dict[str, Any]:
        base = self._scope or {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "scheme": "http",
            "server": None,
            "client": None,
            "root_path": "",
            "query_string": b"",
            **({"state": dict(self.state)} if self.state is not None else {}),
        }
        given = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        given = [(k, v) for k, v in given if k not in (b"content-length", b"accept")]
        return {
            **base,
            "method": "POST",
            "path": self.path if self._scope is None else base["path"],
            "raw_path": None,
            "headers": [
                *given,
                (b"content-length", str(len(body)).encode()),
                (b"accept", b"text/event-stream"),
            ],
        }
