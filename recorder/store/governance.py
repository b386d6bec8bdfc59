"""Bodies of the sanctioned changes (purge, rewrite) and of the audit log.

Both sanctioned changes run in one transaction that the database itself lets past the
append-only triggers (``Sanction``), and leave their record in the same transaction: a
purge its tombstone, a rewrite the link from the old chain heads to the new. A DELETE or
UPDATE of events anywhere else is still refused.

``THREAD_TABLES`` is the one list of what a thread's purge deletes, in order: every table
keyed by thread (or by a thread's runs) belongs in it, so that a purge leaves nothing of
the thread behind. ``DETACH`` lists references other threads hold to a purged thread's
runs, cleared first.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import orjson

from recorder.errors import Conflict, InputError, RunNotFound, ThreadNotFound
from recorder.store import chain, reads, search
from recorder.store.closing import LOCK_THREAD_OF_RUN
from recorder.store.inputs import HASH_BYTES, ChunkCache, InputTree, batches
from recorder.store.model import (
    RUNNING,
    Action,
    PurgedRun,
    PurgedThread,
    PurgeReport,
    PurgeSelection,
    Redacted,
    Rewrite,
    RewriteReport,
    Tombstone,
)
from recorder.store.search import SQLITE
from recorder.store.statements import Body, Execute, Fetch, Sanction
from recorder.store.writes import INSERT_REDACTION, insert_chunks, redaction_row, whole_or_tree

_RUNS_OF = "SELECT run_id FROM runs WHERE thread_id = ?"

# (table, condition on one thread id): deleted in this order (children before parents).
THREAD_TABLES: list[tuple[str, str]] = [
    ("redactions", f"run_id IN ({_RUNS_OF})"),
    ("tags", "thread_id = ?"),
    ("notes", "thread_id = ?"),
    ("scores", "thread_id = ?"),
    ("checkpoints", f"run_id IN ({_RUNS_OF})"),
    ("run_inputs", f"run_id IN ({_RUNS_OF})"),
    ("events", "thread_id = ?"),
    ("runs", "thread_id = ?"),
    ("threads", "thread_id = ?"),
]
# (table, assignments, condition on one thread id): other rows' references to the thread.
DETACH: list[tuple[str, str, str]] = [
    ("threads", "source_run_id = NULL, source_seq = NULL", f"source_run_id IN ({_RUNS_OF})"),
    ("runs", "parent_run_id = NULL", f"parent_run_id IN ({_RUNS_OF})"),
]

OPTIMIZE_FTS = Execute("INSERT INTO search_fts (search_fts) VALUES ('optimize')")
SELECT_THREADS = "SELECT thread_id FROM threads"
THREAD_CHAIN = Fetch("SELECT head, sealed FROM threads WHERE thread_id = ?", lock=True)
# The purged and the rewritten runs are locked before any of their checkpoints is
# deleted: a checkpoint's write holding one (``writes.save_checkpoint``) is waited for,
# its checkpoint then deleted with the others, instead of committed under the purge's
# DELETE of checkpoints and failing its DELETE of runs, or kept past the rewrite.
PURGED_RUNS = Fetch(
    "SELECT run_id, status, event_count, head, seal FROM runs WHERE thread_id = ? "
    "ORDER BY created_at, run_id",
    lock=True,
)
INSERT_TOMBSTONE = Fetch(
    "INSERT INTO purges (at, actor, reason, threads, runs, events, detail) "
    "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id"
)
TOMBSTONES = Fetch(
    "SELECT id, at, actor, reason, threads, runs, events, detail FROM purges ORDER BY id"
)
REWRITES = Fetch(
    "SELECT id, at, actor, reason, run_id, thread_id, old_head, new_head, detail "
    "FROM rewrites ORDER BY id"
)
INSERT_ACTION = Fetch(
    "INSERT INTO audit_log (at, actor, action, target, outcome, detail) "
    "VALUES (?, ?, ?, ?, ?, ?) RETURNING id"
)
REWRITTEN_RUN = Fetch("SELECT status, head, seal FROM runs WHERE run_id = ?", lock=True)
EVENT_HASH = Fetch("SELECT hash FROM events WHERE run_id = ? AND seq = ?")
EVENTS_FROM = Fetch(
    "SELECT seq, type, payload, hash FROM events WHERE run_id = ? AND seq >= ? ORDER BY seq"
)
REWRITE_EVENT = Execute("UPDATE events SET payload = ?, hash = ? WHERE run_id = ? AND seq = ?")
REHASH_EVENT = Execute("UPDATE events SET hash = ? WHERE run_id = ? AND seq = ?")
# Checkpoints folded over a rewritten event hold what it said before: they go with it.
DROP_CHECKPOINTS_FROM = Execute("DELETE FROM checkpoints WHERE run_id = ? AND seq >= ?")
SET_RUN_HEAD = Execute("UPDATE runs SET head = ? WHERE run_id = ?")
SEALED_RUNS = Fetch(
    "SELECT run_id, head FROM runs WHERE thread_id = ? AND seal IS NOT NULL ORDER BY seal"
)
SET_THREAD_HEAD = Execute("UPDATE threads SET head = ? WHERE thread_id = ?")
# What a redaction's rewrite did, beside what redaction did at record time: a seq already
# there keeps its original's keyed hash (the bytes as received) and gains the rules.
REDACTION_RULES = Fetch("SELECT seq, rules FROM redactions WHERE run_id = ?")
SET_REDACTION_RULES = Execute("UPDATE redactions SET rules = ? WHERE run_id = ? AND seq = ?")
INSERT_REWRITE = Fetch(
    "INSERT INTO rewrites (at, actor, reason, run_id, thread_id, old_head, new_head, "
    "old_thread_head, new_thread_head, detail) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "RETURNING id"
)


def purge(
    selection: PurgeSelection, actor: str, reason: str | None, dry_run: bool, dialect: str
) -> Body[PurgeReport]:
    now = time.time()
    if selection.empty:
        raise InputError("a purge names threads, an age or an agent; it names nothing")
    ids, missing = yield from _selected(selection)
    threads: list[PurgedThread] = []
    skipped: list[str] = []
    for thread_id in ids:
        found = yield THREAD_CHAIN, (thread_id,)
        runs = yield PURGED_RUNS, (thread_id,)
        if any(status == RUNNING for _, status, _, _, _ in runs):
            skipped.append(thread_id)
            continue
        head, sealed = found[0]
        # In the order the thread's chain took them (sealed runs by seal, then the rest):
        # the tombstone's heads then recompute the chain over any first runs of it.
        runs = sorted(runs, key=lambda row: (row[4] is None, row[4] or 0))
        threads.append(
            PurgedThread(
                thread_id,
                None if head is None else bytes(head),
                int(sealed),
                tuple(
                    PurgedRun(str(r), int(n), None if h is None else bytes(h))
                    for r, _, n, h, _ in runs
                ),
            )
        )
    report = PurgeReport(tuple(threads), tuple(skipped), tuple(missing), dry_run, None, now)
    if dry_run or not threads:
        return report
    yield Sanction("purge"), ()
    purged_roots = yield from _roots([thread.thread_id for thread in threads])
    for thread in threads:
        for table, assignments, condition in DETACH:
            yield (
                Execute(f"UPDATE {table} SET {assignments} WHERE {condition}"),
                (thread.thread_id,),
            )
        yield from search.clear_index(dialect, thread.thread_id)
        for table, condition in THREAD_TABLES:
            yield Execute(f"DELETE FROM {table} WHERE {condition}"), (thread.thread_id,)
    yield from _collect_chunks(purged_roots, dialect)
    if dialect == SQLITE:  # the text index's segments keep deleted terms until merged
        yield OPTIMIZE_FTS, ()
    yield Sanction("purge", on=False), ()
    detail = orjson.dumps([purged_view(thread) for thread in threads]).decode()
    counts = (len(threads), report.runs, report.events)
    ((tombstone,),) = yield INSERT_TOMBSTONE, (now, actor, reason, *counts, detail)
    return PurgeReport(report.threads, report.skipped, report.missing, False, int(tombstone), now)


_ROOTS_OF = (
    "SELECT root FROM run_inputs WHERE root IS NOT NULL AND run_id IN ({runs}) "
    "UNION SELECT root FROM checkpoints WHERE root IS NOT NULL AND run_id IN ({runs})"
)
ALL_ROOTS = Fetch(
    "SELECT root FROM run_inputs WHERE root IS NOT NULL "
    "UNION SELECT root FROM checkpoints WHERE root IS NOT NULL"
)
NODES = Fetch("SELECT hash, data FROM input_chunks WHERE level > 0")


def _roots(thread_ids: list[str]) -> Body[set[bytes]]:
    """The chunk trees' roots of these threads' inputs and checkpoints."""
    roots: set[bytes] = set()
    for thread_id in thread_ids:
        rows = yield Fetch(_ROOTS_OF.format(runs=_RUNS_OF)), (thread_id, thread_id)
        roots.update(bytes(row[0]) for row in rows)
    return roots


# A writer's tree stops at the first chunk it finds present, trusting its subtree: on
# PostgreSQL, a tree committed after this purge read the roots, through chunks it is
# about to delete, would lose them. Every tree write inserts (at least its root) into
# input_chunks, taking ROW EXCLUSIVE until it commits; SHARE waits for those in flight,
# and holds back new ones until the purge commits (they then insert what it deleted).
# Taken last, once the purge holds its rows: a tree write takes the rows it needs (its
# thread, its run) before its chunks, so it waits for the purge before it holds the table.
# SHARE ROW EXCLUSIVE rather than SHARE: two purges (or a purge and a rewrite of inputs)
# take turns instead of each holding the table against the other's deletes.
LOCK_CHUNKS = Fetch("LOCK TABLE input_chunks IN SHARE ROW EXCLUSIVE MODE")  # no row count


def _collect_chunks(purged_roots: set[bytes], dialect: str) -> Body[None]:
    """Delete the chunks (content-addressed, shared between threads) that only the purged
    threads' trees reached: a purge leaves none of their bytes, and every tree that remains
    keeps all of its chunks (a chunk present still means its whole subtree is)."""
    if not purged_roots:
        return
    if dialect != SQLITE:  # SQLite's one writer at a time is lock enough
        yield LOCK_CHUNKS, ()
    nodes = {bytes(key): bytes(data) for key, data in (yield NODES, ())}
    remaining = {bytes(row[0]) for row in (yield ALL_ROOTS, ())}
    doomed = _reach(purged_roots, nodes) - _reach(remaining, nodes)
    for batch in batches(sorted(doomed)):
        marks = ", ".join("?" for _ in batch)
        yield Execute(f"DELETE FROM input_chunks WHERE hash IN ({marks})"), tuple(batch)


THREAD_INPUTS = Fetch(
    "SELECT i.run_id, i.root, i.base FROM run_inputs i JOIN runs r ON r.run_id = i.run_id "
    "WHERE r.thread_id = ?"
)
LOCK_THREAD_RUNS = Fetch("SELECT run_id FROM runs WHERE thread_id = ? ORDER BY run_id", lock=True)
REWRITE_INPUT = Execute(
    "UPDATE run_inputs SET input = ?, root = ?, base = NULL, rewritten_at = ? WHERE run_id = ?"
)
DROP_THREAD_CHECKPOINTS = Execute(f"DELETE FROM checkpoints WHERE run_id IN ({_RUNS_OF})")


def rewrite_inputs(
    thread_id: str,
    inputs: Mapping[str, tuple[bytes | None, InputTree | None]],
    dialect: str,
    cache: ChunkCache,
    redacted: Mapping[str, Redacted],
) -> Body[int]:
    """Replace the posted inputs of runs of the thread: each given whole (its bytes) or as
    a tree, never as a delta, and marked rewritten so no later delta takes it as its base.
    An input kept as changes from one replaced is kept whole or as a tree first, as it
    was. What only the old inputs reached goes: their chunks, the thread's checkpoints
    (folded from the old starting points), the runs' search documents (indexed again)."""
    if not (yield THREAD_CHAIN, (thread_id,)):
        raise ThreadNotFound(thread_id)
    yield LOCK_THREAD_RUNS, (thread_id,)  # as a purge does: tree writes wait on their run
    if dialect != SQLITE:
        yield LOCK_CHUNKS, ()
    kept = {str(r): (root, base) for r, root, base in (yield THREAD_INPUTS, (thread_id,))}
    for run_id in inputs:
        if run_id not in kept:
            raise InputError(f"run {run_id!r} has no posted input in thread {thread_id!r}")
    # Read before anything is written: their bases are still the old inputs.
    kept_as_they_are: dict[str, tuple[bytes | None, InputTree | None]] = {}
    for run_id, (_root, base) in kept.items():
        if base is not None and base in inputs and run_id not in inputs:
            run = yield from reads.get_run(run_id, True, cache)
            kept_as_they_are[run_id] = whole_or_tree(run.input or b"")
    old_roots = {bytes(kept[r][0]) for r in inputs if kept[r][0] is not None}
    now = time.time()
    yield Sanction("rewrite"), ()  # (the inputs' own triggers refuse any other UPDATE)
    for run_id, (whole, tree) in [*inputs.items(), *kept_as_they_are.items()]:
        if tree is not None:
            yield from insert_chunks(tree)
        yield REWRITE_INPUT, (whole, None if tree is None else tree.root, now, run_id)
        if run_id in inputs:
            yield from search.forget_run(dialect, run_id)
        if run_id in redacted:
            yield from _redactions(run_id, {-1: redacted[run_id]}, now)  # -1: the input
    yield Sanction("rewrite", on=False), ()
    yield DROP_THREAD_CHECKPOINTS, (thread_id,)
    yield from _collect_chunks(old_roots, dialect)
    return len(inputs)


