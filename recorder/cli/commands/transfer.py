"""``export`` and ``import``: threads as JSONL (runs, inputs, events), byte-exact."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from recorder.cli.context import Context
from recorder.cli.output import closing_stream
from recorder.cli.parser import Commands
from recorder.errors import InputError


def register(commands: Commands) -> None:
    p = commands.add("export", export, "write threads as JSONL (runs, inputs, events)", data=True)
    p.add_argument("threads", nargs="*", help="thread ids (default: every thread)")
    p.add_argument("--out", help="file to write (default: stdout)")

    p = commands.add(
        "import",
        import_,
        "read a JSONL export; runs already there take only what they lack",
        data=True,
        json=True,
    )
    p.add_argument("file", help="an export; - for stdin")


async def export(context: Context) -> int:
    args = context.args
    async with (
        context.backend() as backend,
        closing_stream(backend.export_jsonl(args.threads)) as lines,
    ):
        if not args.out:
            async for line in lines:
                context.out.raw(line)
            return 0
        # Into a file beside it, renamed over it once whole: an export that fails (a
        # thread unknown, the server gone) leaves what --out named as it was.
        target = Path(args.out)
        partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
        try:
            with partial.open("wb") as out:
                async for line in lines:
                    out.write(line)
            partial.replace(target)
        except OSError as exc:  # said of the file named, not of the one beside it
            raise OSError(exc.errno, exc.strerror, str(target)) from exc
        finally:
            partial.unlink(missing_ok=True)
    return 0


async def import_(context: Context) -> int:
    # The file first: a name mistyped creates no database.
    with _open(context.args.file) as source:
        async with context.backend(create=True) as backend:
            report = await backend.import_jsonl(_lines(source))
    context.out.data(
        report,
        lambda: (
            f"imported {report.runs_created} runs ({report.runs_skipped} already present), "
            f"{report.events_added} events"
            + (
                f"; {report.runs_purged} runs a purge erased were not brought back"
                if report.runs_purged
                else ""
            )
        ),
    )
    return 0


def _open(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    try:
        return Path(path).open("rb")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc


def _lines(source: BinaryIO) -> Iterator[bytes]:
    yield from source
