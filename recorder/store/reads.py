"""The bodies of the store's reads, one per operation (see ``recorder.store.statements``)."""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import orjson

from recorder.errors import InputError, RunNotFound, StoreError, ThreadNotFound
from recorder.store.annotation import tag_condition
from recorder.store.deltas import CHAIN, patch
from recorder.store.inputs import HASH_BYTES, Chunk, ChunkCache, batches, reassemble, unpacked
from recorder.store.model import Page, Redaction, Run, Thread, ThreadFilter, ThreadSource
from recorder.store.statements import (
    EVENT_COLUMNS,
    INPUT_REWRITTEN_AT,
    Body,
    Fetch,
    FetchEvents,
)
from recorder.wire.events import RecordedEvent

_RUN_COLUMNS = (
    "r.run_id, r.thread_id, r.agent, r.status, {input}, r.parent_run_id, r.parent_seq, "
    "r.parent_inferred, r.origin, r.outcome, r.error, r.violations, r.event_count, "
    "r.created_at, r.finished_at, r.heartbeat_at, r.owner, {root}, {base}, r.head, "
    "{rewritten}"
)
_WITH_INPUT = {
    "input": "i.input",
    "root": "i.root",
    "base": "i.base",
    "rewritten": "i.rewritten_at",
}
# Without the input's row joined, when it was rewritten is looked up on its own.
_NO_INPUT = {"input": "NULL", "root": "NULL", "base": "NULL", "rewritten": INPUT_REWRITTEN_AT}
RUNS = (
    f"SELECT {_RUN_COLUMNS.format(**_WITH_INPUT)} "
    "FROM runs r LEFT JOIN run_inputs i ON i.run_id = r.run_id"
)
RUNS_WITHOUT_INPUT = f"SELECT {_RUN_COLUMNS.format(**_NO_INPUT)} FROM runs r"
RUN = Fetch(f"{RUNS} WHERE r.run_id = ?")
_OF_THREAD = " WHERE r.thread_id = ? ORDER BY r.created_at, r.run_id"
RUNS_OF_THREAD = Fetch(RUNS_WITHOUT_INPUT + _OF_THREAD)
RUNS_OF_THREAD_WITH_INPUTS = Fetch(RUNS + _OF_THREAD)
_LATEST_STATUS = "(SELECT status FROM runs WHERE runs.run_id = threads.latest_run_id)"
# A thread's source thread is its source run's thread, read here rather than stored: an
# import may bring a fork before the run it came from.
_SOURCE_THREAD = "(SELECT thread_id FROM runs WHERE runs.run_id = threads.source_run_id)"
THREADS = (
    "SELECT threads.thread_id, agent, created_at, updated_at, run_count, latest_run_id, "
    f"summary, {_LATEST_STATUS}, source_run_id, source_seq, {_SOURCE_THREAD} AS source_thread "
    "FROM threads"
)
THREAD = Fetch(f"{THREADS} WHERE thread_id = ?")
FORKS = Fetch(
    f"{THREADS} WHERE source_run_id IN (SELECT run_id FROM runs WHERE runs.thread_id = ?) "
    "AND threads.thread_id <> ? ORDER BY created_at, threads.thread_id"
)
CHUNKS = "SELECT hash, level, data FROM input_chunks WHERE hash IN"
MAX_POSITION = Fetch("SELECT max(position) FROM events")
NEAREST_CHECKPOINT = Fetch(
    "SELECT seq, data, root, from_input FROM checkpoints WHERE run_id = ? AND seq <= ? "
    "ORDER BY seq DESC LIMIT 1"
)
RUN_WITHOUT_INPUT = Fetch(f"{RUNS_WITHOUT_INPUT} WHERE r.run_id = ?")
# The chain of an input's deltas from its ``first`` row (``input, root, base, 0``), each
# base's row after the one that names it, at most ``?`` (``CHAIN``) deltas down.
_CHAIN = (
    "chain (input, root, base, n) AS ({first} "
    "UNION ALL SELECT i.input, i.root, i.base, chain.n + 1 "
    "FROM run_inputs i JOIN chain ON i.run_id = chain.base WHERE chain.n < ?)"
)
# The run (without its input) and, on the same row, its checkpoint nearest at or before a
# seq (taken as its last event when past it): the state at a run's boundary in one query.
# A checkpoint kept as a delta from the run's input (as a run's last one usually is) needs
# that input, itself often a delta (``BASES``): its chain comes in the same query, as the
# rows after the run's (``n`` 1, 2, ...: the run's input's row, then its bases'), so that
# the state at a boundary is one round trip on PostgreSQL, not two.
_RUN_WIDTH = _RUN_COLUMNS.count(",") + 1  # the checkpoint's columns come after the run's
_CHECKPOINT_COLUMNS = ("seq", "data", "root", "from_input")
RUN_CHECKPOINT = Fetch(
    "WITH RECURSIVE found AS ("
    f"SELECT {_RUN_COLUMNS.format(**_NO_INPUT)}, "
    + ", ".join(f"c.{name} AS c_{name}" for name in _CHECKPOINT_COLUMNS)
    + " FROM runs r LEFT JOIN checkpoints c ON c.run_id = r.run_id AND c.seq = ("
    "SELECT k.seq FROM checkpoints k WHERE k.run_id = r.run_id AND k.seq <= "
    "CASE WHEN ? < r.event_count THEN ? ELSE r.event_count - 1 END "
    "ORDER BY k.seq DESC LIMIT 1) "
    "WHERE r.run_id = ?), "
    + _CHAIN.format(
        first="SELECT i.input, i.root, i.base, 0 FROM run_inputs i "
        "JOIN found ON found.c_from_input WHERE i.run_id = found.run_id"
    )
    + " SELECT 0, found.*, NULL, NULL, NULL FROM found "
    f"UNION ALL SELECT n + 1, {', '.join(['NULL'] * (_RUN_WIDTH + len(_CHECKPOINT_COLUMNS)))}, "
    "input, root, base FROM chain ORDER BY 1"
)
# Seqs past these are no seq of any run: clamped to them (a 32-bit column on PostgreSQL).
_LOWEST_SEQ = -1
_HIGHEST_SEQ = (1 << 31) - 1
# An input kept as a delta (``recorder.store.deltas``): its base, the base's base, ... down
# to one kept whole or as a tree (``recorder.store.inputs``), nearest first.
BASES = Fetch(
    "WITH RECURSIVE "
    + _CHAIN.format(first="SELECT input, root, base, 0 FROM run_inputs WHERE run_id = ?")
    + " SELECT input, root, base FROM chain ORDER BY n"
)