def _reach(roots: set[bytes], nodes: Mapping[bytes, bytes]) -> set[bytes]:
    seen: set[bytes] = set()
    stack = list(roots)
    while stack:
        key = stack.pop()
        if key in seen:
            continue
        seen.add(key)
        data = nodes.get(key)
        if data is not None:
            stack.extend(data[i : i + HASH_BYTES] for i in range(0, len(data), HASH_BYTES))
    return seen


def _selected(selection: PurgeSelection) -> Body[tuple[list[str], list[str]]]:
    conditions: list[str] = []
    params: list[Any] = []
    if selection.thread_ids:
        marks = ", ".join("?" for _ in selection.thread_ids)
        conditions.append(f"thread_id IN ({marks})")
        params += selection.thread_ids
    if selection.updated_before is not None:
        conditions.append("updated_at < ?")
        params.append(selection.updated_before)
    if selection.agent is not None:
        conditions.append(
            "EXISTS (SELECT 1 FROM runs WHERE runs.thread_id = threads.thread_id "
            "AND runs.agent = ?)"
        )
        params.append(selection.agent)
    if selection.exclude_agents:
        marks = ", ".join("?" for _ in selection.exclude_agents)
        conditions.append(
            "NOT EXISTS (SELECT 1 FROM runs WHERE runs.thread_id = threads.thread_id "
            f"AND runs.agent IN ({marks}))"
        )
        params += selection.exclude_agents
    query = Fetch(f"{SELECT_THREADS} WHERE {' AND '.join(conditions)} ORDER BY thread_id")
    ids = [str(row[0]) for row in (yield query, tuple(params))]
    missing: list[str] = []
    if selection.thread_ids:
        present = set(ids)
        named = ", ".join("?" for _ in selection.thread_ids)
        every = yield Fetch(f"{SELECT_THREADS} WHERE thread_id IN ({named})"), selection.thread_ids
        known = {str(row[0]) for row in every}
        missing = [t for t in dict.fromkeys(selection.thread_ids) if t not in known]
        ids = [t for t in ids if t in present]
    return ids, missing


