"""``fork``: a new run from a point of a recorded run, or (``--dry-run``) its input.

Where the branch goes is the fork's strategy: ``--thread [ID]`` a new thread, ``--same-thread``
the parent's, neither the agent's configured strategy (through ``--db``, this command's
agent settings; through ``--url``, the server's). The fork is planned first, then posted
with the planned thread, so the command can say where it went.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from recorder.cli.commands.replay import write_stream
from recorder.cli.context import Context
from recorder.cli.output import json_text
from recorder.cli.parser import Commands
from recorder.cli.render import point_text
from recorder.errors import InputError
from recorder.models import ForkOptions, ForkPlan
from recorder.wire.events import decode
from recorder.wire.ids import check_id

# ``--thread`` given no id: a new thread, named after the new run (an empty id is an id
# the API refuses, so it is not taken for this).
_FRESH: Any = object()


def register(commands: Commands) -> None:
    p = commands.add(
        "fork", fork, "fork a new run from a point of a recorded run", data=True, json=True
    )
    p.add_argument("run")
    p.add_argument(
        "--at",
        "--seq",
        dest="at",
        type=int,
        help="fork after this seq, as `state --seq` reads it (default: the end)",
    )
    p.add_argument("--message", action="append", default=[], help="a user message to append")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--thread",
        nargs="?",
        const=_FRESH,
        metavar="NEW_ID",
        help="fork into a new thread (this id, or one made after the run's)",
    )
    where.add_argument(
        "--same-thread", action="store_true", help="fork on the parent's thread, with parentRunId"
    )
    state = p.add_mutually_exclusive_group()
    state.add_argument("--state", metavar="FILE", help="replace the state with this JSON (- stdin)")
    state.add_argument(
        "--patch", metavar="FILE", help="a JSON Patch applied to the state at the point (- stdin)"
    )
    change = p.add_mutually_exclusive_group()
    change.add_argument(
        "--edit", metavar="MESSAGE_ID", help="run a user message's turn again with --text"
    )
    change.add_argument(
        "--regenerate", metavar="MESSAGE_ID", help="run the turn of an assistant message again"
    )
    p.add_argument("--text", help="the edited message's new text (with --edit)")
    p.add_argument("--run-id", help="the new run's id (default: a new one)")
    p.add_argument("--agent", action="append", default=[], help="--db: NAME=URL of the agent")
    p.add_argument("--dry-run", action="store_true", help="only print the RunAgentInput")


def fork_options(args: argparse.Namespace) -> ForkOptions:
    """The flags as the API's fork options (a new option: a flag here, a field there)."""
    if (args.edit is None) != (args.text is None):
        raise InputError("--edit MESSAGE_ID and --text TEXT go together")
    fields: dict[str, Any] = {
        "at_seq": args.at,
        "messages": list(args.message),
        # (an empty id is refused, as the API refuses it, never replaced)
        "run_id": f"run-{uuid.uuid4().hex}"
        if args.run_id is None
        else check_id(args.run_id, "--run-id"),
    }
    if args.thread is _FRESH:
        fields["strategy"] = "new-thread"
    elif args.thread is not None:
        # Where a named thread is decides (the parent's: the same thread), as for the API.
        fields["thread_id"] = check_id(args.thread, "--thread")
    if args.same_thread:
        fields["strategy"] = "same-thread"
    if args.state is not None:
        fields["state"] = _json_file(args.state, "--state")
    if args.patch is not None:
        fields["state_patch"] = _json_file(args.patch, "--patch")
    if args.edit is not None:
        fields["edit"] = {"message_id": args.edit, "content": args.text}
    if args.regenerate is not None:
        fields["regenerate"] = args.regenerate
    return _options(fields)


# The options' fields as this command's flags name them, in what it says of them.
_FLAGS = {
    "at_seq": "--at",
    "messages": "--message",
    "run_id": "--run-id",
    "thread_id": "--thread",
    "state": "--state",
    "state_patch": "--patch",
    "edit": "--edit",
    "regenerate": "--regenerate",
}


def _flag(where: tuple[int | str, ...]) -> str:
    return _FLAGS.get(str(where[0]), str(where[0])) if where else "fork"


def _options(fields: dict[str, Any]) -> ForkOptions:
    try:
        return ForkOptions.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(f"{_flag(e['loc'])}: {e['msg']}" for e in exc.errors())
        raise InputError(problems) from None


def _json_file(name: str, flag: str) -> Any:
    try:
        data = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
        return orjson.loads(data)
    except OSError as exc:
        raise InputError(f"{flag}: cannot read {name}: {exc.strerror or exc}") from exc
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{flag}: {name} is not JSON ({exc})") from exc


def where_it_went(plan: ForkPlan) -> str:
    """The fork point and the strategy, as a note says them."""
    point = point_text(plan.parent_seq)
    if plan.strategy == "new-thread":
        thread = f"into a new thread, {plan.thread_id}"
    else:
        thread = f"on its thread, {plan.thread_id}"
    return f"from run {plan.parent_run_id} {point}, {thread} ({plan.strategy})"


async def fork(context: Context) -> int:
    args = context.args
    if args.agent and (args.url or (context.settings().url and not args.db)):
        raise InputError(
            "--agent is for forks through the database (--db); a server uses its own agents"
        )
    options = fork_options(args)
    async with context.backend() as backend:
        plan = await backend.plan_fork(args.run, options)
        if args.dry_run:
            context.out.data(plan, lambda: json_text(plan.input))
            if not context.out.json:
                context.out.note(f"(to agent {plan.agent}, {where_it_went(plan)})")
            return 0
        # Posted with the planned thread, the fork goes where its plan said.
        planned = options.model_dump(by_alias=False, exclude_unset=True)
        planned["thread_id"] = plan.thread_id
        last = await write_stream(context.out, backend.fork(args.run, _options(planned)))
    context.out.note(f"forked run {options.run_id} {where_it_went(plan)}")
    ended = decode(last) if last is not None else None
    if ended is not None and ended.get("type") == "RUN_ERROR":
        # Recorded, but the branch's run failed (its agent unreachable, say): a script
        # that forks must not take it for a branch that answered.
        context.out.note(f"the forked run ended in an error: {ended.get('message', '')}")
        return 2
    return 0
