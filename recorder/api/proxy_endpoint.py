"""``POST /agents/{name}``, the proxy itself, as a bare ASGI endpoint.

Every proxied run pays this endpoint's cost before its first event reaches the client.
FastAPI's request handling (dependency solving, a ``Request``, a ``StreamingResponse`` with
its task group) took about 0.5 ms of it per request on a 2-core machine, half of what the
whole recorder may add. Here the route is matched by Starlette, as any other, and the rest
is a few ASGI messages. Errors answer through the API's handlers' own function
(``deps.error_response``: an unexpected one with an error id, logged).

``serve_run`` is the whole exchange, also used by ``recorder.asgi`` for an agent of the same
process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

import orjson
from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from recorder.api.access import (
    Principal,
    check_agent,
    check_scope,
    principal_for,
    visible_thread,
    without_recorder_token,
)
from recorder.api.deps import error_response, internal_error
from recorder.api.views import RELAY_HEADERS, SSE_HEADERS, header_value
from recorder.errors import BodyTooLarge, Forbidden, ThreadNotFound
from recorder.proxy.legs import AgentLeg
from recorder.proxy.proxy import Relay, Stream
from recorder.proxy.request import parse_run_input
from recorder.reference.projector import Parts
from recorder.runtime import Runtime

_RELAY_HEAD = [(name.encode(), value.encode()) for name, value in RELAY_HEADERS.items()]
_SSE_HEAD = [(b"content-type", b"text/event-stream")] + [
    (name.encode(), value.encode()) for name, value in SSE_HEADERS.items()
]


class ProxyEndpoint:
    """Forward the posted run to the named agent; stream its recorded events back."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        runtime: Runtime = scope["app"].state.runtime
        if not posts_json(Headers(scope=scope).get("content-type")):
            # A form or text/plain POST is one any web page may send cross-site without
            # asking: no run is recorded (nor sent to an agent) from one.
            await send_whole(send, 415, _NOT_JSON, "application/json")
            return
        await serve_run(runtime, scope["path_params"]["name"], scope, receive, send)


_NOT_JSON = orjson.dumps({"detail": "the proxy takes a RunAgentInput as application/json"})


def posts_json(content_type: str | None) -> bool:
    """Whether a request's ``Content-Type`` is JSON (``application/json`` or ``+json``)."""
    media = (content_type or "").partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def serve_run(
    runtime: Runtime,
    name: str,
    scope: Scope,
    receive: Receive,
    send: Send,
    leg: AgentLeg | None = None,
) -> None:
    """Read the posted run, record it through ``name``'s leg (or ``leg``), answer.

    The head of a streamed answer goes out as soon as the agent's answer is known to be a
    stream, before its first events are committed: the client reads it meanwhile."""
    head_sent = False

    async def streaming(run_id: str) -> None:
        nonlocal head_sent
        head_sent = True  # (tried: never a second head, whatever this send does)
        await send({"type": "http.response.start", "status": 200, "headers": sse_head(run_id)})

    try:
        leg = leg or runtime.proxy.upstream(name)  # 404 before reading the body
        headers: Mapping[str, str] = Headers(scope=scope)
        agent = runtime.settings.agents.get(name)
        limited = None
        if agent is not None and agent.require_token:
            limited = check_run_token(runtime, name, scope)
        headers = without_recorder_token(runtime.settings, headers)
        body = await read_body(scope, receive, runtime.settings.max_body_bytes)
        if body is None:
            return  # the client left before its request was read: nothing to do
        if limited is not None:
            await joinable_thread(runtime, limited, body)
        result = await runtime.proxy.start(name, body, headers, leg=leg, streaming=streaming)
    except Exception as exc:
        if head_sent:  # (nothing raises past the head but a cancellation: never seen)
            internal_error(exc, "POST", scope["path"])
            await send({"type": "http.response.body", "body": b""})
            return
        await error_response(exc, runtime, "POST", scope["path"])(scope, receive, send)
        return
    if isinstance(result, Relay):
        head = [*_RELAY_HEAD, (b"x-recorder-run-id", header_value(result.run_id))]
        await send_whole(send, result.status, result.body, result.content_type, head)
    else:
        await stream(receive, send, result, runtime.settings.client_write_timeout, head_sent)


def check_run_token(runtime: Runtime, name: str, scope: Scope) -> Principal | None:
    """The agent asks for a token: one with the ``run`` scope that covers it; the principal
    when it is limited to agents. (It is never forwarded: ``without_recorder_token``.)"""
    principal = principal_for(runtime.settings, scope)
    check_scope(principal, "run")
    check_agent(principal, name)
    return principal if principal.agents is not None else None


