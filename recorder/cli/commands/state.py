"""The state at a point, and a thread's history of them: ``state``, ``history``."""

from __future__ import annotations

from recorder.cli import render
from recorder.cli.context import Context
from recorder.cli.parser import Commands
from recorder.models import ThreadHistory


def register(commands: Commands) -> None:
    p = commands.add(
        "state", state, "messages, state and pending interrupts at a point", data=True, json=True
    )
    p.add_argument("thread")
    p.add_argument("--run", help="a run of this thread (default: its latest)")
    p.add_argument("--seq", type=int, help="after this event of the run (default: its end)")

    p = commands.add(
        "history", history, "a thread at every run boundary, newest first", data=True, json=True
    )
    p.add_argument("thread")
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")


async def state(context: Context) -> int:
    args = context.args
    async with context.backend() as backend:
        at = await backend.thread_state(args.thread, run_id=args.run, seq=args.seq)
    context.out.data(at, lambda: render.state_text(at))
    return 0


async def history(context: Context) -> int:
    args = context.args
    async with context.backend() as backend:
        # One more than asked: whether the list was cut (the API has no cursor for it).
        asked = args.limit + 1 if 1 <= args.limit < 1000 else args.limit  # (1000: the most)
        checkpoints = await backend.history(args.thread, limit=asked)
    more = len(checkpoints) > args.limit
    checkpoints = checkpoints[: args.limit]
    answer = ThreadHistory(thread_id=args.thread, checkpoints=checkpoints)
    context.out.data(answer, lambda: render.history_text(args.thread, checkpoints))
    if more and not context.out.json:
        context.out.note(f"more boundaries: the newest {args.limit} shown (--limit N for more)")
    return 0
