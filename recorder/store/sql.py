"""The SQL event store: one implementation for SQLite and PostgreSQL.

Dialect details (engine setup, the append lock, the driver-level fast paths, notifications,
error translation) live in ``sqlite.py`` and ``postgres.py``; this module never branches on
the database's name.

Public methods open the transaction; private ``_helpers(conn, ...)`` do the work.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, Self

import orjson
from sqlalchemy import and_, func, null, or_, select, text, update
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from recorder.errors import (
    Conflict,
    InputError,
    RunClosed,
    RunNotFound,
    StoreError,
    ThreadNotFound,
)
from recorder.store import schema
from recorder.store.model import (
    RUNNING,
    STATUSES,
    TERMINAL,
    Appended,
    NewEvent,
    NewRun,
    Page,
    Run,
    Thread,
    ThreadFilter,
)
from recorder.wire.events import RecordedEvent

EventRow = tuple[int, str, str, int, str | None, bytes, float, str]


class Dialect(Protocol):
    """What differs between databases; everything else is shared SQL."""

    name: str

    def create_engine(self, url: str) -> AsyncEngine: ...
    def translate(self, exc: BaseException) -> StoreError | None: ...
    def write_transaction(
        self, engine: AsyncEngine, *, append: bool = False
    ) -> AbstractAsyncContextManager[AsyncConnection]: ...
    async def insert_events(self, conn: AsyncConnection, rows: list[EventRow]) -> None: ...
    async def fetch(self, conn: AsyncConnection, sql: str, *params: Any) -> list[Any]:
        """Rows of ``sql`` (``?`` placeholders) straight from the driver: for the append
        path, where SQLAlchemy's per-statement overhead is most of the cost."""
        ...

    async def fetch_events(
        self, conn: AsyncConnection, run_id: str, gt: int, lte: int | None, limit: int | None
    ) -> list[RecordedEvent]: ...
    async def notify(self, conn: AsyncConnection) -> None: ...
    async def listen(self, engine: AsyncEngine, wake: asyncio.Event) -> None: ...
    async def stop(self) -> None: ...