async def joinable_thread(runtime: Runtime, principal: Principal, body: bytes) -> None:
    """A token limited to agents runs on a new thread or one of its own, never on a thread
    another agent's runs are in (it would add to what it may not read)."""
    posted = parse_run_input(body, runtime.settings.max_body_bytes)
    try:
        await visible_thread(runtime, principal, posted["threadId"])
    except ThreadNotFound:
        try:
            await runtime.store.get_thread(posted["threadId"])
        except ThreadNotFound:
            return  # a new thread
        raise Forbidden(
            f"token {principal.name!r} may not run on thread {posted['threadId']!r}"
        ) from None


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    declared = Headers(scope=scope).get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(f"request body is {declared} bytes; the limit is {limit}")
    body = bytearray()
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        if len(body) > limit:
            raise BodyTooLarge(f"request body exceeds the limit of {limit} bytes")
        more = message.get("more_body", False)
    return bytes(body)


async def send_whole(
    send: Send,
    status: int,
    body: bytes,
    content_type: str,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    await send_parts(send, status, [body], content_type, extra)


async def send_parts(
    send: Send,
    status: int,
    parts: Parts,
    content_type: str,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """An answer of ``parts`` (bytes, or views of them), each its own body message under one
    ``Content-Length``: a large one made of pieces is never copied into one body first."""
    headers = [
        (b"content-type", content_type.encode("latin-1", "replace")),
        (b"content-length", str(sum(map(len, parts))).encode()),
        *(extra or ()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    last = len(parts) - 1
    for n, part in enumerate(parts):
        await send({"type": "http.response.body", "body": part, "more_body": n < last})


def sse_head(run_id: str) -> list[tuple[bytes, bytes]]:
    """The head of a streamed answer: the SSE headers and the run's id."""
    return [*_SSE_HEAD, (b"x-recorder-run-id", header_value(run_id))]


async def stream(
    receive: Receive,
    send: Send,
    result: Stream,
    write_timeout: float = 60,
    head_sent: bool = False,
) -> None:
    """Send the run's chunks as they come. A client that leaves closes the chunk iterator
    at once (the recording notices and carries on without it), even while no chunk is due.

    A client that takes more than ``write_timeout`` seconds to take one chunk (it reads
    slowly, or not at all) is dropped as if it had left: the run goes on recorded to its
    end, and gives its slot back then. One timer per quarter of the timeout checks the
    send in progress, rather than a timeout around each send (a cost per event).
    ``head_sent``: the head went out already (``serve_run``)."""
    task = asyncio.current_task()
    state = {"streaming": True, "left": False}
    loop = asyncio.get_running_loop()
    sending = [loop.time()]  # when the send under way began; 0: none is

    def check_send() -> None:
        began = sending[0]
        if began and loop.time() - began >= write_timeout and state["streaming"] and task:
            state["left"] = True
            task.cancel()
            return
        timer[0] = loop.call_later(write_timeout / 4, check_send)

    timer = [loop.call_later(write_timeout / 4, check_send)]

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        if state["streaming"] and task is not None:
            state["left"] = True
            task.cancel()

    watcher = asyncio.create_task(watch())
    try:
        if not head_sent:
            await send(
                {"type": "http.response.start", "status": 200, "headers": sse_head(result.run_id)}
            )
        sending[0] = 0.0
        async for chunk in result.chunks:
            sending[0] = loop.time()
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            sending[0] = 0.0
        state["streaming"] = False
        await send({"type": "http.response.body", "body": b""})
    except asyncio.CancelledError:
        if not state["left"] or task is None:
            raise
        task.uncancel()
    finally:
        state["streaming"] = False
        timer[0].cancel()
        watcher.cancel()
        with contextlib.suppress(BaseException):
            await result.chunks.aclose()  # type: ignore[attr-defined]
        if result.leave is not None:
            result.leave()  # (closing a generator that never started runs none of it)


OPENAPI: dict[str, Any] = {
    "tags": ["agents"],
    "summary": "Proxy a run to the agent and record it",
    "description": (
        "Forwards the posted RunAgentInput to the agent and streams its events back as "
        "they are recorded (`id: <seq>` on each frame). The response names the run in "
        "`x-recorder-run-id`."
    ),
    "operationId": "proxy_run",
    "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"type": "object"}}},
    },
    "responses": {
        "200": {"description": "the run's events", "content": {"text/event-stream": {}}},
        "401": {"description": "the agent asks for a token (require_token), and none known came"},
        "403": {"description": "the token lacks the run scope, or this agent"},
        "404": {"description": "no such agent"},
        "409": {"description": "the run id is taken"},
        "413": {"description": "request body too large"},
        "415": {"description": "the request is not application/json"},
        "422": {"description": "not a RunAgentInput with threadId and runId"},
        "503": {"description": "too many runs at once, or the database is unavailable"},
    },
}
