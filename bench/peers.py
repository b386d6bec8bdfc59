"""Peers: the same conversation kept by LangGraph's checkpointers and by the recorder's store.

The conversation (seeded): each turn a user message (5-25 words), an assistant reply (10-50
words) and a state change (``turn``, ``topic``, a to-do appended, one marked done; the 30
latest to-dos are kept, ~1.5 KB of state).

- Ours: each turn is one AG-UI run, recorded as the proxy records a run whose answer ends
  with its last events: ``create_run`` with the RunAgentInput a client posts (the full
  history so far, the state), then its 8 events (RUN_STARTED, the reply as
  TEXT_MESSAGE_START, 3 CONTENT, END, a STATE_DELTA, RUN_FINISHED) appended with the run's
  close, carrying the thread's summary, in the same commit: that is the write timed.
  Then, as a recorder does behind every closed run (off its client's path), its
  checkpoints are built (``History.build_checkpoints``): timed apart, in a row of its
  own, and counted in the bytes. The state at an earlier turn is
  ``History(store).state(run_id)`` (the run with the checkpoint written when it closed,
  one query, as the API reads it); the history is ``list_runs(thread)``. The growth row
  compares our bytes after all turns with those after a tenth of them (whole inputs
  would grow with the square: about 100x).
- Theirs: each turn one ``aput`` of a checkpoint holding the channels ``messages`` (the whole
  list, as dicts: cheaper to serialize than LangChain message objects), ``todos``, ``turn``
  and ``topic``. A graph would also call ``aput_writes`` per step; it is left out, so their
  write figures are a best case. The state at an earlier turn is ``aget_tuple`` with that
  checkpoint's id; the history is ``alist(thread)``.

SQLite: separate fresh files, both ``journal_mode=WAL`` and ``synchronous=NORMAL`` (set on the
LangGraph connection too, which by default keeps SQLite's FULL). PostgreSQL: a fresh
database each. Bytes on disk: growth of the database (its pages, WAL included, or the
tables with their indexes and TOAST) over the empty schema, per turn. Reads: each seeded
turn is read by both sides, one right after the other, the first of them alternating
(``read_both``), so that drift on a shared machine lands on both alike.
"""

from __future__ import annotations

import contextlib
import random
import statistics
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiosqlite
import asyncpg
import orjson

from bench.context import Context, store_url
from bench.report import Row, at_least, at_most
from bench.workload import WORDS
from recorder.store import Closing, EventStore, NewEvent, NewRun, open_store
from recorder.timetravel import views
from recorder.timetravel.history import History

A = TypeVar("A")
B = TypeVar("B")

INSTALL = "pip install -r bench/requirements.txt"
MAX_TODOS = 30


@dataclass(slots=True)
class Conversation:
    thread_id: str
    inputs: list[bytes] = field(default_factory=list)  # the RunAgentInput of each turn
    events: list[list[NewEvent]] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    messages: list[list[dict[str, Any]]] = field(default_factory=list)  # after each turn
    states: list[dict[str, Any]] = field(default_factory=list)  # after each turn