def get_run(run_id: str, with_input: bool, cache: ChunkCache) -> Body[Run]:
    rows = yield (RUN if with_input else RUN_WITHOUT_INPUT), (run_id,)
    if not rows:
        raise RunNotFound(run_id)
    return (yield from _with_input(rows[0], cache))


def _with_input(
    row: Sequence[Any], cache: ChunkCache, known: dict[str, bytes] | None = None
) -> Body[Run]:
    """The run of ``row``, its input rebuilt from its chunks when it is kept as a tree, or
    from its base when kept as a delta (``known``: inputs rebuilt already, by run)."""
    run = _run(row)
    if row[18] is None and row[17] is None:
        return run
    data = yield from _input(run.run_id, row[4], row[17], row[18], cache, known or {})
    if known is not None:
        known[run.run_id] = data
    return replace(run, input=data)


def _input(
    run_id: str, kept: Any, root: Any, base: Any, cache: ChunkCache, known: dict[str, bytes]
) -> Body[bytes]:
    """A run's input from its row's ``input``, ``root`` and ``base``."""
    what = f"the input of run {run_id!r}"
    if base is not None:
        return (yield from _patched(bytes(kept), str(base), cache, known, what))
    if root is not None:
        return (yield from _tree(bytes(root), cache, what))
    if kept is None:
        raise StoreError(f"{what} is missing from the store")
    return bytes(kept)


def _patched(
    delta: bytes, base: str, cache: ChunkCache, known: dict[str, bytes], what: str
) -> Body[bytes]:
    """An input kept as ``delta`` from the input of run ``base``, rebuilt."""
    data = known.get(base)
    if data is None:
        rows = yield BASES, (base, CHAIN)
        data = yield from _chained(rows, cache, what)
    return patch(data, delta)


def _chained(rows: Sequence[Sequence[Any]], cache: ChunkCache, what: str) -> Body[bytes]:
    """The input of the first of ``BASES``'s rows (``input, root, base``), rebuilt."""
    deltas: list[bytes] = []
    data = None
    for kept, root, further in rows:
        if further is None:
            if root is not None:
                data = yield from _tree(bytes(root), cache, what)
            elif kept is not None:
                data = bytes(kept)
            break
        deltas.append(bytes(kept))
    if data is None:
        raise StoreError(f"{what} is missing from the store")
    for step in reversed(deltas):
        data = patch(data, step)
    return data


