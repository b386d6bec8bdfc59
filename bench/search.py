"""Search: queries over a large database, and what indexing in the background costs the proxy.

The database is made with direct inserts (runs, events, and the documents the indexer would
derive: ``EventStore.index_run``), so a full run's 10,000 runs and 2 M events take a minute
rather than the hours their recording would. Queries go through ``EventStore.search``, the
API's own path; the baseline beside them is listing a page of threads, the cheapest read
the API has. Indexing on vs off: the same proxy workload as ``telemetry``, on two recorders
that differ only in ``search_index``. The index's size is ``search_docs`` with its indexes
(and SQLite's FTS5 tables) over the log's (events and posted inputs).
"""

from __future__ import annotations

import itertools
import random
import sqlite3
import statistics
import time

import asyncpg

from bench.client import StreamError, new_client, read_stream, run_input, settled
from bench.context import Context, store_url
from bench.report import Row, at_least
from recorder.store import EventStore, NewRun, SearchDoc, SearchFilter, open_store

# A vocabulary with natural text's skew (Zipf, s = 1.07): a few words are everywhere, most
# are rare. Queries ask for words of middling frequency (ranks QUERY_RANKS), as "refund" is.
VOCABULARY = [f"w{n}x" for n in range(20_000)]
CUMULATIVE = list(itertools.accumulate(1 / (rank + 1) ** 1.07 for rank in range(len(VOCABULARY))))
QUERY_RANKS = (20, 2000)
AGENTS = ("support", "billing", "travel", "sales")
EVENTS_PER_RUN = 200
DOCS_PER_RUN = 8
QUERIES = 30


def sentence(rng: random.Random, n: int = 24) -> str:
    return " ".join(rng.choices(VOCABULARY, cum_weights=CUMULATIVE, k=n))


def query_word(rng: random.Random) -> str:
    return VOCABULARY[rng.randrange(*QUERY_RANKS)]


async def build(store: EventStore, url: str, runs: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    start = time.time() - runs * 60
    for i in range(runs):
        await store.create_run(
            NewRun(f"r{i}", f"t{i // 2}", AGENTS[i % 4], b"{}", created_at=start + i * 60)
        )
    rows: list[tuple[object, ...]] = []
    position = 0
    for i in range(runs):
        if len(rows) >= 100_000:
            await insert_events(url, rows)
            rows = []
        for seq in range(EVENTS_PER_RUN):
            position += 1
            payload = (
                b'{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"'
                + (sentence(rng, 4).encode())
                + b'"}'
            )
            rows.append(
                (
                    position,
                    f"t{i // 2}",
                    f"r{i}",
                    seq,
                    "TEXT_MESSAGE_CONTENT",
                    payload,
                    start + i * 60,
                    "upstream",
                )
            )
    await insert_events(url, rows)
    for i in range(runs):
        at = start + i * 60
        docs = [
            SearchDoc(
                f"t{i // 2}",
                f"r{i}",
                d * 25,
                d * 25 + 24,
                ("message", "tool_call", "reasoning", "input")[d % 4],
                sentence(rng),
                at + d,
                AGENTS[i % 4],
                tool_name="refund_order" if d % 4 == 1 else None,
            )
            for d in range(DOCS_PER_RUN)
        ]
        await store.index_run(f"r{i}", f"t{i // 2}", docs)


async def insert_events(url: str, rows: list[tuple[object, ...]]) -> None:
    columns = ("position", "thread_id", "run_id", "seq", "type", "payload", "recorded_at", "origin")
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.split("///", 1)[1])
        conn.execute("DROP TRIGGER IF EXISTS events_no_update")
        with conn:
            conn.executemany(
                f"INSERT INTO events ({', '.join(columns)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
        conn.close()
        return
    conn2 = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        await conn2.copy_records_to_table("events", records=rows, columns=columns)
    finally:
        await conn2.close()


async def index_fraction(url: str) -> float:
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.split("///", 1)[1])
        try:
            sizes = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))
        finally:
            conn.close()
        index = sum(
            v
            for k, v in sizes.items()
            if k.startswith(("search", "ix_search", "sqlite_autoindex_search"))
        )
        log = sum(
            v
            for k, v in sizes.items()
            if k in ("events", "run_inputs", "input_chunks", "sqlite_autoindex_events_1")
        )
        return index / log
    conn2 = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        index = await conn2.fetchval(
            "SELECT pg_total_relation_size('search_docs') + pg_total_relation_size('search_runs')"
        )
        log = await conn2.fetchval(
            "SELECT pg_total_relation_size('events') + pg_total_relation_size('run_inputs') "
            "+ coalesce(pg_total_relation_size(to_regclass('input_chunks')), 0)"
        )
    finally:
        await conn2.close()
    return float(index) / float(log)


