"""The command groups, in the order ``recorder --help`` lists them."""

from __future__ import annotations

from recorder.cli.commands import browse, check, fork, replay, server, state, token, transfer
from recorder.cli.parser import Group

GROUPS: tuple[Group, ...] = (server, browse, state, replay, fork, transfer, check, token)
