"""How answers go out: orjson for JSON, documented SSE and JSONL, the error shapes, a
proxied run.

The answers themselves are built in ``recorder.timetravel.views`` and described by
``recorder.models``; a route declares its model (``response_model``) and sends the dict
through ``JSON``, so the schema in ``/openapi.json`` is the one the body follows (a test
validates real answers against it) without pydantic walking megabytes of state.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from urllib.parse import quote

from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from recorder.models import ErrorDetail
from recorder.proxy.proxy import Relay, Stream
from recorder.wire.jsontext import dump

SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}  # every SSE answer


class JSON(JSONResponse):
    """JSON encoded with orjson: projections run to megabytes, and FastAPI's default
    encoder walks them through pydantic first. Times go out as pydantic writes them
    (``...Z``), so a model dumped by the client library reads the same."""

    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        """``content`` written, or as it is when it is written already (bytes)."""
        return content if type(content) is bytes else dump(content)


class EventStream(StreamingResponse):
    media_type = "text/event-stream"
    # Seconds a client may take to take one chunk; past it, it is dropped (None: no limit).
    write_timeout: float | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        timeout = self.write_timeout
        if timeout is None:
            await super().__call__(scope, receive, send)
            return

        async def send_within(message: Message) -> None:
            async with asyncio.timeout(timeout):
                await send(message)

        try:
            await super().__call__(scope, receive, send_within)
        except* TimeoutError:
            # The client reads too slowly, or not at all: it is let go as one that left
            # (the chunks' producer, a recording say, hears of it and carries on).
            close = getattr(self.body_iterator, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()


class JSONLines(StreamingResponse):
    media_type = "application/x-ndjson"


# On an agent's answer relayed as it came (a non-2xx, say): it is served from the
# recorder's origin, so a browser must neither run it (an HTML page's scripts would reach
# the recorder's API) nor guess another type for it.
RELAY_HEADERS = {"content-security-policy": "sandbox", "x-content-type-options": "nosniff"}


def header_value(text: str) -> bytes:
    """``text`` as a header value: as is when printable ASCII, else percent-encoded."""
    if text.isascii() and text.isprintable():
        return text.encode()
    return quote(text, safe="").encode()


def proxied_response(result: Relay | Stream) -> Response:
    """What ``Proxy.start`` returned, as a route's answer (the fork route's, say)."""
    if isinstance(result, Relay):
        return Response(
            result.body,
            status_code=result.status,
            media_type=result.content_type,
            headers={**RELAY_HEADERS, "x-recorder-run-id": header_value(result.run_id).decode()},
        )
    run_id = header_value(result.run_id).decode()
    return EventStream(result.chunks, headers={**SSE_HEADERS, "x-recorder-run-id": run_id})


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorDetail, "description": description}


# Error answers every token-protected route may give; routes add their own.
ERRORS: dict[int | str, dict[str, Any]] = {
    401: _error("an API token is required"),
    403: _error("the token lacks the scope or the agent this needs"),
    404: _error("no such thread, run or agent"),
    422: _error("a parameter or body the recorder cannot use"),
    503: _error("the database is unavailable"),
}


def stream_doc(
    description: str, media_type: str = "text/event-stream"
) -> dict[int | str, dict[str, Any]]:
    """The 200 answer of an endpoint that streams text (SSE or JSON lines)."""
    return {
        200: {
            "description": description,
            "content": {media_type: {"schema": {"type": "string"}}},
        }
    }
