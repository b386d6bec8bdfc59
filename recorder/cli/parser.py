"""The command line: the top-level parser and the options commands share."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from recorder import __version__
from recorder.config import DEFAULT_DB

if TYPE_CHECKING:
    from recorder.cli.context import Context

Handler = Callable[["Context"], Awaitable[int]]


class Commands:
    """Where command groups declare their commands."""

    def __init__(self, sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        self._sub = sub

    def add(
        self,
        name: str,
        handler: Handler,
        help_text: str,
        *,
        data: bool = False,
        db: bool = False,
        json: bool = False,
    ) -> argparse.ArgumentParser:
        """A command. ``data``: it reads or writes recorded data, from the database or a
        server. ``db``: it works on the database only. ``json``: it prints data (``--json``)."""
        p = self._sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--config", metavar="FILE", help="a TOML settings file")
        if data or db:
            p.add_argument(
                "--db", metavar="URL", help=f"database URL (env RECORDER_DB; default {DEFAULT_DB})"
            )
        if data:
            p.add_argument(
                "--url",
                metavar="URL",
                help="ask a running recorder instead (env RECORDER_URL), e.g. http://127.0.0.1:8000",
            )
            p.add_argument("--token", help="the server's API token (env RECORDER_API_TOKEN)")
        if data or db:
            p.add_argument(
                "-v", "--verbose", action="store_true", help="say which database or server was used"
            )
        if json:
            p.add_argument("--json", action="store_true", help="print JSON (the API's shapes)")
        p.set_defaults(handler=handler, command_parser=p)
        return p

    def group(self, name: str, help_text: str) -> Commands:
        """A command with commands of its own (``recorder audit verify``)."""
        p = self._sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(command_parser=p)  # its own help when no command of it is given
        return Commands(p.add_subparsers(metavar="COMMAND"))


class Group(Protocol):
    """A module of commands."""

    def register(self, commands: Commands) -> None: ...


def build_parser(groups: Sequence[Group]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recorder", description="Record, inspect, replay and fork AG-UI agent runs."
    )
    parser.add_argument("--version", action="version", version=f"recorder {__version__}")
    commands = Commands(parser.add_subparsers(metavar="COMMAND"))
    for group in groups:
        group.register(commands)
    return parser
