"""``recorder``: parse, run the command on an event loop, exit with one line on error.

Exit codes: 0 done (a closed stdout included: ``recorder replay ... | head``), 1 the answer
is "no" (``verify`` found a violation), 2 the command could not do its job (the line on
stderr says why), 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
from collections.abc import Sequence

from recorder.cli.commands import GROUPS
from recorder.cli.context import Context
from recorder.cli.output import visible
from recorder.cli.parser import build_parser
from recorder.errors import RecorderError


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        # A terminal or pipe that is not UTF-8 (LC_ALL=C without UTF-8 mode) gets what it
        # cannot encode escaped, not a traceback halfway through the answer.
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser(GROUPS)
    words = list(sys.argv[1:] if argv is None else argv)
    args, extra = parser.parse_known_args(words)
    command: argparse.ArgumentParser = getattr(args, "command_parser", parser)
    if extra and hasattr(args, "handler"):
        args = _intermixed(command, words, args)
        extra = []
    if extra:  # said by the command's own parser, with its usage (exit 2)
        command.error(f"unrecognized arguments: {' '.join(extra)}")
    if not hasattr(args, "handler"):  # a group without its command: its help, as an error
        command.print_help(sys.stderr)
        return 2
    try:
        with _runner() as runner:
            code: int = runner.run(args.handler(Context(args)))
            return code
    except RecorderError as exc:
        sys.stderr.write(f"recorder: {visible(str(exc))}\n")
        return 2
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except OSError as exc:  # a file given (--out, an input) that cannot be written or read
        where = f"{exc.filename}: " if exc.filename else ""
        sys.stderr.write(f"recorder: {where}{exc.strerror or exc}\n")
        return 2
    except KeyboardInterrupt:
        return 130


def _intermixed(
    command: argparse.ArgumentParser, words: list[str], args: argparse.Namespace
) -> argparse.Namespace:
    """The command's words parsed again with options between its positionals (``tag T
    --run R k=v``), which a positional taking several values stops otherwise. Anything
    still left over is said by the command's own parser, with its usage (exit 2)."""
    depth = len(command.prog.split()) - 1  # "recorder audit verify": after two words
    try:
        again = command.parse_intermixed_args(words[depth:])
    except TypeError:  # a parser intermixed parsing cannot take
        _, extra = command.parse_known_args(words[depth:])
        command.error(f"unrecognized arguments: {' '.join(extra)}")
    return argparse.Namespace(**{**vars(args), **vars(again)})


def _silence_stdout() -> None:
    """The reader left (``| head``): what is still buffered for it goes nowhere, quietly,
    instead of failing again when Python flushes stdout on the way out."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _runner() -> asyncio.Runner:
    """uvloop's event loop when installed (it comes with uvicorn[standard]): the proxy's
    per-request and per-chunk costs are mostly the loop's. asyncio's otherwise."""
    try:
        import uvloop
    except ImportError:
        return asyncio.Runner()
    return asyncio.Runner(loop_factory=uvloop.new_event_loop)


if __name__ == "__main__":
    raise SystemExit(main())
