"""The ``recorder`` command: the same services as the HTTP API, from a terminal."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

import orjson

from recorder.config import DEFAULT_DB, Settings, load_settings
from recorder.errors import RecorderError
from recorder.wire.jsontext import dump, parse

Handler = Callable[[argparse.Namespace], Coroutine[Any, Any, int]]


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return 2
    handler: Handler = args.handler
    try:
        with _runner() as runner:
            return runner.run(handler(args))
    except RecorderError as exc:
        print(f"recorder: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _runner() -> asyncio.Runner:
    """uvloop's event loop when installed (it comes with uvicorn[standard]): the proxy's
    per-request and per-chunk costs are mostly the loop's. asyncio's otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.Runner()
    return asyncio.Runner(loop_factory=uvloop.new_event_loop)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recorder", description="Record, inspect, replay and fork AG-UI agent runs."
    )
    sub = parser.add_subparsers(metavar="COMMAND")

    def command(
        name: str, handler: Handler, help_text: str, *, db: bool = True
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        if db:
            p.add_argument("--db", help=f"database URL (env RECORDER_DB; default {DEFAULT_DB})")
            p.add_argument("--config", help="a TOML settings file")
        p.set_defaults(handler=handler)
        return p

    p = command("serve", _serve, "run the recording proxy and the history API")
    _serve_options(p)
    p = command("demo", _demo, "record a few runs of the built-in demo agent and show them")
    p.add_argument("--serve", action="store_true", help="keep serving afterwards")
    p.add_argument("--port", type=int, default=0, help="port for --serve (default: any free one)")
    command("migrate", _migrate, "apply the database migrations")
    p = command("threads", _threads, "list threads")
    _remote(p)
    p.add_argument("--agent")
    p.add_argument("--status")
    p.add_argument("--search", help="text in the recorded messages")
    p.add_argument("--limit", type=int, default=50)
    p = command("show", _show, "a thread's tree of runs and transcript, or one run")
    _remote(p)
    p.add_argument("id", help="a thread id or a run id")
    p = command("state", _state, "messages, state and pending interrupts at a point")
    _remote(p)
    p.add_argument("thread")
    p.add_argument("--run")
    p.add_argument("--seq", type=int)
    p = command("replay", _replay, "print a run's or a thread's stream as SSE")
    p.add_argument("id", help="a run id or a thread id")
    p.add_argument("--after", type=int, default=-1, help="resume after this seq (runs)")
    p.add_argument("--compact", action="store_true", help="threads: snapshots only")
    p = command("fork", _fork, "fork a new run from a point of a recorded run")
    p.add_argument("run")
    p.add_argument("--at", type=int, help="fork after this seq (default: the end)")
    p.add_argument("--message", action="append", default=[], help="a user message to append")
    p.add_argument("--agent", action="append", default=[], help="NAME=URL of the agent")
    p.add_argument("--dry-run", action="store_true", help="only print the RunAgentInput")
    p = command("export", _export, "write threads as JSONL (runs, inputs, events)")
    p.add_argument("threads", nargs="*")
    p.add_argument("--out", help="file to write (default: stdout)")
    p = command("import", _import, "read a JSONL export into the database")
    p.add_argument("file")
    p = command("fold", _fold, "fold an event file into messages, state and interrupts", db=False)
    p.add_argument("file", help="JSON array, JSONL or SSE capture; - for stdin")
    p.add_argument(
        "--input",
        help="a RunAgentInput JSON file: the starting point (messages that are not a list, "
        "or entries that are not objects, are reported in problems and the fold goes on)",
    )
    p = command(
        "verify", _verify, "check an event file or a recorded run against the lifecycle rules"
    )
    p.add_argument("target", help="an event file (- for stdin) or a run id")
    return parser


def _serve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agent", action="append", default=[], help="NAME=URL (repeatable)")
    p.add_argument("--host", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8000)")
    p.add_argument("--demo-agent", action="store_true", help="mount the demo agent as 'demo'")
    p.add_argument("--durability", choices=["commit", "buffered"])
    p.add_argument("--api-token", help="protect the API (env RECORDER_API_TOKEN)")


def _remote(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="ask a running recorder (e.g. http://127.0.0.1:8000)")
    p.add_argument("--token", help="its API token")


def _settings(args: argparse.Namespace, **extra: Any) -> Settings:
    agents = getattr(args, "agent", None)
    return load_settings(
        getattr(args, "config", None),
        db=getattr(args, "db", None),
        agents=agents if isinstance(agents, list) and agents else None,
        **extra,
    )


def _dump(value: Any) -> None:
    sys.stdout.write(dump(value, indent=True).decode() + "\n")


# -- serve, demo, migrate ----------------------------------------------------------------


async def _serve(args: argparse.Namespace) -> int:
    from recorder.cli.serve import serve

    settings = _settings(
        args,
        host=args.host,
        port=args.port,
        demo_agent=args.demo_agent or None,
        durability=args.durability,
        api_token=args.api_token,
    )
    await serve(settings)
    return 0


async def _demo(args: argparse.Namespace) -> int:
    from recorder.cli.demo import run_demo

    settings = _settings(args, port=args.port)
    return await run_demo(settings, keep_serving=args.serve)


async def _migrate(args: argparse.Namespace) -> int:
    from recorder.store import open_store

    settings = _settings(args)
    store = await open_store(settings.db, migrate=True)
    await store.close()
    print(f"migrated {settings.db}")
    return 0


# -- history -------------------------------------------------------------------------------


async def _remote_get(args: argparse.Namespace, path: str, **params: Any) -> Any:
    import httpx

    headers = {"authorization": f"Bearer {args.token}"} if args.token else {}
    query = {k: v for k, v in params.items() if v is not None}
    async with httpx.AsyncClient(base_url=args.url, headers=headers, trust_env=False) as client:
        try:
            response = await client.get(path, params=query)
        except httpx.HTTPError as exc:
            raise RecorderError(f"cannot reach {args.url}: {exc}") from exc
    if response.status_code >= 400:
        raise RecorderError(f"{response.status_code}: {response.json().get('detail')}")
    return response.json()


async def _threads(args: argparse.Namespace) -> int:
    from recorder.cli import render

    if args.url:
        data = await _remote_get(
            args, "/threads", agent=args.agent, status=args.status, q=args.search, limit=args.limit
        )
        print(render.threads_table(data["threads"]))
        return 0
    async with _local(args) as runtime:
        print(await render.threads(runtime, args.agent, args.status, args.search, args.limit))
    return 0


async def _show(args: argparse.Namespace) -> int:
    from recorder.cli import render

    if args.url:
        try:
            data = await _remote_get(args, f"/threads/{args.id}")
            state = await _remote_get(args, f"/threads/{args.id}/state")
            print(render.thread_text(data, state))
        except RecorderError:
            run = await _remote_get(args, f"/runs/{args.id}")
            state = await _remote_get(args, f"/runs/{args.id}/state")
            print(render.run_text(run, state))
        return 0
    async with _local(args) as runtime:
        print(await render.show(runtime, args.id))
    return 0


async def _state(args: argparse.Namespace) -> int:
    if args.url:
        _dump(
            await _remote_get(args, f"/threads/{args.thread}/state", runId=args.run, seq=args.seq)
        )
        return 0
    async with _local(args) as runtime:
        thread = await runtime.store.get_thread(args.thread)
        run = await runtime.store.get_run(args.run or thread.latest_run_id or "")
        _dump((await runtime.history.project(run, args.seq)).to_json())
    return 0


async def _replay(args: argparse.Namespace) -> int:
    from recorder.errors import RunNotFound
    from recorder.timetravel.replay import ThreadStream, stream_run

    async with _local(args) as runtime:
        try:
            await runtime.store.get_run(args.id)
            chunks = stream_run(runtime.store, args.id, after_seq=args.after)
        except RunNotFound:
            chunks = ThreadStream(runtime.store, runtime.history).frames(
                args.id, compact=args.compact
            )
        async for chunk in chunks:
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
    return 0


async def _fork(args: argparse.Namespace) -> int:
    from recorder.proxy.proxy import Relay
    from recorder.timetravel.fork import ForkRequest, plan_fork

    async with _local(args) as runtime:
        req = ForkRequest(at_seq=args.at, messages=[{"content": m} for m in args.message])
        plan = await plan_fork(runtime.store, runtime.history, args.run, req)
        if args.dry_run:
            _dump(plan.input)
            return 0
        result = await runtime.proxy.start(
            plan.agent, plan.body, {}, parent=(plan.parent_run_id, plan.parent_seq)
        )
        if isinstance(result, Relay):
            sys.stderr.write(f"upstream answered {result.status}: {result.body[:500]!r}\n")
            return 1
        async for chunk in result.chunks:
            sys.stdout.buffer.write(chunk)
        print(f"\nforked run {plan.input['runId']} from {args.run}", file=sys.stderr)
    return 0


async def _export(args: argparse.Namespace) -> int:
    from recorder.store import open_store
    from recorder.timetravel.transfer import export_lines

    store = await open_store(_settings(args).db, migrate=True)
    out = open(args.out, "wb") if args.out else sys.stdout.buffer  # noqa: SIM115
    try:
        async for line in export_lines(store, args.threads):
            out.write(line)
    finally:
        if args.out:
            out.close()
        await store.close()
    return 0


async def _import(args: argparse.Namespace) -> int:
    from recorder.store import open_store
    from recorder.timetravel.transfer import import_lines

    store = await open_store(_settings(args).db, migrate=True)
    try:
        report = await import_lines(store, _read_input(args.file).splitlines())
    finally:
        await store.close()
    print(
        f"imported {report.runs_created} runs ({report.runs_skipped} already present), "
        f"{report.events_added} events"
    )
    return 0


# -- files ----------------------------------------------------------------------------------


def _read_input(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise RecorderError(f"cannot read {path}: {exc}") from exc


async def _fold(args: argparse.Namespace) -> int:
    from recorder.reference.projector import fold
    from recorder.wire.events import read_event_file

    frames = read_event_file(_read_input(args.file))
    messages: Any = None
    state: Any = None
    if args.input:
        try:
            posted = parse(_read_input(args.input))
        except orjson.JSONDecodeError as exc:
            raise RecorderError(f"{args.input}: not JSON ({exc})") from exc
        if not isinstance(posted, dict):
            raise RecorderError(f"{args.input}: not a RunAgentInput object")
        messages, state = posted.get("messages"), posted.get("state")
    _dump(fold(frames, messages=messages, state=state).to_json())
    return 0


async def _verify(args: argparse.Namespace) -> int:
    from recorder.reference.check import verify_frames

    if args.target != "-" and not os.path.exists(args.target):
        from recorder.store import open_store

        store = await open_store(_settings(args).db, migrate=True)
        try:
            frames = [e.payload for e in await store.read_events(args.target)]
        finally:
            await store.close()
    else:
        from recorder.wire.events import read_event_file

        frames = read_event_file(_read_input(args.target))
    violations = verify_frames(frames)
    if violations:
        first = violations[0]
        print(first.message)
        if len(violations) > 1:
            print(
                f"({len(violations)} violations; the first at event {first.index})", file=sys.stderr
            )
        return 1
    print(f"ok: {len(frames)} events")
    return 0


class _local:
    """A runtime on the local database (no server), for the history commands."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.settings = _settings(args)

    async def __aenter__(self) -> Any:
        from recorder.runtime import Runtime

        self.runtime = await Runtime.start(self.settings)
        return self.runtime

    async def __aexit__(self, *exc: object) -> None:
        await self.runtime.close()


if __name__ == "__main__":
    raise SystemExit(main())
