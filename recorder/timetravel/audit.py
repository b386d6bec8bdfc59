"""Governance services the API and the CLI share: chain verification, receipts, purges,
retention and the audit log of write and admin actions.

Each answer is a plain dict in the shape of its model in ``recorder.models.audit``, as in
``recorder.timetravel.views``.

A receipt is the log's heads at one moment, signed with ``audit_key`` (HMAC-SHA256 over
the receipt without its signature, as canonical JSON). Kept elsewhere, it proves later
that the log up to it is unchanged: every thread it names still has the same chain up to
the runs it covered (or a tombstone saying it was purged, with the same head), and every
run that was recording then still hashes to the same value at the same seq.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import orjson

from recorder.config import Settings, parse_age
from recorder.errors import ConfigError, InputError, ThreadNotFound
from recorder.store import (
    ChainReport,
    EventStore,
    PurgeReport,
    PurgeSelection,
    Tombstone,
)
from recorder.store import chain as chains
from recorder.store.model import Action, PurgedThread
from recorder.timetravel.views import moment

# Who acts when no token does: the CLI on the database, the retention pass of a server.
# Through the API the actor is the token's name (``recorder.api.access.Principal.actor``).
CLI = "cli"
RETENTION = "retention"


def verification_view(report: ChainReport, receipt_at: str | None = None) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "threads": report.threads,
        "runs": report.runs,
        "events": report.events,
        "problems": [
            {"threadId": p.thread_id, "runId": p.run_id, "seq": p.seq, "what": p.what}
            for p in report.problems
        ],
        "receiptAt": receipt_at,
    }


async def verify(
    store: EventStore, thread_ids: Sequence[str] = (), run_ids: Sequence[str] = ()
) -> dict[str, Any]:
    return verification_view(await store.verify_chains(thread_ids, run_ids))


async def verify_ids(store: EventStore, ids: Sequence[str]) -> dict[str, Any]:
    """Verify what ``ids`` name: each a thread or, failing that, a run."""
    threads: list[str] = []
    runs: list[str] = []
    for name in ids:
        if await _exists(store, name):
            threads.append(name)
        else:
            runs.append(name)  # an id that names neither: RunNotFound from the check
    return await verify(store, threads, runs)


# -- receipts -------------------------------------------------------------------------------


async def receipt(store: EventStore, key: str | None) -> dict[str, Any]:
    heads = await store.heads()
    body: dict[str, Any] = {
        "version": 1,
        "algorithm": "sha256",
        "at": _iso(heads.at),
        "threads": {t: {"head": h.hex(), "sealed": n} for t, (h, n) in heads.threads.items()},
        "running": {
            r: {"threadId": t, "seq": seq, "hash": h.hex()}
            for r, (t, seq, h) in heads.running.items()
        },
    }
    body["signature"] = sign(body, key) if key else None
    return body


def sign(body: dict[str, Any], key: str) -> str:
    unsigned = {k: v for k, v in body.items() if k != "signature"}
    canonical = orjson.dumps(unsigned, option=orjson.OPT_SORT_KEYS)
    return hmac.new(key.encode(), canonical, hashlib.sha256).hexdigest()


def read_receipt(data: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"not a receipt: {exc}") from exc
    if not isinstance(body, dict) or not isinstance(body.get("threads"), dict):
        raise InputError("not a receipt: no threads")
    return body


async def check_receipt(store: EventStore, body: dict[str, Any], key: str | None) -> dict[str, Any]:
    """Whether the log up to the receipt is unchanged (see the module's docstring)."""
    problems: list[dict[str, Any]] = []
    signature = body.get("signature")
    if signature is not None and not key:
        raise InputError("the receipt is signed: set audit_key to check it")
    if key and (signature is None or not hmac.compare_digest(str(signature), sign(body, key))):
        what = "the receipt is not signed" if signature is None else "its signature does not match"
        problems.append({"threadId": "", "runId": None, "seq": None, "what": what})
    try:
        threads: dict[str, Any] = body["threads"]
        running: dict[str, Any] = body.get("running") or {}
        marks = {run: int(v["seq"]) for run, v in running.items()}
        wanted = {str(v["threadId"]) for v in running.values()} | set(threads)
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"not a receipt: {exc!r}") from exc
    purged = _purged_heads(await store.tombstones())
    present = [t for t in sorted(wanted) if await _exists(store, t)]
    report = await store.verify_chains(present, marks=marks) if present else ChainReport()
    problems += verification_view(report)["problems"]
    for thread_id, head in threads.items():
        problems += _thread_against(thread_id, head, report, present, purged)
    for run_id, point in running.items():
        if str(point["threadId"]) not in present:
            continue  # its thread was checked above (purged or missing)
        if point["seq"] < 0:
            continue
        recomputed = report.marked.get(run_id)
        if recomputed is None or recomputed.hex() != point["hash"]:
            problems.append(
                {
                    "threadId": point["threadId"],
                    "runId": run_id,
                    "seq": point["seq"],
                    "what": "the run's events up to the receipt differ from it",
                }
            )
    return {
        **verification_view(report, str(body.get("at"))),
        "problems": problems,
        "ok": not problems,
    }


