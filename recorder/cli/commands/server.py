"""Running a recorder: ``serve``, ``demo``, ``migrate``."""

from __future__ import annotations

from recorder.cli.context import Context
from recorder.cli.demo import run_demo
from recorder.cli.local import describe_database, open_database
from recorder.cli.parser import Commands
from recorder.cli.serve import serve as serve_forever
from recorder.redaction import Redactor
from recorder.store import EventStore, open_store
from recorder.store.model import RUNNING
from recorder.timetravel.history import History, rebuild_checkpoints
from recorder.timetravel.transfer import rebuild_summaries


def register(commands: Commands) -> None:
    p = commands.add("serve", serve, "run the recording proxy and the history API", db=True)
    p.add_argument("--agent", action="append", default=[], help="NAME=URL (repeatable)")
    p.add_argument("--host", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8000)")
    p.add_argument("--demo-agent", action="store_true", help="mount the demo agent as 'demo'")
    p.add_argument("--durability", choices=["commit", "buffered"])
    p.add_argument("--api-token", help="protect the API (env RECORDER_API_TOKEN)")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-format", choices=["text", "json"], help="log lines on stderr")
    p.add_argument("--access-log", action="store_true", help="log every request")

    p = commands.add(
        "demo", demo, "record a few runs of the built-in demo agent and show them", db=True
    )
    p.add_argument("--serve", action="store_true", help="keep serving afterwards")
    p.add_argument("--port", type=int, default=0, help="port for --serve (default: any free one)")

    commands.add("migrate", migrate, "create the database or bring it up to date", db=True)
    commands.add(
        "rebuild",
        rebuild,
        "drop the derived checkpoints and build them again from the log",
        db=True,
    )


async def serve(context: Context) -> int:
    args = context.args
    settings = context.settings(
        host=args.host,
        port=args.port,
        demo_agent=args.demo_agent or None,
        durability=args.durability,
        api_token=args.api_token,
        log_level=args.log_level,
        log_format=args.log_format,
        access_log=args.access_log or None,
    )
    await serve_forever(settings)
    return 0


async def demo(context: Context) -> int:
    settings = context.settings(port=context.args.port)
    return await run_demo(settings, keep_serving=context.args.serve)


async def migrate(context: Context) -> int:
    settings = context.settings()
    store = await open_store(settings.db, migrate=True)
    await store.close()
    context.out.line(f"migrated {describe_database(settings.db)}")
    return 0


async def rebuild(context: Context) -> int:
    """Checkpoints and threads' summaries are derived data: built again from the log,
    checkpoints run by run (every closed run; a running one gets its checkpoints when it
    closes), summaries from each thread's latest closed run."""
    settings = context.settings()
    store = await open_database(settings, create=False)
    rules = settings.redaction
    try:
        history = History(store, checkpoint_every=settings.checkpoint_every)
        count = await rebuild_checkpoints(history, await _closed_runs(store))
        redactor = Redactor.from_config(rules) if rules.rules else None
        summaries = await rebuild_summaries(store, redactor)
    finally:
        await store.close()
    context.out.line(
        f"rebuilt the checkpoints of {count} runs and the summaries of {summaries} threads "
        f"in {describe_database(settings.db)}"
    )
    return 0


async def _closed_runs(store: EventStore) -> list[str]:
    run_ids: list[str] = []
    cursor = None
    while True:
        page = await store.list_threads(limit=500, cursor=cursor)
        for thread in page.items:
            runs = await store.list_runs(thread.thread_id)
            run_ids += [run.run_id for run in runs if run.status != RUNNING]
        if page.cursor is None:
            return run_ids
        cursor = page.cursor