def _tree(root: bytes, cache: ChunkCache, what: str) -> Body[bytes]:
    """The bytes kept under ``root``, read a level at a time (what ``cache`` lacks)."""
    whole = _cached(root, cache)
    if whole is not None:
        return whole
    # Nodes whose bytes the cache holds in spans are not walked into: a tree that shares
    # most of itself with one read lately (the checkpoints of one run do) costs the reads
    # and lookups of what it does not share.
    yield from _walk(root, cache, what, skip_spanned=True)  # what it read is in the cache
    whole = _cached(root, cache)
    if whole is not None:
        return whole
    # The cache started over while this tree was read: the whole tree, then.
    found = yield from _walk(root, cache, what, skip_spanned=False)
    return reassemble(root, found)


def _walk(
    root: bytes, cache: ChunkCache, what: str, *, skip_spanned: bool
) -> Body[dict[bytes, Chunk]]:
    """The chunks of the tree under ``root``, from ``cache`` or read (and then cached)."""
    found: dict[bytes, Chunk] = {}
    wanted = [root]
    while wanted:
        level = list(dict.fromkeys(wanted))
        missing: list[bytes] = []
        walked: list[bytes] = []
        for key in level:
            if skip_spanned and cache.spans(key) is not None:
                continue
            walked.append(key)
            chunk = cache.get(key)
            if chunk is None:
                missing.append(key)
            else:
                found[key] = chunk
        for batch in batches(missing):
            marks = ", ".join("?" * len(batch))
            rows = yield Fetch(f"{CHUNKS} ({marks})"), batch
            read = [unpacked(bytes(key), int(depth), bytes(data)) for key, depth, data in rows]
            found.update((chunk.hash, chunk) for chunk in read)
            cache.put(read)
        if any(key not in found for key in missing):
            raise StoreError(f"{what} is missing from the store")
        wanted = [child for key in walked for child in found[key].children()]
    return found


def _cached(root: bytes, cache: ChunkCache) -> bytes | None:
    """The bytes under ``root`` when ``cache`` holds its whole tree (the usual case: the
    chunks of what was written or read lately), joined in one pass; else None."""
    spans = _spans(root, cache)
    return None if spans is None else b"".join(spans)


def join_ahead(root: bytes, cache: ChunkCache) -> None:
    """Keep the spans of the tree under ``root`` in ``cache`` now (when it holds the whole
    tree), so that its first read takes one lookup per node, not a walk."""
    _spans(root, cache)


def _spans(key: bytes, cache: ChunkCache) -> tuple[bytes, ...] | None:
    """The bytes under node ``key`` in spans (``ChunkCache.spans``), from what ``cache``
    holds, kept there for the next tree that shares the node; None where it lacks some."""
    known = cache.spans(key)
    if known is not None:
        return known
    chunk = cache.get(key)
    if chunk is None:
        return None
    data, level = chunk.data, chunk.level
    if level == 0:
        return (data,)
    if level == 1:  # its children are leaves: joined here, in order, once
        get = cache.get
        parts: list[bytes] = []
        for i in range(0, len(data), HASH_BYTES):
            leaf = get(data[i : i + HASH_BYTES])
            if leaf is None or leaf.level:
                return None
            parts.append(leaf.data)
        spans: tuple[bytes, ...] = (b"".join(parts),)
    else:
        gathered: list[bytes] = []
        for i in range(0, len(data), HASH_BYTES):
            below = _spans(data[i : i + HASH_BYTES], cache)
            if below is None:
                return None
            gathered += below
        spans = tuple(gathered)
    cache.keep_spans(key, spans, level=level)
    return spans


def read_events(
    run_id: str, gt: int, lte: int | None, limit: int | None
) -> Body[list[RecordedEvent]]:
    sql = f"SELECT {EVENT_COLUMNS} FROM events WHERE run_id = ? AND seq > ?"
    params: list[Any] = [run_id, gt]
    if lte is not None:
        sql += " AND seq <= ?"
        params.append(lte)
    sql += " ORDER BY seq"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    events: list[RecordedEvent] = yield FetchEvents(sql), params
    return events


_PAYLOADS = Fetch(
    "SELECT payload FROM events WHERE run_id = ? AND seq > ? AND seq <= ? ORDER BY seq"
)