def _thread_against(
    thread_id: str,
    head: dict[str, Any],
    report: ChainReport,
    present: list[str],
    purged: dict[str, str | None],
) -> list[dict[str, Any]]:
    if thread_id not in present:
        if thread_id in purged:
            return []  # deleted by a purge, whose tombstone keeps its head
        return [
            {
                "threadId": thread_id,
                "runId": None,
                "seq": None,
                "what": "the thread is gone and no purge's tombstone names it",
            }
        ]
    sealed = int(head["sealed"])
    runs = report.sealed.get(thread_id, [])
    if len(runs) < sealed or chains.thread_head(thread_id, runs[:sealed]).hex() != head["head"]:
        return [
            {
                "threadId": thread_id,
                "runId": None,
                "seq": None,
                "what": f"the thread's chain over its first {sealed} closed runs differs "
                "from the receipt's",
            }
        ]
    return []


def _purged_heads(tombstones: list[Tombstone]) -> dict[str, str | None]:
    return {t["threadId"]: t.get("head") for stone in tombstones for t in stone.detail}


async def _exists(store: EventStore, thread_id: str) -> bool:
    try:
        await store.get_thread(thread_id)
    except ThreadNotFound:
        return False
    return True


# -- purge and retention ----------------------------------------------------------------------


def selection(
    thread_ids: Sequence[str] = (),
    older_than: str | None = None,
    agent: str | None = None,
    *,
    now: float | None = None,
) -> PurgeSelection:
    try:
        age = None if older_than is None else parse_age(older_than)
    except ConfigError as exc:
        raise InputError(str(exc)) from exc
    before = None if age is None else (now or time.time()) - age
    chosen = PurgeSelection(tuple(thread_ids), before, agent)
    if chosen.empty:
        raise InputError("name threads (--thread), an age (--older-than) or an agent (--agent)")
    return chosen


async def purge(
    store: EventStore,
    chosen: PurgeSelection,
    *,
    actor: str,
    reason: str | None,
    dry_run: bool,
) -> dict[str, Any]:
    """Purge (or list, in a dry run) and record the action in the audit log."""
    target = ",".join(chosen.thread_ids) or None
    detail: dict[str, Any] = {"dryRun": dry_run}
    if chosen.updated_before is not None:
        detail["updatedBefore"] = _iso(chosen.updated_before)
    if chosen.agent is not None:
        detail["agent"] = chosen.agent
    async with audited(store, actor, "purge", target, detail) as noted:
        report = await store.purge(chosen, actor=actor, reason=reason, dry_run=dry_run)
        noted.update(
            {"tombstone": report.tombstone, "threads": len(report.threads), "events": report.events}
        )
    return purge_view(report)


def retention_selections(settings: Settings, now: float) -> list[PurgeSelection]:
    chosen = [
        PurgeSelection(updated_before=now - parse_age(age), agent=agent)
        for agent, age in sorted(settings.retention_agents.items())
    ]
    if settings.retention is not None:
        others = tuple(sorted(settings.retention_agents))
        chosen.append(
            PurgeSelection(
                updated_before=now - parse_age(settings.retention), exclude_agents=others
            )
        )
    return chosen


