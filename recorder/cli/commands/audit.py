"""Governance: ``audit verify``, ``audit receipt``, ``audit log`` and ``purge``.

Like every data command they ask the database (``--db``) or a running recorder (``--url``)
and get the same answers. An auditor who doubts the server verifies the database itself:
through ``--url`` the server recomputes its own chains (and signs with its own key).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recorder.cli.backend import Backend
from recorder.cli.context import Context
from recorder.cli.output import json_text
from recorder.cli.parser import Commands
from recorder.errors import InputError, NotFound
from recorder.models import AuditAction, PurgeBody


def register(commands: Commands) -> None:
    group = commands.group("audit", "tamper evidence and the audit log")
    p = group.add(
        "verify", verify, "recompute the hash chains; exit 1 on a mismatch", data=True, json=True
    )
    p.add_argument("ids", nargs="*", help="threads or runs (default: every thread)")
    p.add_argument("--receipt", metavar="FILE", help="prove the log unchanged up to this receipt")
    p = group.add("receipt", receipt, "the log's heads now, signed with audit_key", data=True)
    p.add_argument("--out", metavar="FILE", help="write it there (default: stdout)")
    p = group.add("log", log, "every write and admin action, newest first", data=True, json=True)
    p.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    p.add_argument("--before", type=int, help="actions with an id below this one")
    p.add_argument("--action", help="only this kind: fork, import, purge, rewrite, ...")

    p = commands.add(
        "purge",
        purge,
        "delete threads with everything derived from them, leaving a tombstone",
        data=True,
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


async def verify(context: Context) -> int:
    args = context.args
    if args.receipt and args.ids:
        raise InputError("--receipt checks every thread the receipt names: give no ids with it")
    async with context.backend() as backend:
        if args.receipt:
            result = await backend.check_receipt(_read(args.receipt))
        else:
            threads, runs = await _threads_and_runs(backend, args.ids)
            result = await backend.verify_chains(threads, runs)
    answer = result.to_json()
    context.out.data(result, lambda: _verification_text(answer))
    return 0 if result.ok else 1


async def _threads_and_runs(backend: Backend, ids: list[str]) -> tuple[list[str], list[str]]:
    """Each id as a thread, or failing that as a run (an id that is neither: not found)."""
    threads: list[str] = []
    runs: list[str] = []
    for name in ids:
        try:
            await backend.thread(name)
        except NotFound:
            try:
                await backend.run(name)
            except NotFound:
                raise NotFound(f"no thread or run {name!r}") from None
            runs.append(name)
        else:
            threads.append(name)
    return threads, runs


def _verification_text(result: dict[str, Any]) -> str:
    checked = f"{result['threads']} threads, {result['runs']} runs, {result['events']} events"
    against = f" against the receipt of {result['receiptAt']}" if result["receiptAt"] else ""
    if result["ok"]:
        lines = [f"ok: {checked} verified{against}"]
    else:
        lines = [f"MISMATCH{against} ({checked} checked):"]
        lines += [f"  {_where(p)}{p['what']}" for p in result["problems"]]
    sanctioned = result.get("sanctioned") or []
    if sanctioned:
        lines.append("changed since the receipt by sanctioned actions:")
        lines += [f"  {_where(p)}{p['what']}" for p in sanctioned]
    return "\n".join(lines)


def _where(p: dict[str, Any]) -> str:
    if not p["threadId"]:  # the receipt's own, or the database's
        return ""
    where = f"thread {p['threadId']}"
    if p["runId"]:
        where += f" run {p['runId']}"
    if p["seq"] is not None:
        where += f" seq {p['seq']}"
    return where + ": "


async def receipt(context: Context) -> int:
    async with context.backend() as backend:
        body = await backend.receipt()
    text = json_text(body)
    if body.signature is None:
        context.out.note("the receipt is unsigned: no audit_key is set where it was made")
    if context.args.out:
        Path(context.args.out).write_text(text + "\n")
        context.out.note(f"receipt of {body.at} written to {context.args.out}")
    else:
        context.out.line(text)
    return 0


async def log(context: Context) -> int:
    args = context.args
    async with context.backend() as backend:
        page = await backend.audit_log(limit=args.limit, before=args.before, action=args.action)

    def text() -> str:
        rows = [
            f"{a.id:>6}  {a.at}  {a.actor:<10} {_action(a):<13} {a.outcome:<6} {a.target or '-'}"
            for a in page.actions
        ]
        if rows:
            return "\n".join(rows)
        return "no actions match" if args.action or args.before else "no actions recorded"

    context.out.data(page, text)
    return 0


def _action(action: AuditAction) -> str:
    """The action's name; a dry run says so (it changed nothing)."""
    dry = isinstance(action.detail, dict) and action.detail.get("dryRun") is True
    return f"{action.action} (dry)" if dry else action.action


async def purge(context: Context) -> int:
    args = context.args
    if args.retention and (args.thread or args.older_than or args.agent or args.reason):
        raise InputError(
            "--retention applies the retention settings: it takes no --thread, "
            "--older-than, --agent or --reason"
        )
    async with context.backend() as backend:
        if args.retention:
            results = await backend.retention(dry_run=args.dry_run)
        else:
            body = PurgeBody(
                thread_ids=args.thread,
                older_than=args.older_than,
                agent=args.agent,
                reason=args.reason,
                dry_run=args.dry_run,
            )
            if not (body.thread_ids or body.older_than or body.agent):
                raise InputError(
                    "name threads (--thread), an age (--older-than) or an agent (--agent)"
                )
            results = [await backend.purge(body)]
    answers = [result.to_json() for result in results]
    context.out.data(answers if args.retention else answers[0], lambda: _purge_text(answers))
    left = [t for answer in answers for t in (*answer["skipped"], *answer["missing"])]
    if left:
        # An erasure that did not erase a thread it named did not do its job.
        context.out.note(f"not purged: {', '.join(left)}")
        return 2
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
        forks = result.get("forks") or []
        if forks:
            lines.append(
                f"  {len(forks)} threads forked from these hold copies of what they said "
                f"(a fork carries its history): {', '.join(forks)}"
            )
    return "\n".join(lines)


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from exc