class SqlStore:
    def __init__(self, url: str, engine: AsyncEngine, dialect: Dialect) -> None:
        self.url = url
        self._engine = engine
        self._dialect = dialect
        self._changed = asyncio.Condition()
        self._wake = asyncio.Event()
        self._listening = False

    @classmethod
    async def open(cls, url: str, dialect: Dialect) -> Self:
        engine = dialect.create_engine(url)
        store = cls(url, engine, dialect)
        try:
            async with engine.connect() as conn:
                await conn.exec_driver_sql("SELECT 1")
        except Exception as exc:
            await engine.dispose()
            raise store._translated(exc) from exc
        return store

    @property
    def engine(self) -> AsyncEngine:
        return self._engine

    @property
    def dialect_name(self) -> str:
        return self._dialect.name

    async def close(self) -> None:
        await self._dialect.stop()
        await self._engine.dispose()

    async def migrate(self) -> None:
        from recorder.store.migrations import upgrade

        try:
            await upgrade(self._engine)
        except Exception as exc:
            raise self._translated(exc) from exc

    # -- writing ---------------------------------------------------------------------------

    async def create_run(self, run: NewRun) -> Run:
        now = run.created_at if run.created_at is not None else time.time()
        values = run_values(run, now)
        try:
            async with self._dialect.write_transaction(self._engine) as conn:
                latest = await self._claim_thread(conn, run, now)
                if run.infer_parent and run.parent_run_id is None:
                    values["parent_run_id"], values["parent_inferred"] = latest, latest is not None
                await conn.execute(schema.runs.insert().values(**values))
                if run.input is not None:
                    await conn.execute(
                        schema.run_inputs.insert().values(run_id=run.run_id, input=run.input)
                    )
        except Exception as exc:
            raise self._translated(exc, run_id=run.run_id) from exc
        return new_run(values, run.input)

    async def append(self, run_id: str, events: Sequence[NewEvent]) -> list[Appended]:
        return (await self.append_batches([(run_id, events)]))[0]

    async def append_batches(
        self, batches: Sequence[tuple[str, Sequence[NewEvent]]]
    ) -> list[list[Appended]]:
        """Append every batch in one transaction: all of them are recorded, or none."""
        try:
            async with self._dialect.write_transaction(self._engine, append=True) as conn:
                result = await self._append(conn, batches)
                await self._dialect.notify(conn)
        except StoreError:
            raise
        except Exception as exc:
            raise self._translated(exc) from exc
        await self._changed_locally()
        return result

    async def set_status(
        self,
        run_id: str,
        status: str,
        *,
        outcome: str | None = None,
        error: str | None = None,
        violations: list[dict[str, object]] | None = None,
        summary: str | None = None,
    ) -> None:
        values = status_values(status, outcome, error, violations)
        try:
            async with self._dialect.write_transaction(self._engine) as conn:
                found = await conn.execute(
                    update(schema.runs).where(schema.runs.c.run_id == run_id).values(**values)
                )
                if found.rowcount == 0:
                    raise RunNotFound(run_id)
                if summary is not None:
                    await conn.execute(text(SUMMARY_OF_RUN), {"summary": summary, "run_id": run_id})
                await self._dialect.notify(conn)
        except StoreError:
            raise
        except Exception as exc:
            raise self._translated(exc) from exc
        await self._changed_locally()

    async def heartbeat(self, run_ids: Sequence[str], owner: str) -> None:
        # One row per transaction: a group commit locks several run rows in its own order,
        # and a multi-row heartbeat locking them in another order could deadlock with it.
        # Runs that appended recently were refreshed by the append itself.
        fresh = time.time() - 1.0
        runs = schema.runs
        for run_id in run_ids:
            async with self._dialect.write_transaction(self._engine) as conn:
                await conn.execute(
                    update(runs)
                    .where(and_(runs.c.run_id == run_id, runs.c.heartbeat_at < fresh))
                    .values(heartbeat_at=time.time(), owner=owner)
                )

    async def mark_incomplete(
        self,
        *,
        owner: str | None = None,
        stale_before: float | None = None,
        exclude_owner: str | None = None,
    ) -> list[str]:
        """Close runs left ``running`` by a process that is gone (all of them, by default)."""
        runs = schema.runs
        cond = runs.c.status == RUNNING
        if owner is not None:
            cond = and_(cond, runs.c.owner == owner)
        if exclude_owner is not None:
            cond = and_(cond, or_(runs.c.owner.is_(None), runs.c.owner != exclude_owner))
        if stale_before is not None:
            cond = and_(
                cond,
                or_(runs.c.heartbeat_at.is_(None), runs.c.heartbeat_at < stale_before),
            )
        async with self._dialect.write_transaction(self._engine) as conn:
            ids = [r[0] for r in await conn.execute(select(runs.c.run_id).where(cond))]
            if ids:
                await conn.execute(
                    update(runs)
                    .where(and_(runs.c.run_id.in_(ids), runs.c.status == RUNNING))
                    .values(status="incomplete", finished_at=time.time())
                )
                await self._dialect.notify(conn)
        return ids

    async def set_summary(self, thread_id: str, summary: str) -> None:
        async with self._dialect.write_transaction(self._engine) as conn:
            await conn.execute(text(SET_SUMMARY), {"summary": summary, "thread_id": thread_id})

    async def save_checkpoint(self, run_id: str, seq: int, data: bytes) -> None:
        try:
            async with self._dialect.write_transaction(self._engine) as conn:
                await conn.execute(
                    schema.checkpoints.insert().values(run_id=run_id, seq=seq, data=data)
                )
        except Exception as exc:
            err = self._translated(exc)
            if not isinstance(err, Conflict):  # another reader saved the same checkpoint
                raise err from exc

    # -- reading ---------------------------------------------------------------------------

    async def get_run(self, run_id: str) -> Run:
        async with self._engine.connect() as conn:
            row = (await conn.execute(_run_query().where(schema.runs.c.run_id == run_id))).first()
        if row is None:
            raise RunNotFound(run_id)
        return _run(row)

    async def read_events(
        self, run_id: str, *, gt: int = -1, lte: int | None = None, limit: int | None = None
    ) -> list[RecordedEvent]:
        async with self._engine.connect() as conn:
            return await self._dialect.fetch_events(conn, run_id, gt, lte, limit)

    async def read_after(
        self, position: int, *, limit: int | None = None, thread_id: str | None = None
    ) -> list[RecordedEvent]:
        ev = schema.events
        query = select(*_event_columns()).where(ev.c.position > position)
        if thread_id is not None:
            query = query.where(ev.c.thread_id == thread_id)
        query = query.order_by(ev.c.position)
        if limit is not None:
            query = query.limit(limit)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [RecordedEvent._make(row) for row in rows]

    async def max_position(self) -> int:
        async with self._engine.connect() as conn:
            value = await conn.scalar(select(func.max(schema.events.c.position)))
        return int(value or 0)

    async def list_runs(self, thread_id: str, *, inputs: bool = False) -> list[Run]:
        runs = schema.runs
        query = _run_query(with_input=inputs)
        async with self._engine.connect() as conn:
            rows = await conn.execute(
                query.where(runs.c.thread_id == thread_id).order_by(
                    runs.c.created_at, runs.c.run_id
                )
            )
            return [_run(row) for row in rows]

    async def get_thread(self, thread_id: str) -> Thread:
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(_thread_query().where(schema.threads.c.thread_id == thread_id))
            ).first()
        if row is None:
            raise ThreadNotFound(thread_id)
        return _thread(row)

    async def list_threads(
        self, filters: ThreadFilter | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> Page:
        th = schema.threads
        query = _thread_query()
        query = _filter_threads(query, filters or ThreadFilter())
        if cursor is not None:
            updated_at, thread_id = _decode_cursor(cursor)
            query = query.where(
                or_(
                    th.c.updated_at < updated_at,
                    and_(th.c.updated_at == updated_at, th.c.thread_id < thread_id),
                )
            )
        query = query.order_by(th.c.updated_at.desc(), th.c.thread_id.desc()).limit(limit + 1)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        items = [_thread(row) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            last = items[-1]
            next_cursor = _encode_cursor(last.updated_at, last.thread_id)
        return Page(items, next_cursor)

    async def lineage(self, run_id: str) -> list[Run]:
        """The run's chain of parents, root first, the run itself last."""
        chain: list[Run] = []
        seen: set[str] = set()
        current: str | None = run_id
        async with self._engine.connect() as conn:
            while current is not None and current not in seen:
                seen.add(current)
                row = (
                    await conn.execute(_run_query().where(schema.runs.c.run_id == current))
                ).first()
                if row is None:
                    if not chain:
                        raise RunNotFound(run_id)
                    break  # a parent that was never recorded here (e.g. another system's run)
                run = _run(row)
                chain.append(run)
                current = run.parent_run_id
        chain.reverse()
        return chain

    async def nearest_checkpoint(self, run_id: str, seq: int) -> tuple[int, bytes] | None:
        cp = schema.checkpoints
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    select(cp.c.seq, cp.c.data)
                    .where(and_(cp.c.run_id == run_id, cp.c.seq <= seq))
                    .order_by(cp.c.seq.desc())
                    .limit(1)
                )
            ).first()
        return None if row is None else (int(row[0]), bytes(row[1]))

    async def wait(self, timeout: float) -> None:
        if not self._listening:
            self._listening = True
            await self._dialect.listen(self._engine, self._wake)
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    # -- private ---------------------------------------------------------------------------

    async def _changed_locally(self) -> None:
        self._wake.set()

    async def _claim_thread(self, conn: AsyncConnection, run: NewRun, now: float) -> str | None:
        """Make the run the thread's latest; returns the one it replaces.

        Insert-if-absent, then lock the thread's row: concurrent first runs of a thread do
        not collide, and concurrent runs on it line up, each seeing the one before.
        """
        th = schema.threads
        params = thread_claim(run, now)
        await conn.execute(text(INSERT_THREAD), params)
        latest = await conn.scalar(
            select(th.c.latest_run_id).where(th.c.thread_id == run.thread_id).with_for_update()
        )
        await conn.execute(text(CLAIM_THREAD), params)
        return None if latest is None else str(latest)

    async def _append(
        self, conn: AsyncConnection, batches: Sequence[tuple[str, Sequence[NewEvent]]]
    ) -> list[list[Appended]]:
        # The append transaction holds the database's append lock (see the dialects), so
        # positions handed out here are contiguous and increase in commit order.
        (max_position,) = (await self._dialect.fetch(conn, MAX_POSITION))[0]
        now = time.time()
        claims = []
        for run_id, events in batches:
            found = await self._dialect.fetch(conn, CLAIM, len(events), now, run_id)
            claims.append(claimed(run_id, len(events), found[0] if found else None))
        rows, results = event_rows(int(max_position or 0), batches, claims, now)
        if rows:
            await self._dialect.insert_events(conn, rows)
        return results

    def _translated(self, exc: BaseException, *, run_id: str | None = None) -> StoreError:
        if isinstance(exc, StoreError):
            return exc
        err = self._dialect.translate(exc)
        if err is None:
            err = StoreError(f"{type(exc).__name__}: {exc}")
        if isinstance(err, Conflict) and run_id is not None:
            err = Conflict(f"run {run_id!r} already exists")
        return err


