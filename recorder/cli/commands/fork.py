"""``fork``: a new run from a point of a recorded run, or (``--dry-run``) its input."""

from __future__ import annotations

import argparse
import uuid

from recorder.cli.commands.replay import write_stream
from recorder.cli.context import Context
from recorder.cli.output import json_text
from recorder.cli.parser import Commands
from recorder.errors import InputError
from recorder.models import ForkOptions


def register(commands: Commands) -> None:
    p = commands.add(
        "fork", fork, "fork a new run from a point of a recorded run", data=True, json=True
    )
    p.add_argument("run")
    p.add_argument("--at", type=int, help="fork after this seq (default: the end)")
    p.add_argument("--message", action="append", default=[], help="a user message to append")
    p.add_argument("--run-id", help="the new run's id (default: a new one)")
    p.add_argument("--agent", action="append", default=[], help="--db: NAME=URL of the agent")
    p.add_argument("--dry-run", action="store_true", help="only print the RunAgentInput")


def fork_options(args: argparse.Namespace) -> ForkOptions:
    """The flags as the API's fork options (a new option: a flag here, a field there)."""
    return ForkOptions(
        at_seq=args.at,
        messages=list(args.message),
        run_id=args.run_id or f"run-{uuid.uuid4().hex}",
    )


async def fork(context: Context) -> int:
    args = context.args
    if args.agent and (args.url or (context.settings().url and not args.db)):
        raise InputError(
            "--agent is for forks through the database (--db); a server uses its own agents"
        )
    options = fork_options(args)
    async with context.backend() as backend:
        if args.dry_run:
            plan = await backend.plan_fork(args.run, options)
            context.out.data(plan, lambda: json_text(plan.input))
            if not context.out.json:
                at = "its end" if plan.parent_seq is None else f"seq {plan.parent_seq}"
                context.out.note(f"(to agent {plan.agent}, from run {args.run} after {at})")
            return 0
        await write_stream(context.out, backend.fork(args.run, options))
    context.out.note(f"forked run {options.run_id} from {args.run}")
    return 0