def read_payloads(run_id: str, gt: int, lte: int) -> Body[list[bytes]]:
    rows = yield _PAYLOADS, (run_id, gt, lte)
    return [payload for (payload,) in rows]


def read_after(
    position: int, limit: int | None, thread_id: str | None
) -> Body[list[RecordedEvent]]:
    sql = f"SELECT {EVENT_COLUMNS} FROM events WHERE position > ?"
    params: list[Any] = [position]
    if thread_id is not None:
        sql += " AND thread_id = ?"
        params.append(thread_id)
    sql += " ORDER BY position"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    events: list[RecordedEvent] = yield FetchEvents(sql), params
    return events


def max_position() -> Body[int]:
    ((value,),) = yield MAX_POSITION, ()
    return int(value or 0)


def list_runs(thread_id: str, inputs: bool, cache: ChunkCache) -> Body[list[Run]]:
    if not inputs:
        rows = yield RUNS_OF_THREAD, (thread_id,)
        return [_run(row) for row in rows]
    rows = yield RUNS_OF_THREAD_WITH_INPUTS, (thread_id,)
    runs: list[Run] = []
    known: dict[str, bytes] = {}  # a thread's inputs are often deltas of each other
    for row in rows:
        runs.append((yield from _with_input(row, cache, known)))
    return runs


def get_thread(thread_id: str) -> Body[Thread]:
    rows = yield THREAD, (thread_id,)
    if not rows:
        raise ThreadNotFound(thread_id)
    return _thread(rows[0])


def list_forks(thread_id: str) -> Body[list[Thread]]:
    rows = yield FORKS, (thread_id, thread_id)
    return [_thread(row) for row in rows]


REDACTIONS = Fetch(
    "SELECT run_id, seq, rules, original_mac, recorded_at FROM redactions WHERE run_id = ? "
    "ORDER BY seq"
)


def list_redactions(run_id: str) -> Body[list[Redaction]]:
    rows = yield REDACTIONS, (run_id,)
    return [
        Redaction(str(r[0]), int(r[1]), tuple(orjson.loads(r[2])), r[3], float(r[4])) for r in rows
    ]


def list_threads(filters: ThreadFilter, limit: int, cursor: str | None) -> Body[Page]:
    """Newest first (by last update, then id), ``limit`` a page, keyset-paginated."""
    conditions, params = _thread_conditions(filters)
    if cursor is not None:
        updated_at, thread_id = _decode_cursor(cursor)
        conditions.append("(updated_at < ? OR (updated_at = ? AND thread_id < ?))")
        params += [updated_at, updated_at, thread_id]
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    page = Fetch(f"{THREADS}{where} ORDER BY updated_at DESC, thread_id DESC LIMIT ?")
    rows = yield page, (*params, limit + 1)
    items = [_thread(row) for row in rows[:limit]]
    if len(rows) <= limit:
        return Page(items, None)
    return Page(items, _encode_cursor(items[-1].updated_at, items[-1].thread_id))


def lineage(run_id: str, inputs: bool, cache: ChunkCache) -> Body[list[Run]]:
    chain: list[Run] = []
    seen: set[str] = set()
    current: str | None = run_id
    while current is not None and current not in seen:
        seen.add(current)
        rows = yield (RUN if inputs else RUN_WITHOUT_INPUT), (current,)
        if not rows:
            if not chain:
                raise RunNotFound(run_id)
            break  # a parent that was never recorded here (e.g. another system's run)
        run = yield from _with_input(rows[0], cache)
        chain.append(run)
        current = run.parent_run_id
    chain.reverse()
    return chain


def nearest_checkpoint(run_id: str, seq: int, cache: ChunkCache) -> Body[tuple[int, bytes] | None]:
    rows = yield NEAREST_CHECKPOINT, (run_id, seq)
    if not rows:
        return None
    at, data, root, from_input = rows[0]
    return int(at), (yield from _checkpoint(run_id, data, root, from_input, cache))


def _checkpoint(
    run_id: str,
    data: Any,
    root: Any,
    from_input: Any,
    cache: ChunkCache,
    bases: Sequence[Sequence[Any]] | None = None,
) -> Body[bytes]:
    """A checkpoint's bytes from its row: whole, a tree, or a delta from the run's input
    (``bases``: its input's chain, ``BASES``'s rows, when it was read already)."""
    if data is None:  # kept as a tree
        return (yield from _tree(bytes(root), cache, f"a checkpoint of run {run_id!r}"))
    if not from_input:
        return bytes(data)
    rows = bases
    if rows is None:
        rows = yield BASES, (run_id, CHAIN)  # the run's input's row, then its bases'
    posted = yield from _chained(rows, cache, f"the input of run {run_id!r}")
    return patch(posted, bytes(data))