# -- shared by the SQLAlchemy path above and SQLite's direct write path (sqlite.py) -----------

MAX_POSITION = "SELECT max(position) FROM events"
SUMMARY_OF_RUN = (
    "UPDATE threads SET summary = :summary "
    "WHERE thread_id = (SELECT thread_id FROM runs WHERE run_id = :run_id)"
)
SET_SUMMARY = "UPDATE threads SET summary = :summary WHERE thread_id = :thread_id"
# A new run claims its thread: the row is inserted if absent (``thread_claim`` params),
# then, once the caller has read (and on PostgreSQL locked) its latest run, updated.
INSERT_THREAD = (
    "INSERT INTO threads (thread_id, agent, created_at, updated_at, run_count) "
    "VALUES (:thread_id, :agent, :now, :now, 0) ON CONFLICT (thread_id) DO NOTHING"
)
CLAIM_THREAD = (
    "UPDATE threads SET updated_at = :now, run_count = run_count + 1, latest_run_id = :run_id "
    "WHERE thread_id = :thread_id"
)


def thread_claim(run: NewRun, now: float) -> dict[str, Any]:
    return {"thread_id": run.thread_id, "agent": run.agent, "now": now, "run_id": run.run_id}


CLAIM = (
    "UPDATE runs SET event_count = event_count + ?, heartbeat_at = ? WHERE run_id = ? "
    "RETURNING thread_id, event_count, status"
)


