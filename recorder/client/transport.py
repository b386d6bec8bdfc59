"""HTTP for the client: the token, answers read as models, errors as the project's own.

The server answers every error as ``{"detail": "one sentence"}``; its status picks the
error type and the sentence travels unchanged, so a caller (the CLI, say) reports the same
words whether it asked a server or the database. A fork's answer marked as relayed is the
agent's own (a non-2xx), reported as an ``UpstreamError``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import orjson

from recorder.errors import (
    Conflict,
    InputError,
    NotFound,
    RecorderError,
    StoreUnavailable,
    UpstreamError,
)
from recorder.models import StreamedEvent
from recorder.wire.sse import FrameSplitter

RELAYED = "x-recorder-relayed"

_ERRORS: dict[int, type[RecorderError]] = {
    404: NotFound,
    409: Conflict,
    413: InputError,
    422: InputError,
    503: StoreUnavailable,
}


def agent_answer(status: int, body: bytes) -> UpstreamError:
    """The error for an agent's non-2xx answer to a fork (the same words locally)."""
    text = body[:500].decode("utf-8", "replace").strip()
    return UpstreamError(
        f"the agent answered {status}: {text}" if text else f"the agent answered {status}"
    )


def error_for(response: httpx.Response) -> RecorderError:
    if response.headers.get(RELAYED):
        return agent_answer(response.status_code, response.content)
    detail = _detail(response.content) or response.reason_phrase or "error"
    kind = _ERRORS.get(response.status_code)
    if kind is None:
        return RecorderError(f"{response.status_code}: {detail}")
    return kind(detail)


def _detail(body: bytes) -> str | None:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:  # not the recorder's (a proxy's error page): on one line
        text = " ".join(body[:2000].decode("utf-8", "replace").split())[:300]
        return f"an answer that is not a recorder's: {text}" if text else None
    detail = data.get("detail") if isinstance(data, dict) else None
    return detail if isinstance(detail, str) else None


async def check(response: httpx.Response) -> None:
    """Raise the project's error for an error answer (its body read first, if streamed)."""
    if response.status_code < 400:
        return
    await response.aread()
    raise error_for(response)


async def events(response: httpx.Response) -> AsyncIterator[StreamedEvent]:
    """The SSE answer's events, as they arrive."""
    splitter = FrameSplitter()
    async for chunk in response.aiter_bytes():
        for frame in splitter.feed(chunk):
            yield StreamedEvent(frame.data, frame.id)
    for frame in splitter.close():
        yield StreamedEvent(frame.data, frame.id)


async def lines(response: httpx.Response) -> AsyncIterator[bytes]:
    """The JSONL answer's lines, each with its newline, bytes as sent."""
    rest = b""
    async for chunk in response.aiter_bytes():
        *complete, rest = (rest + chunk).split(b"\n")
        for line in complete:
            yield line + b"\n"
    if rest:
        yield rest + b"\n"


def unreachable(base_url: str, exc: httpx.TransportError) -> RecorderError:
    reason = str(exc) or type(exc).__name__
    return RecorderError(f"cannot reach the recorder at {shown(base_url)}: {reason}")


def shown(url: str) -> str:
    """A recorder's URL as messages show it: without the password of its user part."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return url
    hidden = parsed.copy_with(username=parsed.username, password="***")
    return str(hidden) if parsed.password else url