async def latency(
    store: EventStore, filters: list[SearchFilter]
) -> tuple[list[float], list[float]]:
    ours, base = [], []
    for f in filters:
        started = time.perf_counter()
        await store.search(f, limit=20)
        ours.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        await store.list_threads(limit=20)
        base.append((time.perf_counter() - started) * 1000)
    return ours, base


async def queries_on(ctx: Context, db: str, name: str, runs: int) -> list[Row]:
    url = store_url(
        await ctx.pg.create("search") if db == "postgresql" else str(ctx.workdir / "search.db")
    )
    store = await open_store(url, migrate=True)
    try:
        await build(store, url, runs)
        rng = random.Random(3)
        now = time.time()
        one_word = [SearchFilter(text=query_word(rng)) for _ in range(QUERIES)]
        filtered = [
            SearchFilter(
                text=query_word(rng),
                agent=rng.choice(AGENTS),
                kind="tool_call",
                since=now - runs * 60 * 0.02,
                until=now,
            )
            for _ in range(QUERIES)
        ]
        await latency(store, one_word[:3])  # warm-up
        ours1, base1 = [], []
        ours2, base2 = [], []
        for _ in range(ctx.plan.rounds):
            o, b = await latency(store, one_word)
            ours1.append(statistics.median(o))
            base1.append(statistics.median(b))
            o, b = await latency(store, filtered)
            ours2.append(statistics.median(o))
            base2.append(statistics.median(b))
        fraction = await index_fraction(url)
    finally:
        await store.close()
    scale = f"{runs:,} runs / {runs * EVENTS_PER_RUN:,} events / {runs * DOCS_PER_RUN:,} docs"
    return [
        Row(
            "search",
            f"{name}: one-word query vs a page of threads",
            "ms",
            ours1,
            base1,
            "<= 50 ms",
            lambda ours, _b, _r: ours <= 50,
            note=f"{scale}; median of {QUERIES} queries per round, 20 hits",
        ),
        Row(
            "search",
            f"{name}: agent + kind + time range vs a page of threads",
            "ms",
            ours2,
            base2,
            "<= 20 ms",
            lambda ours, _b, _r: ours <= 20,
            note=f"{scale}; the last 2% of the time range",
        ),
        Row(
            "search",
            f"{name}: index size vs the log's",
            "x",
            [fraction],
            [1.0],
            "-",
            None,
            note="search_docs, its indexes and text index over events and posted inputs",
        ),
    ]


async def proxy_cost(ctx: Context) -> Row:
    started = await ctx.paired({"indexing": [], "noindex": ["--no-search-index"]})
    paths = {"on": started["indexing"], "off": started["noindex"]}
    expected = ctx.plan.proxy_events
    rate: dict[str, list[float]] = {"on": [], "off": []}
    async with new_client() as client:

        async def throughput(path: str) -> float:
            frames, _first, elapsed, run_id = await read_stream(
                client, "POST", paths[path] + "/agents/up", run_input()
            )
            if frames < expected:
                raise StreamError(f"{path}: {frames} frames of {expected}")
            await settled(client, paths[path], run_id)
            return expected / elapsed

        for path in paths:
            await throughput(path)
        for _ in range(ctx.plan.rounds):
            for path in paths:
                rate[path].append(statistics.median([await throughput(path) for _ in range(3)]))
    return Row(
        "search",
        "proxy throughput, indexing on vs off",
        "ev/s",
        rate["on"],
        rate["off"],
        ">= 0.9x",
        at_least(0.9),
        note=f"{expected:,} events per request; each closed run indexed in the background",
    )


async def run(ctx: Context) -> list[Row]:
    runs = 200 if ctx.plan.quick else 10_000
    rows = await queries_on(ctx, "sqlite", "SQLite", runs)
    if await ctx.pg.available():
        rows += await queries_on(ctx, "postgresql", "PostgreSQL", runs)
    rows.append(await proxy_cost(ctx))
    return rows