def claimed(run_id: str, count: int, row: Sequence[Any] | None) -> tuple[str, int]:
    """The run's thread and first new seq from a ``CLAIM`` row; refuses unknown/closed runs."""
    if row is None:
        raise RunNotFound(run_id)
    if row[2] != RUNNING:
        raise RunClosed(f"run {run_id!r} is {row[2]}: a closed run takes no more events")
    return str(row[0]), int(row[1]) - count


def event_rows(
    position: int,
    batches: Sequence[tuple[str, Sequence[NewEvent]]],
    claims: Sequence[tuple[str, int]],
    now: float,
) -> tuple[list[EventRow], list[list[Appended]]]:
    """The rows to insert after ``position``, and what each batch was given."""
    rows: list[EventRow] = []
    results: list[list[Appended]] = []
    for (run_id, events), (thread_id, first_seq) in zip(batches, claims, strict=True):
        seqs = range(first_seq, first_seq + len(events))
        positions = range(position + 1, position + 1 + len(events))
        rows += [
            (at, thread_id, run_id, seq, kind, payload, now if when is None else when, origin)
            for at, seq, (payload, kind, origin, when) in zip(positions, seqs, events, strict=True)
        ]
        results.append(list(map(Appended._make, zip(seqs, positions, strict=True))))
        position += len(events)
    return rows, results


def status_values(
    status: str, outcome: str | None, error: str | None, violations: list[dict[str, object]] | None
) -> dict[str, Any]:
    """The run columns ``set_status`` writes."""
    if status not in STATUSES:
        raise InputError(f"unknown run status {status!r}")
    values: dict[str, Any] = {"status": status}
    if status in TERMINAL:
        values["finished_at"] = time.time()
    if outcome is not None:
        values["outcome"] = outcome
    if error is not None:
        values["error"] = error
    if violations is not None:
        values["violations"] = orjson.dumps(violations).decode()
    return values


