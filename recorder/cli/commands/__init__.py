"""The command groups, in the order ``recorder --help`` lists them."""

from __future__ import annotations

from recorder.cli.commands import (
    annotate,
    audit,
    browse,
    check,
    diff,
    fork,
    redact,
    replay,
    search,
    server,
    state,
    token,
    transfer,
)
from recorder.cli.parser import Group

GROUPS: tuple[Group, ...] = (
    server,
    browse,
    search,
    annotate,
    state,
    diff,
    replay,
    fork,
    transfer,
    check,
    audit,
    redact,
    token,
)
