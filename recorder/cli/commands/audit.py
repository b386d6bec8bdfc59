"""Governance on the database: ``audit verify``, ``audit receipt``, ``audit log``, ``purge``.

They work on the database (``--db``), as an operator holding it does: a verification must
not trust a server to tell the truth about its own log.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from recorder.cli.context import Context
from recorder.cli.local import open_database
from recorder.cli.output import json_text
from recorder.cli.parser import Commands
from recorder.errors import InputError
from recorder.store import EventStore
from recorder.timetravel import audit


def register(commands: Commands) -> None:
    group = commands.group("audit", "tamper evidence and the audit log")
    p = group.add(
        "verify", verify, "recompute the hash chains; exit 1 on a mismatch", db=True, json=True
    )
    p.add_argument("ids", nargs="*", help="threads or runs (default: every thread)")
    p.add_argument("--receipt", metavar="FILE", help="prove the log unchanged up to this receipt")
    p = group.add("receipt", receipt, "the log's heads now, signed with audit_key", db=True)
    p.add_argument("--out", metavar="FILE", help="write it there (default: stdout)")
    p = group.add("log", log, "every write and admin action, newest first", db=True, json=True)
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    p.add_argument("--before", type=int, help="actions with an id below this one")
    p.add_argument("--action", help="only this kind: fork, import, purge, rewrite, ...")

    p = commands.add(
        "purge",
        purge,
        "delete threads with everything derived from them, leaving a tombstone",
        db=True,
        json=True,
    )
    p.add_argument("--thread", action="append", default=[], metavar="T", help="a thread (repeat)")
    p.add_argument("--older-than", metavar="AGE", help="not updated for this long: 90d, 12h, 30m")
    p.add_argument("--agent", help="threads with a run of this agent")
    p.add_argument("--reason", help="why (kept in the tombstone)")
    p.add_argument("--dry-run", action="store_true", help="list what would go; delete nothing")
    p.add_argument(
        "--retention",
        action="store_true",
        help="apply the retention settings (retention, retention_agents) instead",
    )


@asynccontextmanager
async def _store(context: Context) -> AsyncIterator[EventStore]:
    settings = context.settings()
    store = await open_database(settings.db, create=False)
    try:
        yield store
    finally:
        await store.close()


async def verify(context: Context) -> int:
    args = context.args
    async with _store(context) as store:
        if args.receipt:
            body = audit.read_receipt(_read(args.receipt))
            result = await audit.check_receipt(store, body, context.settings().audit_key)
        else:
            result = await audit.verify_ids(store, args.ids)
    context.out.data(result, lambda: _verification_text(result))
    return 0 if result["ok"] else 1


def _verification_text(result: dict[str, Any]) -> str:
    checked = f"{result['threads']} threads, {result['runs']} runs, {result['events']} events"
    against = f" against the receipt of {result['receiptAt']}" if result["receiptAt"] else ""
    if result["ok"]:
        return f"ok: {checked} verified{against}"
    lines = [f"MISMATCH{against} ({checked} checked):"]
    for p in result["problems"]:
        if not p["threadId"]:  # the receipt's own, or the database's
            lines.append(f"  {p['what']}")
            continue
        where = f"thread {p['threadId']}"
        if p["runId"]:
            where += f" run {p['runId']}"
        if p["seq"] is not None:
            where += f" seq {p['seq']}"
        lines.append(f"  {where}: {p['what']}")
    return "\n".join(lines)


async def receipt(context: Context) -> int:
    async with _store(context) as store:
        body = await audit.receipt(store, context.settings().audit_key)
    text = json_text(body)
    if context.args.out:
        Path(context.args.out).write_text(text + "\n")
        context.out.note(f"receipt of {body['at']} written to {context.args.out}")
    else:
        context.out.line(text)
    return 0


async def log(context: Context) -> int:
    args = context.args
    async with _store(context) as store:
        page = await audit.audit_log(
            store, limit=args.limit, before=args.before, action=args.action
        )

    def text() -> str:
        rows = [
            f"{a['id']:>6}  {a['at']}  {a['actor']:<10} {a['action']:<8} {a['outcome']:<6} "
            f"{a['target'] or '-'}"
            for a in page["actions"]
        ]
        return "\n".join(rows) if rows else "no actions recorded"

    context.out.data(page, text)
    return 0


async def purge(context: Context) -> int:
    args = context.args
    settings = context.settings()
    async with _store(context) as store:
        if args.retention:
            if settings.retention is None and not settings.retention_agents:
                raise InputError("no retention is set (retention, retention_agents)")
            results = await audit.apply_retention(store, settings, dry_run=args.dry_run)
        else:
            chosen = audit.selection(args.thread, args.older_than, args.agent, now=time.time())
            results = [
                await audit.purge(
                    store, chosen, actor=audit.CLI, reason=args.reason, dry_run=args.dry_run
                )
            ]
    context.out.data(results if args.retention else results[0], lambda: _purge_text(results))
    return 0


def _purge_text(results: list[dict[str, Any]]) -> str:
    lines = []
    for result in results:
        verb = "would delete" if result["dryRun"] else "deleted"
        lines.append(
            f"{verb} {len(result['threads'])} threads, {result['runs']} runs, "
            f"{result['events']} events"
            + (f" (tombstone {result['tombstone']})" if result["tombstone"] else "")
        )
        lines += [
            f"  {t['threadId']}: {len(t['runs'])} runs, {t['events']} events"
            for t in result["threads"]
        ]
        lines += [f"  {t}: skipped, a run is still recording" for t in result["skipped"]]
        lines += [f"  {t}: no such thread" for t in result["missing"]]
    return "\n".join(lines)


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc
