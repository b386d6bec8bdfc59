"""API tokens: ``token new`` makes one, ``token hash`` gives the form the settings keep."""

from __future__ import annotations

import json
import re
import secrets
import sys

from recorder.cli.context import Context
from recorder.cli.parser import Commands
from recorder.config import NOT_A_TOKEN, SCOPES, hash_token, is_token
from recorder.errors import InputError


def register(commands: Commands) -> None:
    p = commands.add(
        "token",
        token,
        "make an API token (new) or hash one (hash) for the settings' [tokens] table",
        json=True,
    )
    p.add_argument("action", choices=["new", "hash"])
    p.add_argument("--name", default="NAME", help="the token's name in the printed table")
    p.add_argument(
        "--scope",
        action="append",
        choices=SCOPES,
        help="a scope for the printed table (repeatable; default read)",
    )
    p.add_argument("--agent", action="append", help="limit the printed table to an agent")


async def token(context: Context) -> int:
    """``new``: a random token (shown once) and its hash. ``hash``: the hash of the token read
    from stdin (not an argument: it would stay in the shell's history)."""
    args = context.args
    if not args.name:
        raise InputError("--name must not be empty")
    if args.action == "new":
        value = secrets.token_urlsafe(32)
    else:
        # At a terminal, the line typed; from a pipe or a file, all of it (one token).
        given = sys.stdin.readline() if sys.stdin.isatty() else sys.stdin.read()
        lines = [line.strip() for line in given.splitlines() if line.strip()]
        if len(lines) != 1:
            raise InputError(
                "token hash reads one token from stdin; "
                + ("none was given" if not lines else f"{len(lines)} lines were given")
            )
        value = lines[0]
        if not is_token(value):
            raise InputError(f"token hash: {NOT_A_TOKEN}")
    digest = hash_token(value)
    scopes = args.scope or ["read"]
    table = {"hash": digest, "scopes": scopes, **({"agents": args.agent} if args.agent else {})}
    shown = {"name": args.name, **table, **({"token": value} if args.action == "new" else {})}
    context.out.data(
        shown, lambda: _text(args.name, value if args.action == "new" else None, table)
    )
    return 0


def _text(name: str, value: str | None, table: dict[str, object]) -> str:
    lines = [f"token: {value}  (shown once; the recorder keeps only its hash)"] if value else []
    lines.append(f"[tokens.{_key(name)}]")
    lines += [f"{key} = {_toml(item)}" for key, item in table.items()]
    return "\n".join(lines)


def _key(name: str) -> str:
    """A TOML key: bare when it may be, else quoted (a dot or a space would make another)."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _toml(name)


def _toml(value: object) -> str:
    """A string (or a list of them) as TOML: JSON's escapes are TOML's basic string's."""
    if isinstance(value, list):
        return "[" + ", ".join(map(_toml, value)) + "]"
    return json.dumps(str(value), ensure_ascii=False)
