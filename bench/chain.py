"""The hash chain's cost on the append path: ``EventStore.append`` with hashing on and off.

Two fresh stores side by side (SQLite files; PostgreSQL databases), the same batches
appended to each in turn. "Off" is the same store with the chain's hash function (SHA-256)
replaced by a constant for the duration of its timing (the ``hash`` column, the previous
hash read in the run's claim and the bytes each link hashes stay): what is left between the
two is computing SHA-256 over each event. Large batches show the per-event cost; the
proxy's batches are small (group commit of what arrived during one commit), so 8-event
batches are measured too.
"""

from __future__ import annotations

import contextlib
import functools
import time
import types
from collections.abc import Iterator

from bench.context import Context, store_url
from bench.report import Row, at_least
from bench.store import typed
from bench.workload import mixed_events
from recorder.store import EventStore, NewEvent, NewRun, open_store, writes

_CONSTANT = b"\x00" * 32
# SHA-256's stand-in while hashing is off: called as ``sha256(data).digest()``, it gives
# the constant, and both calls are C (``getattr(holder, "hashed", data)`` ignores ``data``).
_HASHED = types.SimpleNamespace(digest=_CONSTANT.__bytes__)
no_hashing = functools.partial(getattr, types.SimpleNamespace(hashed=_HASHED), "hashed")


@contextlib.contextmanager
def hashing_off() -> Iterator[None]:
    real = writes.chain.sha256
    writes.chain.sha256 = no_hashing  # type: ignore[assignment]
    try:
        yield
    finally:
        writes.chain.sha256 = real


async def _store(ctx: Context, kind: str, name: str) -> EventStore:
    if kind == "sqlite":
        return await open_store(
            store_url(str(ctx.workdir / f"{name}-{time.time_ns()}.db")), migrate=True
        )
    return await open_store(store_url(await ctx.pg.create(name)), migrate=True)


async def _append(store: EventStore, run_id: str, batches: list[list[NewEvent]]) -> float:
    await store.create_run(NewRun(run_id, "bench-thread", agent="bench"))
    started = time.perf_counter()
    for batch in batches:
        await store.append(run_id, batch)
    return time.perf_counter() - started


async def _measure(ctx: Context, kind: str, size: int) -> Row:
    label = "SQLite" if kind == "sqlite" else "PostgreSQL"
    row = Row(
        "chain",
        f"{label} append, hashing on vs off ({size}-event batches)",
        "ev/s",
        target=">= 0.9x",
        check=at_least(0.9),
    )
    if kind == "postgresql" and not await ctx.pg.available():
        row.skipped = ctx.pg.unavailable or "PostgreSQL unavailable"
        return row
    total = ctx.plan.append_batches * ctx.plan.batch_size
    events = typed(mixed_events(total, seed=5))
    batches = [events[i : i + size] for i in range(0, len(events), size)]
    if size < 100:  # small batches: as many commits as the large ones' events allow, fewer
        batches = batches[: max(50, len(batches) // 10)]
    count = sum(len(b) for b in batches)
    on, off = await _store(ctx, kind, "chain-on"), await _store(ctx, kind, "chain-off")
    try:
        for round_no in range(ctx.plan.rounds + 1):  # round 0 warms up, not counted
            hashed = await _append(on, f"on-{round_no}", batches)
            with hashing_off():
                plain = await _append(off, f"off-{round_no}", batches)
            if round_no:
                row.ours.append(count / hashed)
                row.base.append(count / plain)
        assert (await on.verify_chains(run_ids=["on-1"])).ok
    finally:
        await on.close()
        await off.close()
    row.note = f"{len(batches)} batches of {size} mixed events per round"
    return row


async def run(ctx: Context) -> list[Row]:
    return [
        await _measure(ctx, "sqlite", ctx.plan.batch_size),
        await _measure(ctx, "sqlite", 8),
        await _measure(ctx, "postgresql", ctx.plan.batch_size),
        await _measure(ctx, "postgresql", 8),
    ]
