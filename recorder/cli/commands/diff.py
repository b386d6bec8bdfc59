"""What changed between two points: ``diff``."""

from __future__ import annotations

import json

from recorder.cli.context import Context
from recorder.cli.parser import Commands
from recorder.models import StateDiff


def register(commands: Commands) -> None:
    p = commands.add(
        "diff",
        diff,
        "the state's JSON Patch and the messages changed between two points",
        data=True,
        json=True,
    )
    p.add_argument("run", help="the run of the first point")
    p.add_argument(
        "--from", dest="from_seq", type=int, default=-1, help="after this event (-1: start)"
    )
    p.add_argument("--to", dest="to_seq", type=int, help="after this event (default: the end)")
    p.add_argument("--to-run", help="the second point is in this run (e.g. a fork)")


async def diff(context: Context) -> int:
    args = context.args
    async with context.backend() as backend:
        answer = await backend.diff(
            args.run, from_seq=args.from_seq, to_seq=args.to_seq, to_run=args.to_run
        )
    context.out.data(answer, lambda: diff_text(answer))
    return 0


def _point(run_id: str, seq: int | None) -> str:
    return f"{run_id} @ " + ("end" if seq is None else "start" if seq == -1 else f"seq {seq}")


def diff_text(answer: StateDiff) -> str:
    lines = [
        f"from {_point(answer.source.run_id, answer.source.seq)}",
        f"to   {_point(answer.target.run_id, answer.target.seq)}",
    ]
    if not answer.patch:
        lines.append("state: unchanged")
    for op in answer.patch:
        value = f" {json.dumps(op['value'], ensure_ascii=False)}" if "value" in op else ""
        source = f" from {op['from']}" if "from" in op else ""
        lines.append(f"state: {op['op']} {op['path'] or '/'}{source}{value}")
    changes = answer.messages
    for message in changes.added:
        lines.append(f"+ {_message(message)}")
    for message in changes.removed:
        lines.append(f"- {_message(message)}")
    for change in changes.changed:
        lines.append(f"~ {_message(change.before)}")
        lines.append(f"  -> {_message(change.after)}")
    if not (changes.added or changes.removed or changes.changed):
        lines.append("messages: unchanged")
    return "\n".join(lines)


def _message(message: dict[str, object]) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    if len(text) > 100:
        text = text[:99] + "…"
    return f"{message.get('role', '?')} {message.get('id', '')}: {text}".replace("\n", " ")
