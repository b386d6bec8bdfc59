"""``replay``: a run's or a thread's stream, as SSE or (``--json``) one event per line."""

from __future__ import annotations

from collections.abc import AsyncIterator

from recorder.cli.context import Context
from recorder.cli.output import Output, closing_stream
from recorder.cli.parser import Commands
from recorder.errors import InputError, NotFound
from recorder.models import StreamedEvent
from recorder.timetravel.views import check_after_seq
from recorder.wire.sse import encode_frame


def register(commands: Commands) -> None:
    p = commands.add(
        "replay", replay, "print a run's or a thread's stream as SSE", data=True, json=True
    )
    p.add_argument("id", help="a run id or a thread id")
    p.add_argument("--after", type=int, help="runs: resume after this seq")
    p.add_argument("--compact", action="store_true", help="threads: snapshots only")
    p.add_argument(
        "--no-follow", action="store_true", help="stop at the end of what is recorded now"
    )


async def replay(context: Context) -> int:
    args = context.args
    live = not args.no_follow
    if args.after is not None:
        check_after_seq(args.after, "--after")
    async with context.backend() as backend:
        try:
            await backend.run(args.id)
        except NotFound:
            try:
                await backend.thread(args.id)
            except NotFound:
                raise NotFound(f"no run or thread {args.id!r}") from None
            if args.after is not None:
                raise InputError(
                    f"--after resumes a run's stream; {args.id!r} is a thread"
                ) from None
            events = backend.replay_thread(args.id, compact=args.compact, live=live)
        else:
            if args.compact:
                raise InputError(f"--compact is for a thread's stream; {args.id!r} is a run")
            after = -1 if args.after is None else args.after
            events = backend.replay_run(args.id, after_seq=after, live=live)
        await write_stream(context.out, events)
    return 0


async def write_stream(out: Output, events: AsyncIterator[StreamedEvent]) -> bytes | None:
    """SSE exactly as the stream sent it (``id:`` lines kept), or its events as JSON lines;
    the last event's data (None for none)."""
    last = None
    async with closing_stream(events):
        async for event in events:
            if out.json:
                out.raw(event.data.replace(b"\n", b" ") + b"\n")
            else:
                out.raw(encode_frame(event.data, event.id))
            last = event.data
    return last