def _words(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def _event(obj: dict[str, Any]) -> NewEvent:
    return NewEvent(orjson.dumps(obj), obj["type"])


def conversation(turns: int, seed: int, thread_id: str) -> Conversation:
    rng = random.Random(seed)
    talk = Conversation(thread_id)
    history: list[dict[str, Any]] = []
    state: dict[str, Any] = {"turn": 0, "topic": "start", "todos": []}
    texts: list[str] = []
    for turn in range(turns):
        run_id = f"run-{turn}"
        user = {"id": f"u{turn}", "role": "user", "content": _words(rng, 5, 25)}
        talk.inputs.append(
            orjson.dumps(
                {
                    "threadId": thread_id,
                    "runId": run_id,
                    "parentRunId": f"run-{turn - 1}" if turn else None,
                    "state": state,
                    "messages": [*history, user],
                    "tools": [],
                    "context": [],
                    "forwardedProps": {},
                }
            )
        )
        reply = _words(rng, 10, 50)
        cut1, cut2 = len(reply) // 3, 2 * len(reply) // 3
        todos = [*state["todos"], {"id": turn, "text": _words(rng, 3, 8), "done": False}]
        ops: list[dict[str, Any]] = [
            {"op": "replace", "path": "/turn", "value": turn + 1},
            {"op": "replace", "path": "/topic", "value": rng.choice(WORDS)},
            {"op": "add", "path": "/todos/-", "value": todos[-1]},
        ]
        if len(todos) > MAX_TODOS:
            todos = todos[1:]
            ops.append({"op": "remove", "path": "/todos/0"})
        done = rng.randrange(len(todos))
        todos[done] = {**todos[done], "done": True}
        ops.append({"op": "replace", "path": f"/todos/{done}/done", "value": True})
        state = {"turn": turn + 1, "topic": ops[1]["value"], "todos": todos}
        mid = f"a{turn}"
        talk.events.append(
            [
                _event({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}),
                _event({"type": "TEXT_MESSAGE_START", "messageId": mid, "role": "assistant"}),
                *(
                    _event({"type": "TEXT_MESSAGE_CONTENT", "messageId": mid, "delta": part})
                    for part in (reply[:cut1], reply[cut1:cut2], reply[cut2:])
                ),
                _event({"type": "TEXT_MESSAGE_END", "messageId": mid}),
                _event({"type": "STATE_DELTA", "delta": ops}),
                _event({"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id}),
            ]
        )
        history = [*history, user, {"id": mid, "role": "assistant", "content": reply}]
        texts.extend((user["content"] + "\n", reply))
        talk.summaries.append("".join(texts)[:20_000])
        talk.messages.append(history)
        talk.states.append(state)
    return talk


# -- ours ---------------------------------------------------------------------------------


async def write_ours(
    store: EventStore, talk: Conversation, size: Any = None
) -> tuple[float, float, int]:
    """Write every turn as the proxy does (create, events, close); then, as a recorder does
    behind each closed run, build its checkpoints. The seconds of the first part, of the
    second, and the bytes on disk after a tenth of the turns (0 without ``size``; the
    measurement is not timed)."""
    history = History(store)
    writing = building = 0.0
    tenth = 0
    for turn, (posted, events) in enumerate(zip(talk.inputs, talk.events, strict=True)):
        run_id = f"run-{turn}"
        parent = f"run-{turn - 1}" if turn else None
        started = time.perf_counter()
        await store.create_run(
            NewRun(run_id, talk.thread_id, agent="bench", input=posted, parent_run_id=parent)
        )
        close = Closing(run_id, "finished", "success", summary=talk.summaries[turn])
        await store.append_batches([(run_id, events)], [close])
        closed = time.perf_counter()
        await history.build_checkpoints(run_id)
        writing += closed - started
        building += time.perf_counter() - closed
        if size is not None and turn + 1 == len(talk.inputs) // 10:
            tenth = await size()
    return writing, building, tenth


async def read_ours(
    store: EventStore, talk: Conversation, turns: list[int]
) -> tuple[list[float], list[float]]:
    """Our reads, and beside each the decoding alone of what it returned: ``orjson.loads``
    of its messages and state written as JSON (the floor of any read that hands them over
    decoded, LangGraph's included)."""
    history = History(store)
    samples = []
    floors = []
    for turn in turns:
        started = time.perf_counter()
        _run, at = await history.state(f"run-{turn}")
        samples.append((time.perf_counter() - started) * 1000)
        _same(turn, talk, at.messages, at.state)
        written = orjson.dumps({"messages": at.messages, "state": at.state})
        started = time.perf_counter()
        orjson.loads(written)
        floors.append((time.perf_counter() - started) * 1000)
    return samples, floors


async def serve_ours(store: EventStore, talk: Conversation, turns: list[int]) -> list[float]:
    """The same reads as the API answers them: ``GET /runs/{id}/state``'s JSON body."""
    history = History(store)
    samples = []
    for turn in turns:
        started = time.perf_counter()
        body = await views.run_state_body(store, history, f"run-{turn}")
        samples.append((time.perf_counter() - started) * 1000)
        served = orjson.loads(body)
        _same(turn, talk, served["messages"], served["state"])
    return samples


async def list_ours(store: EventStore, talk: Conversation) -> float:
    started = time.perf_counter()
    runs = await store.list_runs(talk.thread_id)
    elapsed = time.perf_counter() - started
    if len(runs) != len(talk.inputs):
        raise RuntimeError(f"ours: {len(runs)} runs listed of {len(talk.inputs)}")
    return elapsed * 1000


# -- theirs -------------------------------------------------------------------------------


async def write_theirs(saver: Any, talk: Conversation) -> tuple[float, list[dict[str, Any]]]:
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.base.id import uuid6

    config: dict[str, Any] = {"configurable": {"thread_id": talk.thread_id, "checkpoint_ns": ""}}
    versions: dict[str, Any] = {}
    configs = []
    started = time.perf_counter()
    for turn, (messages, state) in enumerate(zip(talk.messages, talk.states, strict=True)):
        values = {"messages": messages, **state}
        changed = {}
        for channel in values:
            versions[channel] = changed[channel] = saver.get_next_version(
                versions.get(channel), None
            )
        checkpoint = empty_checkpoint()
        checkpoint["id"] = str(uuid6(clock_seq=turn))
        checkpoint["channel_values"] = values
        checkpoint["channel_versions"] = dict(versions)
        checkpoint["versions_seen"] = {"agent": dict(versions)}
        checkpoint["updated_channels"] = list(values)
        metadata = {"source": "loop", "step": turn, "parents": {}}
        config = await saver.aput(config, checkpoint, metadata, changed)
        configs.append(config)
    return time.perf_counter() - started, configs


async def read_theirs(
    saver: Any, talk: Conversation, configs: list[dict[str, Any]], turns: list[int]
) -> list[float]:
    samples = []
    for turn in turns:
        started = time.perf_counter()
        found = await saver.aget_tuple(configs[turn])
        samples.append((time.perf_counter() - started) * 1000)
        values = found.checkpoint["channel_values"]
        state = {k: values[k] for k in ("turn", "topic", "todos")}
        _same(turn, talk, values["messages"], state)
    return samples


async def serve_theirs(
    saver: Any, talk: Conversation, configs: list[dict[str, Any]], turns: list[int]
) -> list[float]:
    """LangGraph's read and what any service answering with it adds: its messages and
    state written as a JSON body."""
    samples = []
    for turn in turns:
        started = time.perf_counter()
        values = (await saver.aget_tuple(configs[turn])).checkpoint["channel_values"]
        state = {k: values[k] for k in ("turn", "topic", "todos")}
        body = orjson.dumps({"messages": values["messages"], "state": state})
        samples.append((time.perf_counter() - started) * 1000)
        served = orjson.loads(body)
        _same(turn, talk, served["messages"], served["state"])
    return samples


async def list_theirs(saver: Any, talk: Conversation) -> float:
    started = time.perf_counter()
    listed = [t async for t in saver.alist({"configurable": {"thread_id": talk.thread_id}})]
    elapsed = time.perf_counter() - started
    if len(listed) != len(talk.inputs):
        raise RuntimeError(f"theirs: {len(listed)} checkpoints listed of {len(talk.inputs)}")
    return elapsed * 1000


def _same(turn: int, talk: Conversation, messages: list[dict[str, Any]], state: Any) -> None:
    """Both sides must give back the conversation as it was at that turn."""
    seen = [(m.get("id"), m.get("role"), m.get("content")) for m in messages]
    want = [(m["id"], m["role"], m["content"]) for m in talk.messages[turn]]
    if seen != want or state != talk.states[turn]:
        raise RuntimeError(f"turn {turn}: the state read back differs from the conversation")


async def read_both(
    store: EventStore,
    saver: Any,
    talk: Conversation,
    configs: list[dict[str, Any]],
    turns: list[int],
) -> tuple[list[float], list[float], list[float], list[float], list[float]]:
    """Each turn read by both sides, one right after the other (who goes first alternates),
    then served by both the same way: drift on a shared machine lands on both alike, where
    two batches of reads one after the other let a burst of load land on one side. Ours,
    their decoding floor, theirs; ours served, theirs served."""
    ours: list[float] = []
    floors: list[float] = []
    theirs: list[float] = []
    for k, turn in enumerate(turns):
        (samples, floor), other = await _in_turn(
            k, read_ours(store, talk, [turn]), read_theirs(saver, talk, configs, [turn])
        )
        ours += samples
        floors += floor
        theirs += other
    our_served: list[float] = []
    their_served: list[float] = []
    for k, turn in enumerate(turns):
        mine, other = await _in_turn(
            k, serve_ours(store, talk, [turn]), serve_theirs(saver, talk, configs, [turn])
        )
        our_served += mine
        their_served += other
    return ours, floors, theirs, our_served, their_served


async def _in_turn(k: int, first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Both awaited, one right after the other: ``first`` first for an even ``k``."""
    if k % 2:
        b = await second
        return await first, b
    a = await first
    return a, await second


# -- databases ----------------------------------------------------------------------------


@dataclass(slots=True)
class Side:
    size: Any  # async () -> bytes on disk
    store: Any  # EventStore or saver


@contextlib.asynccontextmanager
async def sqlite_sides(ctx: Context, stamp: str) -> AsyncIterator[tuple[Side, Side]]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    ours_path = str(ctx.workdir / f"peers-ours-{stamp}.db")
    theirs_path = str(ctx.workdir / f"peers-langgraph-{stamp}.db")
    store = await open_store(store_url(ours_path), migrate=True)
    conn = await aiosqlite.connect(theirs_path)
    try:
        saver = AsyncSqliteSaver(conn)
        await saver.setup()
        await conn.execute("PRAGMA synchronous=NORMAL")

        async def ours_size() -> int:
            return await _sqlite_size(ours_path)

        async def theirs_size() -> int:
            return await _sqlite_size(theirs_path)

        yield Side(ours_size, store), Side(theirs_size, saver)
    finally:
        await conn.close()
        await store.close()


async def _sqlite_size(path: str) -> int:
    # The database's pages as a reader sees them (pages still in the WAL included): the
    # files themselves lag behind while a store holds the database open.
    async with aiosqlite.connect(path) as conn:
        await conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        async with conn.execute("PRAGMA page_count") as cursor:
            pages = (await cursor.fetchone() or (0,))[0]
        async with conn.execute("PRAGMA page_size") as cursor:
            page_size = (await cursor.fetchone() or (0,))[0]
    return int(pages) * int(page_size)


@contextlib.asynccontextmanager
async def postgres_sides(ctx: Context, stamp: str) -> AsyncIterator[tuple[Side, Side]]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    ours_dsn = await ctx.pg.create("peers_ours")
    theirs_dsn = await ctx.pg.create("peers_langgraph")
    store = await open_store(store_url(ours_dsn), migrate=True)
    try:
        async with AsyncPostgresSaver.from_conn_string(theirs_dsn) as saver:
            await saver.setup()

            async def ours_size() -> int:
                return await _pg_size(ours_dsn)

            async def theirs_size() -> int:
                return await _pg_size(theirs_dsn)

            yield Side(ours_size, store), Side(theirs_size, saver)
    finally:
        await store.close()


async def _pg_size(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        size = await conn.fetchval(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind = 'r' AND n.nspname = 'public'"
        )
    finally:
        await conn.close()
    return int(size)


# -- the benchmark ------------------------------------------------------------------------


def _rows(db: str) -> list[Row]:
    label = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}[db]
    return [
        Row("peers", f"{label} write, ours vs LangGraph", "turns/s", [], [], ">= 2x", at_least(2)),
        Row("peers", f"{label} state at an earlier turn", "ms", [], [], "<= 0.5x", at_most(0.5)),
        Row("peers", f"{label} state at an earlier turn: its JSON decoded alone (context)", "ms"),
        Row("peers", f"{label} state at an earlier turn, served as JSON (context)", "ms"),
        Row("peers", f"{label} bytes on disk per turn", "B/turn", [], [], "<= 0.1x", at_most(0.1)),
        Row("peers", f"{label} list the history (context)", "ms"),
        Row(
            "peers",
            f"{label} bytes on disk, ours: all turns vs a tenth of them",
            "B",
            [],
            [],
            "<= 11x",
            lambda _ours, _base, ratio: ratio <= 11,
        ),
        Row("peers", f"{label} checkpoints built per closed turn (context)", "ms"),
    ]


def missing(db: str) -> str | None:
    module = {"sqlite": "sqlite", "postgresql": "postgres"}[db]
    try:
        __import__(f"langgraph.checkpoint.{module}.aio")
    except ImportError as exc:
        return f"LangGraph's {db} checkpointer is not importable ({exc}); {INSTALL}"
    return None


async def measure(ctx: Context, db: str) -> list[Row]:
    rows = _rows(db)
    why = missing(db)
    if why is None and db == "postgresql" and not await ctx.pg.available():
        why = ctx.pg.unavailable
    if why is not None:
        for row in rows:
            row.skipped = why
        return rows
    turns = ctx.plan.peer_turns
    sides = sqlite_sides if db == "sqlite" else postgres_sides
    for round_no in range(ctx.plan.peer_rounds):
        talk = conversation(turns, seed=6 + round_no, thread_id=f"peers-{round_no}")
        rng = random.Random(60 + round_no)
        points = [rng.randrange(turns - 1) for _ in range(ctx.plan.peer_reads)]
        async with sides(ctx, f"{db}-{round_no}-{time.time_ns()}") as (ours, theirs):
            empty = (await ours.size(), await theirs.size())
            our_time, our_build, tenth = await write_ours(ours.store, talk, ours.size)
            their_time, configs = await write_theirs(theirs.store, talk)
            grown = (await ours.size() - empty[0], await theirs.size() - empty[1])
            reads = await read_both(ours.store, theirs.store, talk, configs, points)
            our_reads, decoding, their_reads, our_served, their_served = reads
            our_list = await list_ours(ours.store, talk)
            their_list = await list_theirs(theirs.store, talk)
        pairs = [
            (turns / our_time, turns / their_time),
            (statistics.median(our_reads), statistics.median(their_reads)),
            (statistics.median(decoding), statistics.median(their_reads)),
            (statistics.median(our_served), statistics.median(their_served)),
            (grown[0] / turns, grown[1] / turns),
            (our_list, their_list),
            (grown[0], tenth - empty[0]),
            (our_build / turns * 1000, 0.0),
        ]
        for row, (mine, other) in zip(rows, pairs, strict=True):
            row.ours.append(mine)
            if other:
                row.base.append(other)
    rows[0].note = (
        f"a {turns:,}-turn conversation per round, {ctx.plan.peer_rounds} rounds; state read at "
        f"{ctx.plan.peer_reads} seeded earlier turns (median), each by both sides in turn"
    )
    rows[2].note = (
        "orjson.loads of the messages and state each read returned, written as JSON, timed "
        "alone; baseline: LangGraph's whole read. Its ratio is the least any read handing "
        "them over decoded can have"
    )
    rows[3].note = (
        "ours: the body GET /runs/{id}/state answers with (the checkpoint's messages written "
        "as stored, never decoded); baseline: LangGraph's read, then its messages and state "
        "written with orjson.dumps, as a service answering with them must. Both bodies are "
        "decoded and checked after the clock stops"
    )
    return rows


async def run(ctx: Context) -> list[Row]:
    return [*await measure(ctx, "sqlite"), *await measure(ctx, "postgresql")]
