"""The in-process leg: an ASGI app of this process answers the run, with no network between.

``AppLeg.post`` calls the app on a task of its own with an HTTP scope (the client's
request's own scope when there is one, so the app sees the same path, client, headers and
lifespan state), the body as one message, and a ``send`` that hands the answer over:

- the head (``http.response.start``) resolves ``post``; an app that fails or ends before
  it is ``Disconnected`` (the run closes as ``upstream_unreachable``);
- body messages wait for the recording, at most ``QUEUED`` of them: an app that streams
  faster than the recording commits waits in its ``send``, as a remote agent waits on its
  socket;
- an app that fails mid-answer breaks the answer (``Disconnected``: ``upstream_dropped``);
- ``close()`` before the end tells the app the client left (``http.disconnect``) and
  cancels it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from recorder.errors import Disconnected, UpstreamTimeout

QUEUED = 64  # body messages the app may send ahead of the recording

ASGIApp = Any  # (scope, receive, send) -> awaitable; typed loosely to keep ASGI libraries out
Scope = Mapping[str, Any]


class AppAnswer:
    def __init__(self, idle_timeout: float) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self._idle = idle_timeout
        self._body: list[bytes] = []  # sent by the app, not read yet (at most QUEUED)
        self._done = False  # the app's answer is over (whole, or broken: ``_failure``)
        self._failure: BaseException | None = None
        self._reader: asyncio.Future[bool] | None = None
        self._writer: asyncio.Future[bool] | None = None
        self._head: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._left = asyncio.Event()
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
        elif kind == "http.response.body" and self._head.done() and not self._done:
            body = message.get("body", b"")
            if body:
                while len(self._body) >= QUEUED and not self._left.is_set():
                    self._writer = asyncio.get_running_loop().create_future()
                    await self._writer
                self._body.append(bytes(body))
            if not message.get("more_body", False):
                self._done = True
            _settle(self._reader, True)

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
        if not self._done:
            self._done = True
            self._failure = failure or Disconnected("the agent's app ended mid-answer")
            _settle(self._reader, True)

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
        """Everything the app sent since the last read (b"" at the end); None when nothing
        came within ``seconds``. A failure is raised once what came before it was read."""
        while not self._body:
            if self._done:
                if self._failure is not None:
                    raise self._failure
                return b""
            loop = asyncio.get_running_loop()
            waiter = self._reader = loop.create_future()
            # A timer handle per wait: the cheapest timeout asyncio has.
            timer = loop.call_later(seconds, _settle, waiter, False)
            try:
                woken = await waiter
            finally:
                timer.cancel()
                self._reader = None
            if not woken and not self._body and not self._done:
                return None
        body = self._body
        data = b"".join(body) if len(body) > 1 else body[0]
        body.clear()
        _settle(self._writer, True)
        return data

    def close(self) -> None:
        self._left.set()
        _settle(self._writer, True)
        if self.task is not None and not self.task.done():
            self.task.cancel()


def _settle(waiter: asyncio.Future[bool] | None, woken: bool) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(woken)


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

    async def post(
        self, body: bytes, headers: Mapping[str, str], sent: Callable[[], None] | None = None
    ) -> AppAnswer:
        answer = AppAnswer(self._idle)
        given = False

        async def receive() -> dict[str, Any]:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await answer.receive_after()

        task = asyncio.create_task(
            self.app(self._request_scope(body, headers), receive, answer.send),
            name=f"agent-app {self.path}",
        )
        answer.task = task
        task.add_done_callback(answer.app_done)
        if sent is not None:
            sent()
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