def purged_view(thread: PurgedThread) -> dict[str, Any]:
    return {
        "threadId": thread.thread_id,
        "head": None if thread.head is None else thread.head.hex(),
        "sealed": thread.sealed,
        "events": thread.events,
        "runs": [
            {
                "runId": r.run_id,
                "events": r.events,
                "head": None if r.head is None else r.head.hex(),
            }
            for r in thread.runs
        ],
    }


def tombstones() -> Body[list[Tombstone]]:
    rows = yield TOMBSTONES, ()
    return [
        Tombstone(int(i), float(at), a, why, int(t), int(r), int(e), orjson.loads(d))
        for i, at, a, why, t, r, e, d in rows
    ]


def rewrites() -> Body[list[Rewrite]]:
    rows = yield REWRITES, ()
    return [
        Rewrite(
            int(i),
            float(at),
            actor,
            reason,
            run,
            thread,
            None if old is None else bytes(old),
            None if new is None else bytes(new),
            {
                int(e["seq"]): (e.get("oldHash"), str(e["newHash"]))
                for e in orjson.loads(detail).get("rewritten", [])
            },
        )
        for i, at, actor, reason, run, thread, old, new, detail in rows
    ]


def rewrite(
    run_id: str,
    payloads: Mapping[int, bytes],
    actor: str,
    reason: str | None,
    dialect: str,
    redacted: Mapping[int, Redacted] | None = None,
    if_head: bytes | None = None,
) -> Body[RewriteReport]:
    """Replace the payloads of the run's events at the given seqs, re-hash them and every
    later event of the run, re-seal the run and its thread, and record the change. What
    was derived from the old payloads goes in the same transaction: the checkpoints
    folded over them and the run's search documents (indexed again from the new ones).
    ``redacted``: what redaction did at those seqs, kept in ``redactions``; ``if_head``: the
    run's head as the caller read it (another: ``Conflict``)."""
    if not payloads:
        raise InputError("a rewrite needs at least one event")
    thread = yield LOCK_THREAD_OF_RUN, (run_id,)
    run = yield REWRITTEN_RUN, (run_id,)
    if not thread or not run:
        raise RunNotFound(run_id)
    thread_id, old_thread_head, _sealed = thread[0]
    status, old_head, seal = run[0]
    if status == RUNNING:
        raise Conflict(f"run {run_id!r} is still recording: rewrite it once it has ended")
    if if_head is not None and (old_head is None or bytes(old_head) != if_head):
        raise Conflict(f"run {run_id!r} was rewritten since it was read: read it again")
    first = min(payloads)
    events = yield EVENTS_FROM, (run_id, first)
    have = {int(row[0]) for row in events}
    absent = sorted(set(payloads) - have)
    if absent:
        raise InputError(f"run {run_id!r} has no event with seq {absent[0]}")
    previous = chain.run_genesis(thread_id, run_id)
    if first > 0:
        ((before,),) = yield EVENT_HASH, (run_id, first - 1)
        previous = bytes(before) if before is not None else previous
    new = [(kind, payloads.get(int(seq), bytes(payload))) for seq, kind, payload, _ in events]
    hashes = chain.event_links(previous, first, new)
    yield Sanction("rewrite"), ()
    changed: list[dict[str, Any]] = []
    for (seq, _kind, _old, old_hash), (_, payload), new_hash in zip(
        events, new, hashes, strict=True
    ):
        if int(seq) in payloads:
            yield REWRITE_EVENT, (payload, new_hash, run_id, seq)
            changed.append({"seq": int(seq), "oldHash": _hex(old_hash), "newHash": new_hash.hex()})
        else:
            yield REHASH_EVENT, (new_hash, run_id, seq)
    now = time.time()
    if redacted:  # (inside the sanction: a row kept gains the rules, an UPDATE)
        yield from _redactions(run_id, redacted, now)
    yield Sanction("rewrite", on=False), ()
    yield DROP_CHECKPOINTS_FROM, (run_id, first)
    yield from search.forget_run(dialect, run_id)
    new_head = hashes[-1]
    new_thread_head = None if old_thread_head is None else bytes(old_thread_head)
    if seal is not None:
        yield SET_RUN_HEAD, (new_head, run_id)
        sealed = yield SEALED_RUNS, (thread_id,)
        new_thread_head = chain.thread_head(thread_id, [(str(r), bytes(h)) for r, h in sealed])
        yield SET_THREAD_HEAD, (new_thread_head, thread_id)
    old = None if old_head is None else bytes(old_head)
    old_thread = None if old_thread_head is None else bytes(old_thread_head)
    detail = orjson.dumps({"rewritten": changed, "rehashed": len(hashes)}).decode()
    ((record,),) = yield (
        INSERT_REWRITE,
        (
            now,
            actor,
            reason,
            run_id,
            thread_id,
            old,
            new_head if seal is not None else None,
            old_thread,
            new_thread_head,
            detail,
        ),
    )
    return RewriteReport(
        int(record),
        run_id,
        thread_id,
        tuple(sorted(payloads)),
        len(hashes),
        old,
        new_head if seal is not None else None,
        old_thread,
        new_thread_head,
    )


