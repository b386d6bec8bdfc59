"""The command groups, in the order ``recorder --help`` lists them."""

from __future__ import annotations

from recorder.cli.commands import (
    annotate,
    browse,
    check,
    fork,
    replay,
    search,
    server,
    state,
    transfer,
)
from recorder.cli.parser import Group

GROUPS: tuple[Group, ...] = (
    server,
    browse,
    search,
    annotate,
    state,
    replay,
    fork,
    transfer,
    check,
)