async def apply_retention(
    store: EventStore, settings: Settings, *, dry_run: bool = False
) -> list[dict[str, Any]]:
    """One pass of the retention settings: a purge per age (a dry run lists what would go)."""
    now = time.time()
    results = []
    for chosen in retention_selections(settings, now):
        reason = f"retention: not updated since {_iso(chosen.updated_before or now)}"
        if chosen.agent is not None:
            reason += f" (agent {chosen.agent})"
        results.append(await purge(store, chosen, actor=RETENTION, reason=reason, dry_run=dry_run))
    return results


def purge_view(report: PurgeReport) -> dict[str, Any]:
    return {
        "dryRun": report.dry_run,
        "tombstone": report.tombstone,
        "at": _iso(report.at),
        "threads": [_purged(thread) for thread in report.threads],
        "runs": report.runs,
        "events": report.events,
        "skipped": list(report.skipped),
        "missing": list(report.missing),
    }


def _purged(thread: PurgedThread) -> dict[str, Any]:
    return {
        "threadId": thread.thread_id,
        "head": _hex(thread.head),
        "sealed": thread.sealed,
        "events": thread.events,
        "runs": [
            {"runId": r.run_id, "events": r.events, "head": _hex(r.head)} for r in thread.runs
        ],
    }


# -- the audit log --------------------------------------------------------------------------


@asynccontextmanager
async def audited(
    store: EventStore,
    actor: str,
    action: str,
    target: str | None,
    detail: dict[str, Any] | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """Record ``action`` in the audit log once the block ends: ``ok``, or ``error`` with
    the error's message (then the error goes on). The block may add to the detail."""
    noted: dict[str, Any] = dict(detail or {})
    try:
        yield noted
    except BaseException as exc:
        with contextlib.suppress(Exception):  # the action's own error is the one to raise
            await store.record_action(
                actor, action, target, "error", {**noted, "error": str(exc) or type(exc).__name__}
            )
        raise
    await store.record_action(actor, action, target, "ok", noted or None)


async def audit_log(
    store: EventStore, *, limit: int = 100, before: int | None = None, action: str | None = None
) -> dict[str, Any]:
    if not 1 <= limit <= 1000:
        raise InputError(f"limit must be between 1 and 1000, got {limit}")
    actions = await store.list_actions(limit=limit, before=before, action=action)
    more = len(actions) == limit and actions[-1].id > 1
    return {
        "actions": [action_view(a) for a in actions],
        "nextBefore": actions[-1].id if more else None,
    }


def action_view(action: Action) -> dict[str, Any]:
    return {
        "id": action.id,
        "at": _iso(action.at),
        "actor": action.actor,
        "action": action.action,
        "target": action.target,
        "outcome": action.outcome,
        "detail": action.detail,
    }


def _iso(ts: float) -> str:
    when: datetime | None = moment(ts)
    assert when is not None
    return when.isoformat()


def _hex(value: bytes | None) -> str | None:
    return None if value is None else value.hex()


async def rewrite(
    store: EventStore,
    run_id: str,
    payloads: dict[int, bytes],
    *,
    actor: str,
    reason: str | None,
) -> dict[str, Any]:
    """The sanctioned rewrite of stored payloads (``EventStore.rewrite``), in the audit log."""
    async with audited(store, actor, "rewrite", run_id, {"seqs": sorted(payloads)}) as noted:
        report = await store.rewrite(run_id, payloads, actor=actor, reason=reason)
        noted["record"] = report.id
    return {
        "record": report.id,
        "runId": report.run_id,
        "threadId": report.thread_id,
        "rewritten": list(report.rewritten),
        "rehashed": report.rehashed,
        "oldHead": _hex(report.old_head),
        "newHead": _hex(report.new_head),
        "oldThreadHead": _hex(report.old_thread_head),
        "newThreadHead": _hex(report.new_thread_head),
    }
