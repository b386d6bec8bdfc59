"""Receipts: the log's heads at one moment, signed with ``audit_key`` (HMAC-SHA256 over
the receipt without its signature, as canonical JSON). Kept elsewhere, a receipt proves
later that the log up to it is unchanged: every thread it names still has the same chain
over the runs it covered, and every run that was recording then still hashes to the same
value at the same seq. A change that a purge or a sanctioned rewrite since accounts for
(their records giving back the receipt's chain) is listed apart, not as a problem.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime
from typing import Any

import orjson

from recorder.errors import InputError
from recorder.store import ChainReport, EventStore, Rewrite, Tombstone
from recorder.store import chain as chains
from recorder.timetravel.audit import iso, thread_exists, verification_view


async def receipt(store: EventStore, key: str | None) -> dict[str, Any]:
    heads = await store.heads()
    body: dict[str, Any] = {
        "version": 1,
        "algorithm": "sha256",
        "at": iso(heads.at),
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
    present = [t for t in sorted(wanted) if await thread_exists(store, t)]
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

    def note(
        self, thread_id: str, run_id: str | None, what: str, record: Tombstone | None = None
    ) -> None:
        records: list[Tombstone] | list[Rewrite] = (
            [record] if record is not None else self.rewritten(run_id or "")
        )
        for r in records:
            kind = "purged" if isinstance(r, Tombstone) else "rewritten"
            why = f" ({r.reason})" if r.reason else ""
            self.notes.append(
                {
                    "threadId": thread_id,
                    "runId": run_id,
                    "seq": None,
                    "what": f"{what}: {kind} by {r.actor} at {iso(r.at)}{why}, record {r.id}",
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
