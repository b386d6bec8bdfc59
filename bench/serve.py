"""The servers the benchmarks talk to, each run in its own process under uvicorn.

    python -m bench.serve upstream --port P [--events N --seed S]
    python -m bench.serve bare --port P --agent NAME=URL ...
    python -m bench.serve recorder --port P --db URL --agent NAME=URL ... [--durability D]
                                   [--no-metrics] [--no-journal] [--store-deadline S]
                                   [--redaction] [--without chain] [--without check]
    python -m bench.serve inprocess --port P --db URL [--events N --seed S]

All of them run with the same uvicorn settings (loop and http "auto": uvloop and httptools
when installed, no access log) on 127.0.0.1 only.

- ``upstream``: a raw ASGI app. ``POST /events`` streams the pre-encoded "mixed" workload,
  one ``data: ...`` frame per body chunk (so per network write); ``POST /small`` answers a
  minimal run (RUN_STARTED, RUN_FINISHED) in one chunk.
- ``bare``: the cheapest proxy on the same web stack: FastAPI, httpx ``aiter_raw`` into a
  ``StreamingResponse``; no parsing, no recording.
- ``recorder``: the project's app, ``create_app(Settings(...))``; ``--no-journal`` turns the
  journal off, ``--store-deadline`` sets its deadline; ``--no-metrics`` turns
  its Prometheus metrics off (they are on by default); ``--redaction`` turns the built-in
  redaction rules on (off by default). ``--without chain`` / ``--without check`` leave the
  hash chain's SHA-256 / the stream check out of each event's path: a what-if that shows
  what they cost the hop, never a recorder to keep a log with.
- ``inprocess``: the ``upstream`` app itself, recorded in its own process by
  ``recorder.asgi.RecordingMiddleware`` (agents ``up`` at ``/events``, ``small`` at
  ``/small``): the same endpoints, recorded with no hop.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
import orjson
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from bench.workload import mixed_events, sse_body

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]


def small_run() -> bytes:
    started = {"type": "RUN_STARTED", "threadId": "small", "runId": "small"}
    finished = {"type": "RUN_FINISHED", "threadId": "small", "runId": "small"}
    return b"".join(sse_body([orjson.dumps(started), orjson.dumps(finished)]))


def upstream_app(events: int, seed: int) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    chunks = sse_body(mixed_events(events, seed=seed))
    small = [small_run()]

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            more = message.get("more_body", False)
        path = scope["path"].rstrip("/")
        body = {"/events": chunks, "/small": small}.get(path)
        if body is None:
            status = 200 if path == "/healthz" else 404
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        for chunk in body:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    return app


def bare_app(agents: dict[str, str]) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The same client settings as the recorder's (recorder/runtime.py).
        timeout = httpx.Timeout(60.0, connect=10.0)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
        async with httpx.AsyncClient(timeout=timeout, limits=limits, trust_env=False) as client:
            app.state.client = client
            yield

    app = FastAPI(lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/healthz")
    async def healthz() -> dict[str, bool]:
        return {"ok": True}

    @app.post("/agents/{name}")
    async def proxy(name: str, request: Request) -> StreamingResponse:
        client: httpx.AsyncClient = request.app.state.client
        upstream = client.build_request(
            "POST",
            agents[name],
            content=await request.body(),
            headers={"content-type": "application/json", "accept": "text/event-stream"},
        )
        response = await client.send(upstream, stream=True)
        return StreamingResponse(
            response.aiter_raw(),
            status_code=response.status_code,
            media_type=response.headers.get("content-type"),
            background=BackgroundTask(response.aclose),
        )

    return app


def recorder_app(args: argparse.Namespace, agents: dict[str, str]) -> Any:
    from recorder.api import create_app
    from recorder.config import Settings

    settings = Settings(
        db=args.db,
        agents=agents,
        port=args.port,
        durability=args.durability,
        checkpoint_every=args.checkpoint_every,
        metrics=not args.no_metrics,
        journal=not args.no_journal,
        store_deadline=args.store_deadline,
        search_index=not args.no_search_index,
        redaction={"rules": ["builtin"]} if args.redaction else {},
    )
    return create_app(settings)


def _chain_off() -> None:
    """SHA-256 of the hash chain replaced by a constant (as the ``chain`` benchmark does):
    the log written fails verification."""
    from bench.chain import no_hashing
    from recorder.store import chain

    chain.sha256 = no_hashing


def _check_off() -> None:
    """The per-run stream check (the lifecycle rules) skipped: no violation is noted."""
    from recorder.reference.check import StreamCheck

    StreamCheck.feed = lambda self, frame: None  # type: ignore[method-assign]


# What the proxy benchmark's what-if recorder leaves out of each event's path.
WITHOUT: dict[str, Callable[[], None]] = {"chain": _chain_off, "check": _check_off}


def inprocess_app(args: argparse.Namespace) -> Any:
    from recorder.asgi import RecordingMiddleware
    from recorder.config import Settings

    settings = Settings(db=args.db, durability=args.durability)
    agents = {"up": "/events", "small": "/small"}
    return RecordingMiddleware(
        upstream_app(args.events, args.seed), agents=agents, settings=settings
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.serve")
    parser.add_argument("kind", choices=["upstream", "bare", "recorder", "inprocess"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--agent", action="append", default=[], metavar="NAME=URL")
    parser.add_argument("--db")
    parser.add_argument("--durability", default="commit", choices=["commit", "buffered"])
    parser.add_argument("--checkpoint-every", type=int, default=1000)
    parser.add_argument("--no-metrics", action="store_true")
    parser.add_argument("--no-journal", action="store_true")
    parser.add_argument("--store-deadline", type=float, default=2.0)
    parser.add_argument("--no-search-index", action="store_true")
    parser.add_argument("--redaction", action="store_true", help="the built-in redaction rules")
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        choices=list(WITHOUT),
        help="a what-if of the hop's (never a recorder to use): this per-event work left out",
    )
    args = parser.parse_args(argv)
    for part in args.without:
        WITHOUT[part]()
    agents = dict(spec.split("=", 1) for spec in args.agent)
    if args.kind == "upstream":
        app: Any = upstream_app(args.events, args.seed)
    elif args.kind == "bare":
        app = bare_app(agents)
    else:
        from recorder.cli.serve import settle_heap

        app = recorder_app(args, agents) if args.kind == "recorder" else inprocess_app(args)
        settle_heap()  # as `recorder serve` does
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        loop="auto",
        http="auto",
        lifespan="on",
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
