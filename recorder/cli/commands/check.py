"""The reference client's checks and fold, on event files or recorded runs: ``verify``, ``fold``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import orjson

from recorder.cli import render
from recorder.cli.context import Context
from recorder.cli.output import json_text
from recorder.cli.parser import Commands
from recorder.errors import InputError, NotFound
from recorder.models import Verification
from recorder.reference.projector import fold as fold_frames
from recorder.timetravel.views import verification
from recorder.wire.events import read_event_file
from recorder.wire.jsontext import parse


def register(commands: Commands) -> None:
    p = commands.add(
        "verify",
        verify,
        "check an event file or a recorded run against the lifecycle rules",
        data=True,
        json=True,
    )
    p.add_argument("target", help="an event file (- for stdin) or a run id")

    p = commands.add(
        "fold", fold, "fold an event file into messages, state and interrupts", json=True
    )
    p.add_argument("file", help="JSON array, JSONL or SSE capture; - for stdin")
    p.add_argument(
        "--input",
        help="a RunAgentInput JSON file: the starting point (messages that are not a list, "
        "or entries that are not objects, are reported in problems and the fold goes on)",
    )


def read_input(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc


async def verify(context: Context) -> int:
    target = context.args.target
    if target == "-" or os.path.exists(target):
        frames = read_event_file(read_input(target))
        report = Verification.model_validate(verification(None, frames))
    else:
        async with context.backend() as backend:
            try:
                report = await backend.verify(target)
            except NotFound as exc:
                raise NotFound(f"no file {target!r}, and {exc}") from exc
    context.out.data(report, lambda: render.verification_text(report))
    if not report.ok and not context.out.json and len(report.violations) > 1:
        first = report.violations[0]
        context.out.note(f"({len(report.violations)} violations; the first at event {first.index})")
    return 0 if report.ok else 1


async def fold(context: Context) -> int:
    """Always JSON: ``{"messages", "state", "pendingInterrupts", "problems"}``."""
    args = context.args
    frames = read_event_file(read_input(args.file))
    messages: Any = None
    state: Any = None
    if args.input:
        try:
            posted = parse(read_input(args.input))
        except orjson.JSONDecodeError as exc:
            raise InputError(f"{args.input}: not JSON ({exc})") from exc
        if not isinstance(posted, dict):
            raise InputError(f"{args.input}: not a RunAgentInput object")
        messages, state = posted.get("messages"), posted.get("state")
    context.out.line(json_text(fold_frames(frames, messages=messages, state=state).to_json()))
    return 0
