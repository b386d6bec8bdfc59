"""Governance services the API and the CLI share: chain verification, receipts, purges,
retention and the audit log of write and admin actions.

Each answer is a plain dict in the shape of its model in ``recorder.models.audit``, as in
``recorder.timetravel.views``.

Receipts are ``recorder.timetravel.receipts``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from recorder.config import Settings, parse_age
from recorder.errors import ConfigError, InputError, ThreadNotFound
from recorder.store import (
    ChainReport,
    EventStore,
    PurgeReport,
    PurgeSelection,
)
from recorder.store.model import Action, PurgedThread, Redacted
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
        if await thread_exists(store, name):
            threads.append(name)
        else:
            runs.append(name)  # an id that names neither: RunNotFound from the check
    return await verify(store, threads, runs)


async def thread_exists(store: EventStore, thread_id: str) -> bool:
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
        detail["updatedBefore"] = iso(chosen.updated_before)
    if chosen.agent is not None:
        detail["agent"] = chosen.agent
    # The threads forked from those purged, read before the purge clears their links.
    listed = await store.purge(chosen, actor=actor, reason=reason, dry_run=True)
    forks = await _forks_left(store, [t.thread_id for t in listed.threads])
    if actor == RETENTION and not dry_run and not listed.threads:
        # A pass with nothing to purge (most of them): no entry in the audit log, and no
        # purge (one now could take a thread that became old since, unrecorded).
        report = dataclasses.replace(listed, dry_run=False)
    else:
        async with audited(store, actor, "purge", target, detail) as noted:
            report = await store.purge(chosen, actor=actor, reason=reason, dry_run=dry_run)
            noted.update(
                {
                    "tombstone": report.tombstone,
                    "threads": len(report.threads),
                    "events": report.events,
                }
            )
    purged = {t.thread_id for t in report.threads}
    return {**purge_view(report), "forks": [f for f in forks if f not in purged]}


async def _forks_left(store: EventStore, thread_ids: list[str]) -> list[str]:
    """The threads forked from these, at any depth, not among them: the posted inputs of
    their first runs hold what these said (a fork carries its history), so a purge of
    these alone does not erase it from the log."""
    chosen = set(thread_ids)
    found: list[str] = []
    queue = list(thread_ids)
    while queue:
        for fork in await store.list_forks(queue.pop()):
            if fork.thread_id not in chosen and fork.thread_id not in found:
                found.append(fork.thread_id)
                queue.append(fork.thread_id)
    return found


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
        reason = f"retention: not updated since {iso(chosen.updated_before or now)}"
        if chosen.agent is not None:
            reason += f" (agent {chosen.agent})"
        results.append(await purge(store, chosen, actor=RETENTION, reason=reason, dry_run=dry_run))
    return results


def purge_view(report: PurgeReport) -> dict[str, Any]:
    return {
        "dryRun": report.dry_run,
        "tombstone": report.tombstone,
        "at": iso(report.at),
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
        "at": iso(action.at),
        "actor": action.actor,
        "action": action.action,
        "target": action.target,
        "outcome": action.outcome,
        "detail": action.detail,
    }


def iso(ts: float) -> str:
    """UTC, written as every other answer writes it (``...Z``)."""
    when: datetime | None = moment(ts)
    assert when is not None
    return when.isoformat().replace("+00:00", "Z")


def _hex(value: bytes | None) -> str | None:
    return None if value is None else value.hex()


async def rewrite(
    store: EventStore,
    run_id: str,
    payloads: dict[int, bytes],
    *,
    actor: str,
    reason: str | None,
    redacted: Mapping[int, Redacted] | None = None,
    if_head: bytes | None = None,
) -> dict[str, Any]:
    """The sanctioned rewrite of stored payloads (``EventStore.rewrite``), in the audit log."""
    async with audited(store, actor, "rewrite", run_id, {"seqs": sorted(payloads)}) as noted:
        report = await store.rewrite(
            run_id, payloads, actor=actor, reason=reason, redacted=redacted, if_head=if_head
        )
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