def run_values(run: NewRun, now: float) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "agent": run.agent,
        "status": RUNNING,
        "parent_run_id": run.parent_run_id,
        "parent_seq": run.parent_seq,
        "parent_inferred": run.parent_inferred,
        "origin": run.origin,
        "created_at": now,
        "heartbeat_at": now,
        "owner": run.owner,
    }


def _event_columns() -> list[Any]:
    ev = schema.events
    return [
        ev.c.position,
        ev.c.thread_id,
        ev.c.run_id,
        ev.c.seq,
        ev.c.type,
        ev.c.payload,
        ev.c.recorded_at,
        ev.c.origin,
    ]


def _run_query(*, with_input: bool = True) -> Any:
    runs, inputs = schema.runs, schema.run_inputs
    if not with_input:
        return select(runs, null().label("input"))
    return select(runs, inputs.c.input).select_from(
        runs.outerjoin(inputs, inputs.c.run_id == runs.c.run_id)
    )


def new_run(values: dict[str, Any], posted: bytes | None) -> Run:
    return Run(
        run_id=values["run_id"],
        thread_id=values["thread_id"],
        agent=values["agent"],
        status=values["status"],
        input=posted,
        parent_run_id=values["parent_run_id"],
        parent_seq=values["parent_seq"],
        parent_inferred=values["parent_inferred"],
        origin=values["origin"],
        outcome=None,
        error=None,
        violations=[],
        event_count=0,
        created_at=values["created_at"],
        finished_at=None,
        heartbeat_at=values["heartbeat_at"],
        owner=values["owner"],
    )


def _run(row: Row[Any]) -> Run:
    m = row._mapping
    return Run(
        run_id=m["run_id"],
        thread_id=m["thread_id"],
        agent=m["agent"],
        status=m["status"],
        input=None if m["input"] is None else bytes(m["input"]),
        parent_run_id=m["parent_run_id"],
        parent_seq=m["parent_seq"],
        parent_inferred=bool(m["parent_inferred"]),
        origin=m["origin"],
        outcome=m["outcome"],
        error=m["error"],
        violations=orjson.loads(m["violations"]) if m["violations"] else [],
        event_count=int(m["event_count"]),
        created_at=float(m["created_at"]),
        finished_at=m["finished_at"],
        heartbeat_at=m["heartbeat_at"],
        owner=m["owner"],
    )


def _thread_query() -> Any:
    th, runs = schema.threads, schema.runs
    latest_status = (
        select(runs.c.status).where(runs.c.run_id == th.c.latest_run_id).scalar_subquery()
    )
    return select(th, latest_status.label("latest_status"))


def _filter_threads(query: Any, f: ThreadFilter) -> Any:
    th, runs = schema.threads, schema.runs
    if f.agent is not None:
        query = query.where(
            select(runs.c.run_id)
            .where(and_(runs.c.thread_id == th.c.thread_id, runs.c.agent == f.agent))
            .exists()
        )
    if f.status is not None:
        query = query.where(
            select(runs.c.status).where(runs.c.run_id == th.c.latest_run_id).scalar_subquery()
            == f.status
        )
    if f.since is not None:
        query = query.where(th.c.updated_at >= f.since)
    if f.until is not None:
        query = query.where(th.c.updated_at <= f.until)
    if f.text:
        pattern = (
            "%" + f.text.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        )
        query = query.where(func.lower(th.c.summary).like(pattern, escape="\\"))
    return query


def _thread(row: Row[Any]) -> Thread:
    m = row._mapping
    return Thread(
        thread_id=m["thread_id"],
        agent=m["agent"],
        created_at=float(m["created_at"]),
        updated_at=float(m["updated_at"]),
        run_count=int(m["run_count"]),
        latest_run_id=m["latest_run_id"],
        summary=m["summary"],
        latest_status=m["latest_status"],
    )


def _encode_cursor(updated_at: float, thread_id: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([updated_at, thread_id])).decode()


def _decode_cursor(cursor: str) -> tuple[float, str]:
    try:
        updated_at, thread_id = orjson.loads(base64.urlsafe_b64decode(cursor.encode()))
        return float(updated_at), str(thread_id)
    except Exception as exc:
        raise InputError(f"invalid cursor {cursor!r}") from exc