def run_checkpoint(
    run_id: str, seq: int | None, cache: ChunkCache
) -> Body[tuple[Run, tuple[int, bytes] | None]]:
    at = _HIGHEST_SEQ if seq is None else max(_LOWEST_SEQ, min(seq, _HIGHEST_SEQ))
    rows = yield RUN_CHECKPOINT, (at, at, run_id, CHAIN)
    if not rows:
        raise RunNotFound(run_id)
    row = rows[0][1:]
    run = _run(row)
    found, data, root, from_input = row[_RUN_WIDTH : _RUN_WIDTH + len(_CHECKPOINT_COLUMNS)]
    if found is None:
        return run, None
    bases = [chained[-3:] for chained in rows[1:]]  # the input's chain, when it is needed
    return run, (int(found), (yield from _checkpoint(run_id, data, root, from_input, cache, bases)))


def _thread_conditions(f: ThreadFilter) -> tuple[list[str], list[Any]]:
    conditions: list[str] = []
    params: list[Any] = []
    if f.agent is not None:
        conditions.append(
            "EXISTS (SELECT 1 FROM runs WHERE runs.thread_id = threads.thread_id "
            "AND runs.agent = ?)"
        )
        params.append(f.agent)
    if f.agents is not None:
        if not f.agents:
            conditions.append("1 = 0")
        else:
            marks = ", ".join("?" * len(f.agents))
            conditions.append(
                f"threads.agent IN ({marks}) AND NOT EXISTS (SELECT 1 FROM runs WHERE "
                f"runs.thread_id = threads.thread_id AND "
                f"(runs.agent IS NULL OR runs.agent NOT IN ({marks})))"
            )
            params += [*f.agents, *f.agents]
    if f.status is not None:
        conditions.append(f"{_LATEST_STATUS} = ?")
        params.append(f.status)
    if f.since is not None:
        conditions.append("updated_at >= ?")
        params.append(float(f.since))
    if f.until is not None:
        conditions.append("updated_at <= ?")
        params.append(float(f.until))
    more, more_params = tag_condition(f.tags, "threads.thread_id", None)
    conditions += more
    params += more_params
    # Summaries are kept without NUL (recorder.store.writes); so is what is looked for.
    text = (f.text or "").replace("\x00", "")
    if text:
        conditions.append("lower(summary) LIKE ? ESCAPE '\\'")
        escaped = text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        params.append(f"%{escaped}%")
    return conditions, params


def _run(row: Sequence[Any]) -> Run:
    return Run(
        run_id=row[0],
        thread_id=row[1],
        agent=row[2],
        status=row[3],
        input=None if row[4] is None else bytes(row[4]),
        parent_run_id=row[5],
        parent_seq=row[6],
        parent_inferred=bool(row[7]),
        origin=row[8],
        outcome=row[9],
        error=row[10],
        violations=orjson.loads(row[11]) if row[11] else [],
        event_count=int(row[12]),
        created_at=float(row[13]),
        finished_at=row[14],
        heartbeat_at=row[15],
        owner=row[16],
        head=None if row[19] is None else bytes(row[19]),
        input_rewritten_at=None if row[20] is None else float(row[20]),
    )


def _thread(row: Sequence[Any]) -> Thread:
    return Thread(
        thread_id=row[0],
        agent=row[1],
        created_at=float(row[2]),
        updated_at=float(row[3]),
        run_count=int(row[4]),
        latest_run_id=row[5],
        summary=row[6],
        latest_status=row[7],
        source=None if row[8] is None else ThreadSource(row[10], row[8], row[9]),
    )


def _encode_cursor(updated_at: float, thread_id: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([updated_at, thread_id])).decode()


def _decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        updated_at, thread_id = orjson.loads(base64.urlsafe_b64decode(cursor.encode()))
        found = float(updated_at), str(thread_id)
    except Exception as exc:
        raise InputError(f"invalid cursor {cursor!r}") from exc
    if not math.isfinite(found[0]) or "\x00" in found[1]:
        raise InputError(f"invalid cursor {cursor!r}")  # (none this store gave)
    return found
