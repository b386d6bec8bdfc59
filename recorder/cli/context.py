"""What a handler gets: its arguments, its output, its settings and its backend."""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from recorder.cli.backend import Backend, open_backend
from recorder.cli.output import Output
from recorder.config import Settings, load_settings


class Context:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.out = Output(
            json=getattr(args, "json", False), verbose=getattr(args, "verbose", False)
        )

    def settings(self, **flags: Any) -> Settings:
        """Settings from the command's flags (those it has), the environment and ``--config``."""
        args = self.args
        agents = getattr(args, "agent", None)
        given = {
            "db": getattr(args, "db", None),
            "url": getattr(args, "url", None),
            "api_token": getattr(args, "token", None),
            "agents": agents if isinstance(agents, list) and agents else None,
        }
        return load_settings(getattr(args, "config", None), **{**given, **flags})

    @asynccontextmanager
    async def backend(self, *, create: bool = False) -> AsyncIterator[Backend]:
        """The server or the database this command asks; ``-v`` says which."""
        settings = self.settings()
        db_given = getattr(self.args, "db", None) is not None
        url_given = getattr(self.args, "url", None) is not None
        async with open_backend(
            settings, db_given=db_given, url_given=url_given, create=create
        ) as (backend, where):
            self.out.detail(f"recorder: {where}")
            yield backend
