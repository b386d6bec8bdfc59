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
import dataclasses
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
    Rewrite,
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
    """Whether the log up to the receipt is unchanged (see the module's docstring).

    A difference that a sanctioned action since the receipt accounts for is no problem,
    and is listed (``sanctioned``): a thread gone with a purge whose tombstone holds the
    chain the receipt holds, or a thread whose runs were rewritten (redaction) by records
    whose old heads give back the receipt's chain."""
    problems: list[dict[str, Any]] = []
    signature = body.get("signature")
    if signature is not None and not key:
        raise InputError("the receipt is signed: set audit_key to check it")
    if key and (signature is None or not hmac.compare_digest(str(signature), sign(body, key))):
        what = "the receipt is not signed" if signature is None else "its signature does not match"
        problems.append({"threadId": "", "runId": None, "seq": None, "what": what})
    at, threads, running = _receipt_parts(body)
    marks = {run: point["seq"] for run, point in running.items()}
    wanted = {point["threadId"] for point in running.values()} | set(threads)
    since = _Since(at, await store.tombstones(), await store.rewrites())
    present = [t for t in sorted(wanted) if await _exists(store, t)]
    report = await store.verify_chains(present, marks=marks) if present else ChainReport()
    problems += verification_view(report)["problems"]
    for thread_id, head in threads.items():
        problems += since.thread_against(thread_id, head, report, thread_id in present)
    for run_id, point in running.items():
        if point["threadId"] not in present:
            continue  # its thread was checked above (purged or missing)
        if point["seq"] < 0:
            continue
        recomputed = report.marked.get(run_id)
        if recomputed is None or recomputed.hex() != point["hash"]:
            now = None if recomputed is None else recomputed.hex()
            if since.explains(run_id, point["seq"], point["hash"], now):
                since.note(point["threadId"], run_id, "its events up to the receipt")
                continue
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
        "sanctioned": since.notes,
    }


def _receipt_parts(
    body: dict[str, Any],
) -> tuple[float, dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The receipt's time, threads and running runs, each checked for its shape."""

    def bad(what: str) -> InputError:
        return InputError(f"not a receipt: {what}")

    try:
        at = datetime.fromisoformat(str(body.get("at"))).timestamp()
    except ValueError as exc:
        raise bad("'at' is not an ISO 8601 time") from exc
    threads: dict[str, dict[str, Any]] = {}
    for thread_id, head in body["threads"].items():
        if not (
            isinstance(head, dict)
            and isinstance(head.get("head"), str)
            and type(head.get("sealed")) is int
            and head["sealed"] >= 0
        ):
            raise bad(f"thread {thread_id[:80]!r} needs a head (hex) and sealed (a count)")
        threads[thread_id] = head
    running = body.get("running")
    running = {} if running is None else running
    if not isinstance(running, dict):
        raise bad("'running' is not an object")
    for run_id, point in running.items():
        if not (
            isinstance(point, dict)
            and isinstance(point.get("threadId"), str)
            and type(point.get("seq")) is int
            and isinstance(point.get("hash"), str)
        ):
            raise bad(f"running run {run_id[:80]!r} needs a threadId, a seq and a hash")
    return at, threads, running


class _Since:
    """The purges and sanctioned rewrites made since a receipt, and what they account for."""

    _SLACK = 0.001  # the receipt's time is written to the microsecond

    def __init__(self, at: float, tombstones: list[Tombstone], rewrites: list[Rewrite]) -> None:
        self.stones = [t for t in tombstones if t.at >= at - self._SLACK]
        self.named = {t["threadId"] for stone in tombstones for t in stone.detail}
        self.rewrites = [r for r in rewrites if r.at >= at - self._SLACK]
        self.notes: list[dict[str, Any]] = []

    def rewritten(self, run_id: str) -> list[Rewrite]:
        return [r for r in self.rewrites if r.run_id == run_id]

    def explains(self, run_id: str, seq: int, then: str, now: str | None) -> bool:
        """Whether the rewrites since the receipt take event ``seq``'s hash from ``then``
        (the receipt's) to ``now`` (the log's): each that changed it rewrote that event
        itself, from the hash the one before left to the next. A rewrite of an earlier
        event only (which keeps no record of this one's hashes) explains nothing."""
        expected = then
        affecting = [r for r in self.rewritten(run_id) if r.events and min(r.events) <= seq]
        for rewrite in affecting:
            if seq not in rewrite.events or rewrite.events[seq][0] != expected:
                return False
            expected = rewrite.events[seq][1]
        return bool(affecting) and expected == now

    def note(self, thread_id: str, run_id: str | None, what: str, record: Any = None) -> None:
        records = [record] if record is not None else self.rewritten(run_id or "")
        for r in records:
            kind = "purged" if isinstance(r, Tombstone) else "rewritten"
            why = f" ({r.reason})" if r.reason else ""
            self.notes.append(
                {
                    "threadId": thread_id,
                    "runId": run_id,
                    "seq": None,
                    "what": f"{what}: {kind} by {r.actor} at {_iso(r.at)}{why}, record {r.id}",
                }
            )

    def thread_against(
        self, thread_id: str, head: dict[str, Any], report: ChainReport, present: bool
    ) -> list[dict[str, Any]]:
        sealed = int(head["sealed"])
        if not present:
            for stone in self.stones:
                for purged in stone.detail:
                    if purged["threadId"] == thread_id and _holds(thread_id, purged, head):
                        self.note(thread_id, None, "the thread", stone)
                        return []
            what = (
                "the thread is gone, and no purge since the receipt holds its chain"
                if thread_id in self.named
                else "the thread is gone and no purge's tombstone names it"
            )
            return [{"threadId": thread_id, "runId": None, "seq": None, "what": what}]
        runs = report.sealed.get(thread_id, [])
        if len(runs) >= sealed:
            if chains.thread_head(thread_id, runs[:sealed]).hex() == head["head"]:
                return []
            # Each rewritten run as it was before its first rewrite since the receipt.
            before = dict(runs[:sealed])
            changed = []
            for rewrite in reversed(self.rewrites):
                if rewrite.run_id in before and rewrite.old_head is not None:
                    before[rewrite.run_id] = rewrite.old_head
                    changed.append(rewrite.run_id)
            heads = [(run_id, before[run_id]) for run_id, _ in runs[:sealed]]
            if changed and chains.thread_head(thread_id, heads).hex() == head["head"]:
                for run_id in dict.fromkeys(reversed(changed)):
                    self.note(thread_id, run_id, "the run's events")
                return []
        return [
            {
                "threadId": thread_id,
                "runId": None,
                "seq": None,
                "what": f"the thread's chain over its first {sealed} closed runs differs "
                "from the receipt's",
            }
        ]


def _holds(thread_id: str, purged: dict[str, Any], head: dict[str, Any]) -> bool:
    """Whether a tombstone's thread holds the receipt's chain: over the same closed runs,
    the same head; over more, its runs' heads give back the receipt's head."""
    sealed = int(head["sealed"])
    if purged.get("sealed") == sealed:
        return bool(purged.get("head") == head["head"])
    runs = purged.get("runs") or []
    if not isinstance(purged.get("sealed"), int) or purged["sealed"] < sealed:
        return False
    try:
        heads = [(str(r["runId"]), bytes.fromhex(r["head"])) for r in runs[:sealed]]
    except (KeyError, TypeError, ValueError):
        return False
    return len(heads) == sealed and chains.thread_head(thread_id, heads).hex() == head["head"]


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
