"""Browsing recorded data: ``threads``, ``show``, ``events``."""

from __future__ import annotations

from recorder.cli import render
from recorder.cli.context import Context
from recorder.cli.parser import Commands
from recorder.errors import NotFound
from recorder.models import EventPage, ThreadPage
from recorder.timetravel.annotating import parse_tags
from recorder.timetravel.views import check_after_seq


def register(commands: Commands) -> None:
    p = commands.add(
        "threads", threads, "list threads, most recently updated first", data=True, json=True
    )
    p.add_argument("--agent")
    p.add_argument("--status")
    p.add_argument("--search", help="text in the recorded messages")
    p.add_argument("--since", help="updated at or after (ISO-8601 or epoch seconds)")
    p.add_argument("--until", help="updated before (ISO-8601 or epoch seconds)")
    p.add_argument(
        "--tag", action="append", metavar="KEY:VALUE", help="on the thread or one of its runs"
    )
    p.add_argument("--limit", type=int, default=50, help="threads per page (default 50)")
    p.add_argument("--cursor", help="the page after this cursor (printed when there is more)")
    p.add_argument("--all", action="store_true", help="every page")

    p = commands.add(
        "show", show, "a thread's tree of runs and transcript, or one run", data=True, json=True
    )
    p.add_argument("id", help="a thread id or a run id")

    p = commands.add("events", events, "a run's recorded events", data=True, json=True)
    p.add_argument("run")
    p.add_argument("--after", type=int, default=-1, help="events after this seq")
    p.add_argument("--limit", type=int, default=1000, help="events per page (default 1000)")
    p.add_argument("--all", action="store_true", help="every page")


async def threads(context: Context) -> int:
    args = context.args
    async with context.backend() as backend:
        page = await backend.threads(
            agent=args.agent,
            status=args.status,
            since=args.since,
            until=args.until,
            text=args.search,
            tags=dict(parse_tags(args.tag)),
            limit=args.limit,
            cursor=args.cursor,
        )
        found = list(page.threads)
        while args.all and page.next_cursor is not None:
            page = await backend.threads(
                agent=args.agent,
                status=args.status,
                since=args.since,
                until=args.until,
                text=args.search,
                tags=dict(parse_tags(args.tag)),
                limit=args.limit,
                cursor=page.next_cursor,
            )
            found += page.threads
    answer = ThreadPage(threads=found, next_cursor=page.next_cursor)
    filtered = any(
        (args.agent, args.status, args.since, args.until, args.search, args.tag, args.cursor)
    )
    context.out.data(answer, lambda: render.threads_table(answer.threads, filtered=filtered))
    if answer.next_cursor is not None and not context.out.json:
        context.out.note(f"more threads: --cursor {answer.next_cursor} (or --all)")
    return 0


async def show(context: Context) -> int:
    ident = context.args.id
    async with context.backend() as backend:
        try:
            thread = await backend.thread(ident)
        except NotFound:
            try:
                run = await backend.run(ident)
            except NotFound:
                raise NotFound(f"no thread or run {ident!r}") from None
            at = await backend.run_state(ident)
            context.out.data(
                {"run": run.to_json(), "state": at.to_json()}, lambda: render.run_text(run, at)
            )
            return 0
        now = await backend.thread_state(ident)
    context.out.data(
        {"thread": thread.to_json(), "state": now.to_json()},
        lambda: render.thread_text(thread, now),
    )
    return 0


async def events(context: Context) -> int:
    args = context.args
    check_after_seq(args.after, "--after")
    async with context.backend() as backend:
        page = await backend.events(args.run, after_seq=args.after, limit=args.limit)
        found = list(page.events)
        while args.all and page.next_after_seq is not None:
            page = await backend.events(args.run, after_seq=page.next_after_seq, limit=args.limit)
            found += page.events
    answer = EventPage(run_id=args.run, events=found, next_after_seq=page.next_after_seq)
    context.out.data(answer, lambda: render.events_table(answer.events))
    if answer.next_after_seq is not None and not context.out.json:
        context.out.note(f"more events: --after {answer.next_after_seq} (or --all)")
    return 0