def _redactions(run_id: str, redacted: Mapping[int, Redacted], now: float) -> Body[None]:
    rows = yield REDACTION_RULES, (run_id,)
    before = {int(seq): orjson.loads(rules) for seq, rules in rows}
    for seq, redaction in sorted(redacted.items()):
        if seq in before:
            rules = orjson.dumps(sorted({*before[seq], *redaction.rules})).decode()
            yield SET_REDACTION_RULES, (rules, run_id, seq)
        else:
            yield INSERT_REDACTION, redaction_row(run_id, seq, redaction, now)


def record_action(
    actor: str, action: str, target: str | None, outcome: str, detail: dict[str, Any] | None
) -> Body[int]:
    encoded = None if detail is None else orjson.dumps(detail).decode()
    ((number,),) = yield INSERT_ACTION, (time.time(), actor, action, target, outcome, encoded)
    return int(number)


def list_actions(limit: int, before: int | None, action: str | None) -> Body[list[Action]]:
    conditions: list[str] = []
    params: list[Any] = []
    if before is not None:
        conditions.append("id < ?")
        params.append(before)
    if action is not None:
        conditions.append("action = ?")
        params.append(action)
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    query = Fetch(
        "SELECT id, at, actor, action, target, outcome, detail FROM audit_log"
        f"{where} ORDER BY id DESC LIMIT ?"
    )
    rows = yield query, (*params, limit)
    return [
        Action(int(i), float(at), a, what, target, outcome, orjson.loads(d) if d else None)
        for i, at, a, what, target, outcome, d in rows
    ]


def _hex(value: Any) -> str | None:
    return None if value is None else bytes(value).hex()
