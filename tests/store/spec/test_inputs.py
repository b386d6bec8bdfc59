"""Posted inputs kept as chunks: every way out gives the exact bytes that were posted.

A property over random histories of one conversation: messages appended, edited and
deleted, the state changed, forks from earlier runs (into the thread or a new one), the
input written compactly, spaced or indented, and now and then bytes that are not JSON at
all. Each run's input must come back byte for byte from ``get_run``, ``list_runs`` with
inputs, ``lineage``, and an export imported into another store; and the store must keep
less than the inputs' total where they share their history.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recorder.store import EventStore, NewRun, deltas, inputs, open_store, reads
from recorder.store.deltas import CHAIN, delta, operations, patch
from recorder.store.inputs import INLINE_BELOW, PACKED, build, leaves, pack, reassemble
from recorder.timetravel.transfer import export_lines, import_lines
from tests.conftest import raw_sql, stored_chunks
from tests.store.spec.conftest import MEMORY, shared_database

TEXT = st.text(st.characters(blacklist_categories=["Cs"]), min_size=0, max_size=120)
STEP = st.one_of(
    st.tuples(st.just("append"), TEXT),
    st.tuples(st.just("edit"), st.integers(0, 10_000), TEXT),
    st.tuples(st.just("delete"), st.integers(0, 10_000)),
    st.tuples(
        st.just("state"),
        st.dictionaries(st.text(max_size=8), st.integers(-(2**53), 2**53), max_size=4),
    ),
    st.tuples(st.just("fork"), st.integers(0, 10_000), st.booleans()),
    st.tuples(st.just("style"), st.sampled_from(["compact", "spaced", "indented"])),
    st.tuples(st.just("raw"), st.binary(min_size=0, max_size=3000)),
)


def render(body: dict[str, Any], style: str) -> bytes:
    if style == "compact":
        return orjson.dumps(body)
    if style == "spaced":
        return json.dumps(body).encode()
    return json.dumps(body, indent=2, ensure_ascii=False).encode()


def histories(steps: list[Any], thread: str) -> list[tuple[NewRun, bytes]]:
    """The runs a client of this history posts, each with its parent, in order."""
    # A long shared history, so most inputs are kept as trees rather than whole.
    messages: list[dict[str, Any]] = [
        {"id": f"m{i}", "role": "user", "content": f"message {i} " + "word " * 40}
        for i in range(12)
    ]
    state: dict[str, Any] = {"turn": 0}
    style = "compact"
    runs: list[tuple[NewRun, bytes]] = []
    snapshots: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []
    for number, step in enumerate(steps):
        kind = step[0]
        thread_id, parent = thread, runs[-1][0].run_id if runs else None
        if kind == "append":
            messages = [*messages, {"id": f"n{number}", "role": "user", "content": step[1]}]
        elif kind == "edit" and messages:
            at = step[1] % len(messages)
            messages = [*messages[:at], {**messages[at], "content": step[2]}, *messages[at + 1 :]]
        elif kind == "delete" and messages:
            at = step[1] % len(messages)
            messages = messages[:at] + messages[at + 1 :]
        elif kind == "state":
            state = {**state, **step[1]}
        elif kind == "fork" and snapshots:
            at = step[1] % len(snapshots)
            messages, state = snapshots[at]
            parent = runs[at][0].run_id
            if step[2]:
                thread_id = f"{thread}-fork{number}"
        elif kind == "style":
            style = step[1]
        run_id = f"{thread}-r{number}"
        body = {
            "threadId": thread_id,
            "runId": run_id,
            "parentRunId": parent,
            "state": state,
            "messages": messages,
            "tools": [],
            "context": [],
            "forwardedProps": {},
        }
        posted = step[1] + render(body, style) if kind == "raw" else render(body, style)
        runs.append(
            (NewRun(run_id, thread_id, agent="a", input=posted, parent_run_id=parent), posted)
        )
        snapshots.append((messages, state))
    return runs


async def check_history(store: EventStore, url: str, steps: list[Any]) -> None:
    thread = f"t{uuid.uuid4().hex[:10]}"
    runs = histories(steps, thread)
    for run, _posted in runs:
        await store.create_run(run)
    want = {run.run_id: posted for run, posted in runs}
    for run_id, posted in want.items():
        assert (await store.get_run(run_id)).input == posted
    threads = dict.fromkeys(run.thread_id for run, _ in runs)
    for thread_id in threads:
        for listed in await store.list_runs(thread_id, inputs=True):
            assert listed.input == want[listed.run_id]
    last = runs[-1][0].run_id
    for link in await store.lineage(last):
        assert link.input == want[link.run_id]
    # Another store on the database (which has read nothing into its cache of chunks)
    # rebuilds them from the tables alone.
    if shared_database(url):
        other = await open_store(url)
        try:
            for run_id, posted in want.items():
                assert (await other.get_run(run_id)).input == posted
            for link in await other.lineage(last):
                assert link.input == want[link.run_id]
        finally:
            await other.close()
    # Export, import into a store of its own: the same bytes again. (An import takes
    # only inputs that are JSON objects; bytes of any kind are the store's part above.)
    if any(step[0] == "raw" for step in steps):
        return
    lines = [line async for line in export_lines(store, list(threads))]
    copy = await open_store(MEMORY, migrate=True)
    try:
        await import_lines(copy, lines)
        for run_id, posted in want.items():
            assert (await copy.get_run(run_id)).input == posted
    finally:
        await copy.close()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(STEP, min_size=1, max_size=12))
async def test_inputs_come_back_byte_for_byte(
    store: EventStore, spec_url: str, steps: list[Any]
) -> None:
    await check_history(store, spec_url, steps)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=5000) | TEXT.map(str.encode))
def test_a_tree_rebuilds_any_bytes(data: bytes) -> None:
    tree = build(data)
    assert reassemble(tree.root, tree.chunks) == data
    assert b"".join(leaves(data)) == data


def test_a_grown_history_shares_all_but_its_end() -> None:
    """Appending a message to a long history adds a few chunks, not the history again."""
    rng = random.Random(7)
    words = ["alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "seven"]
    history = [
        {"id": f"m{i}", "role": "user", "content": " ".join(rng.choices(words, k=30))}
        for i in range(2000)
    ]
    before = build(orjson.dumps({"runId": "r1", "messages": history}))
    history.append({"id": "new", "role": "assistant", "content": "a reply"})
    after = build(orjson.dumps({"runId": "r2", "messages": history}))
    new = set(after.chunks) - set(before.chunks)
    assert len(after.chunks) > 400
    assert len(new) <= 16
    assert sum(len(after.chunks[key].data) for key in new) < 3000


@pytest.mark.parametrize("budget", [64 * 1024 * 1024, 200_000])
def test_trees_sharing_nodes_join_from_one_cache_each_as_it_was(budget: int) -> None:
    """The cache keeps each joined node's spans for the next tree that shares it: trees
    read in any order, twice, each join to their own bytes; where the cache starts over
    (the small budget) a tree it no longer holds whole is None, never other bytes."""
    rng = random.Random(11)
    words = ["alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "seven"]
    history: list[dict[str, Any]] = []
    trees: list[tuple[bytes, inputs.InputTree]] = []
    previous = None
    for turn in range(60):
        for _ in range(rng.randint(1, 40)):
            content = " ".join(rng.choices(words, k=rng.randint(3, 60)))
            history.append({"id": f"m{len(history)}", "content": content})
        if turn % 7 == 3:  # an edit inside: the trees part there, and share again after
            history[rng.randrange(len(history))]["content"] = "edited"
        data = orjson.dumps({"turn": turn, "messages": history})
        previous = build(data, previous)
        trees.append((data, previous))
    cache = inputs.ChunkCache(budget)
    order = [*range(len(trees)), *range(len(trees))]
    rng.shuffle(order)
    joined = 0
    for at in order:
        data, tree = trees[at]
        if cache.get(tree.root) is None:
            cache.put(tree.chunks.values())
        found = reads._cached(tree.root, cache)
        assert found is None or found == data
        joined += found is not None
    if budget > 1_000_000:
        assert joined == len(order)
    else:  # it did start over, and still joined trees whole between
        assert 0 < joined < len(order)


async def test_a_long_thread_grows_with_its_new_content(store: EventStore) -> None:
    """What a thread of growing inputs keeps grows with its turns, not their square."""
    history: list[dict[str, Any]] = []
    total = 0
    kept: list[int] = []
    for turn in range(160):
        history.append({"id": f"u{turn}", "role": "user", "content": f"turn {turn} " * 20})
        posted = orjson.dumps({"threadId": "long", "runId": f"r{turn}", "messages": history})
        total += len(posted)
        await store.create_run(NewRun(f"r{turn}", "long", input=posted))
        if turn in (79, 159):
            kept.append(await _kept_input_bytes(store))
    assert len(posted) > 20 * INLINE_BELOW
    # Twice the turns: about twice the bytes (whole inputs would take four times).
    assert kept[1] < 2.5 * kept[0]
    assert kept[1] < total / 8
    assert (await store.get_run("r159")).input == posted


async def _kept_input_bytes(store: EventStore) -> int:
    # The bytes of chunks and whole inputs, read through a second path: the export
    # carries inputs whole, so it is no witness; the tables are.
    from recorder.store.sql import SqlStore
    from recorder.store.statements import Fetch

    assert isinstance(store, SqlStore)

    def body() -> Any:
        rows = yield Fetch("SELECT sum(length(data)) FROM input_chunks"), ()
        whole = yield Fetch("SELECT sum(length(input)) FROM run_inputs"), ()
        return int(rows[0][0] or 0) + int(whole[0][0] or 0)

    kept: int = await store.database.read(body)
    return kept


async def test_runs_sharing_chunks_created_at_once_all_land_whole(
    store: EventStore, spec_url: str
) -> None:
    """Concurrent transactions inserting the same new chunks wait on each other in one
    order (no deadlock, no lost chunk): every input comes back whole."""
    history = [{"id": f"m{i}", "role": "user", "content": f"shared {i} " * 12} for i in range(300)]

    def posted(n: int) -> bytes:
        extra = {"id": f"own{n}", "role": "user", "content": f"only in {n}"}
        return orjson.dumps({"threadId": f"c{n}", "runId": f"c{n}", "messages": [*history, extra]})

    await asyncio.gather(
        *(store.create_run(NewRun(f"c{n}", f"c{n}", input=posted(n))) for n in range(12))
    )
    for n in range(12):
        assert (await store.get_run(f"c{n}")).input == posted(n)
    if shared_database(spec_url):  # from the tables alone, not this store's cache
        other = await open_store(spec_url)
        try:
            for n in range(12):
                assert (await other.get_run(f"c{n}")).input == posted(n)
        finally:
            await other.close()


def _related(seed: int, size: int) -> tuple[bytes, bytes]:
    """Two inputs alike as a parent's and its child's are: the second the first with
    stretches changed, moved, inserted and deleted (of text that repeats, as chat does)."""
    rng = random.Random(seed)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"river", b"stone", b"},{", b'"id":']
    first = b" ".join(rng.choice(words) for _ in range(size))
    second = bytearray(first)
    for _ in range(rng.randint(0, 6)):
        at = rng.randrange(len(second) + 1)
        kind = rng.randrange(4)
        if kind == 0:
            second[at:at] = b" ".join(rng.choice(words) for _ in range(rng.randint(1, 80)))
        elif kind == 1:
            del second[at : at + rng.randint(1, 400)]
        elif kind == 2:
            second[at : at + 10] = bytes(rng.randrange(256) for _ in range(rng.randint(0, 20)))
        else:
            piece = bytes(second[at : at + rng.randint(1, 300)])
            second[rng.randrange(len(second) + 1) : 0] = piece
    return first, bytes(second)


# Pairs of inputs: related as a parent's and its child's, any two, and one grown by another.
PAIRS = st.builds(
    lambda seed, size, raw: [_related(seed, size), raw, (raw[0], raw[0] + raw[1])],
    st.integers(0, 2**32),
    st.integers(0, 3000),
    st.tuples(st.binary(max_size=2000), st.binary(max_size=2000)),
)


@settings(max_examples=300, deadline=None)
@given(pairs=PAIRS)
def test_a_delta_rebuilds_any_bytes_from_any_base(pairs: list[tuple[bytes, bytes]]) -> None:
    for base, data in pairs:
        for moves in (False, True):
            changes = delta(base, data, moves=moves)
            if changes is not None:
                assert patch(base, changes) == data


@settings(max_examples=300, deadline=None)
@given(pairs=PAIRS)
def test_a_tree_built_after_another_is_the_tree_built_alone(
    pairs: list[tuple[bytes, bytes]],
) -> None:
    """Taking the leaves an earlier tree shares changes nothing: same cuts, same root, same
    chunks, the same leaves compressed."""
    for base, data in pairs:
        alone = pack(build(data))
        after = pack(build(data, pack(build(base))))
        assert after.root == alone.root
        assert [leaf.hash for leaf in after.leaves] == [leaf.hash for leaf in alone.leaves]
        assert after.levels == alone.levels  # every node, level by level
        assert set(after.chunks) == set(alone.chunks)
        assert after.packed == alone.packed
        assert reassemble(after.root, after.chunks) == data
        # A tree built after one that was itself built after another: the same again.
        again = pack(build(base, after))
        assert again.levels == pack(build(base)).levels
        assert set(again.chunks) == set(build(base).chunks)


def _checkpoint_like(messages: int, state: int) -> bytes:
    """Bytes laid out as a checkpoint is: messages, their index, the rest."""
    rng = random.Random(5)
    words = ["alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "seven"]
    listed = [
        {"id": f"m{i}", "role": "assistant", "content": " ".join(rng.choices(words, k=40))}
        for i in range(messages)
    ]
    index = [{"o": i * 300, "id": f"m{i}"} for i in range(messages)]
    rest = {"version": 3, "state": {"turn": state, "todos": [f"t{n}" for n in range(30)]}}
    return b"\n".join(map(orjson.dumps, (listed, index, rest)))


def test_the_next_checkpoint_cuts_and_hashes_only_what_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A checkpoint of the same run a few messages on shares its messages and their index
    with the one before: built after it, only the leaves around the changes are hashed
    (the messages' end, the index's end, the rest), not the thousands it shares."""
    hashed: list[int] = []
    real = inputs._hash
    monkeypatch.setattr(
        inputs, "_hash", lambda level, data: hashed.append(level) or real(level, data)
    )
    before = build(_checkpoint_like(3000, 1))
    grown = _checkpoint_like(3003, 2)
    hashed.clear()
    alone = build(grown)
    leaves_alone = hashed.count(0)
    nodes_alone = len(hashed) - leaves_alone
    hashed.clear()
    after = build(grown, before)
    assert after.root == alone.root
    assert leaves_alone > 1000
    assert hashed.count(0) <= 10
    # The nodes over the stretch the two share from their start are taken as they are
    # (213 nodes alone, 107 after, here: the rest lies past the messages' end).
    assert (len(hashed) - hashed.count(0)) * 3 < nodes_alone * 2


def test_a_run_of_checkpoints_each_built_after_the_last_is_built_as_alone() -> None:
    """Checkpoints of a growing run, each built after the one before (as the store builds
    them): every one has the leaves, nodes and levels a build from scratch gives it, and
    only what changed is hashed."""
    before = None
    for step, (messages, state) in enumerate([(3000, 1), (3004, 2), (3004, 3), (3090, 4)]):
        data = _checkpoint_like(messages, state)
        built = build(data, before)
        alone = build(data)
        assert built.root == alone.root, step
        assert built.levels == alone.levels, step
        assert set(built.chunks) == set(alone.chunks), step
        assert len(alone.levels) >= 3  # nodes of nodes: their sharing is exercised too
        before = built


def test_a_delta_with_moves_copies_what_moved() -> None:
    """What the new bytes hold in another order than the base (a checkpoint's state, at
    the other end from its input's) is copied from where it is, not kept again."""
    rng = random.Random(5)
    words = ["alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "seven"]
    state = orjson.dumps({"todos": [" ".join(rng.choices(words, k=12)) for _ in range(40)]})
    history = orjson.dumps([" ".join(rng.choices(words, k=30)) for _ in range(200)])
    posted = b'{"state":' + state + b',"messages":' + history + b"}"
    checkpoint = history[:-1] + b',"a reply"]\n{"state":' + state + b"}"
    plain, moved = delta(posted, checkpoint), delta(posted, checkpoint, moves=True)
    assert plain is not None and moved is not None
    assert patch(posted, moved) == checkpoint == patch(posted, plain)
    assert len(operations(posted, moved)) < 150 < len(state) < len(operations(posted, plain))


def test_the_search_for_moved_stretches_stops_at_its_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Inputs that share little in order (every message with its keys reordered) would cost
    a search of the whole base per piece: the searches stop when they have scanned
    ``_SCAN`` bytes of it, what is left is the new bytes' own, and the delta stays exact
    (or is not worth keeping). With no budget at all, moves find nothing."""
    messages = [{"id": f"m{i}", "role": "user", "content": f"turn {i} " * 12} for i in range(300)]
    base = orjson.dumps({"messages": messages})
    data = orjson.dumps([dict(reversed(list(m.items()))) for m in messages])
    searches: list[int] = []
    find = bytes.find

    class Counted(bytes):
        def find(self, piece: Any, *args: Any) -> int:  # type: ignore[override]
            at = find(self, piece, *args)
            searches.append(len(self) if at < 0 else at + len(piece))  # bytes scanned
            return at

    counted = Counted(base)
    changes = delta(counted, data, moves=True)
    assert changes is None or patch(base, changes) == data
    assert 0 < sum(searches) <= deltas._SCAN + len(base)
    monkeypatch.setattr(deltas, "_SCAN", 0)
    searches.clear()
    assert delta(counted, data, moves=True) == delta(base, data)
    assert searches == []


def test_a_delta_is_kept_compressed_when_that_is_shorter() -> None:
    rng = random.Random(8)
    words = ["alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "seven"]
    base = orjson.dumps([" ".join(rng.choices(words, k=30)) for _ in range(100)])
    said = " ".join(rng.choices(words, k=300)).encode()
    data = base[:-1] + b',"' + said + b'"]'
    changes = delta(base, data)
    assert changes is not None and patch(base, changes) == data
    assert len(changes) < len(said) // 2 < len(operations(base, changes))  # compressed
    tiny = delta(base, base[:-1] + b',"x"]')
    assert tiny is not None and tiny == operations(base, tiny)  # too short to gain: as it is


def test_a_delta_holds_what_changed_not_the_history() -> None:
    rng = random.Random(3)
    words = ["alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "seven"]
    history = [
        {"id": f"m{i}", "role": "user", "content": " ".join(rng.choices(words, k=30))}
        for i in range(2000)
    ]
    before = orjson.dumps({"runId": "r1", "state": {"n": 1}, "messages": history})
    history.append({"id": "new", "role": "assistant", "content": "a reply"})
    after = orjson.dumps({"runId": "r2", "state": {"n": 2}, "messages": history})
    changes = delta(before, after)
    assert changes is not None
    assert len(changes) < 200 < len(after) // 1000
    assert patch(before, changes) == after
    assert delta(before, bytes(reversed(after))) is None  # nothing in common: no delta


async def _input_rows(store: EventStore, thread_id: str) -> dict[str, tuple[Any, Any]]:
    """Each run's ``(root, base)`` as kept."""
    from recorder.store.sql import SqlStore
    from recorder.store.statements import Fetch

    assert isinstance(store, SqlStore)

    def body() -> Any:
        rows = yield (
            Fetch(
                "SELECT i.run_id, i.root, i.base FROM run_inputs i JOIN runs r "
                "ON r.run_id = i.run_id WHERE r.thread_id = ?"
            ),
            (thread_id,),
        )
        return {str(run_id): (root, base) for run_id, root, base in rows}

    found: dict[str, tuple[Any, Any]] = await store.database.read(body)
    return found


def _turn(turn: int, thread_id: str = "d") -> bytes:
    history = [
        {"id": f"u{i}", "role": "user", "content": f"turn {i} " * 20} for i in range(turn + 8)
    ]
    return orjson.dumps({"threadId": thread_id, "runId": f"r{turn}", "messages": history})


async def test_a_thread_keeps_deltas_at_most_a_chain_long(store: EventStore, spec_url: str) -> None:
    """Each input a delta from the one before, and a tree again every ``CHAIN`` runs: none
    is rebuilt from more than ``CHAIN`` rows."""
    runs = 2 * CHAIN + 5
    for turn in range(runs):
        parent = f"r{turn - 1}" if turn else None
        await store.create_run(NewRun(f"r{turn}", "d", input=_turn(turn), parent_run_id=parent))
    kept = await _input_rows(store, "d")
    assert sum(base is not None for _root, base in kept.values()) >= runs - 3
    for turn in range(runs):
        steps, current = 0, f"r{turn}"
        while kept[current][1] is not None:
            assert kept[current][1] == f"r{turn - steps - 1}"
            current, steps = kept[current][1], steps + 1
        assert steps < CHAIN
        assert kept[current][0] is not None  # a tree at the chain's end
    stores = [store]
    if shared_database(spec_url):
        stores.append(await open_store(spec_url))  # from the tables alone
    try:
        for reader in stores:
            for turn in range(runs):
                assert (await reader.get_run(f"r{turn}")).input == _turn(turn)
            listed = await reader.list_runs("d", inputs=True)
            assert [run.input for run in listed] == [_turn(turn) for turn in range(runs)]
            assert [run.input for run in await reader.lineage(f"r{runs - 1}")] == [
                _turn(turn) for turn in range(runs)
            ]
    finally:
        if len(stores) > 1:
            await stores[1].close()


async def test_a_threads_next_input_tree_is_cut_from_its_last(
    store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every ``CHAIN`` runs a thread's input is kept as a tree again, and that input
    repeats the history the last tree held: the store cuts and hashes what came since,
    not the whole history again, and keeps the very tree a cut from scratch makes."""
    hashed: list[int] = []
    real = inputs._hash
    monkeypatch.setattr(
        inputs, "_hash", lambda level, data: hashed.append(level) or real(level, data)
    )
    runs = 2 * CHAIN + 1
    posted = [_turn(200 + 4 * turn, "g") for turn in range(runs)]
    for turn in range(runs):
        parent = f"r{turn - 1}" if turn else None
        await store.create_run(NewRun(f"r{turn}", "g", input=posted[turn], parent_run_id=parent))
    cut = hashed.count(0)
    kept = await _input_rows(store, "g")
    trees = [turn for turn in range(runs) if kept[f"r{turn}"][0] is not None]
    assert trees == [0, CHAIN, 2 * CHAIN]
    for turn in trees:
        assert bytes(kept[f"r{turn}"][0]) == build(posted[turn]).root
        assert (await store.get_run(f"r{turn}")).input == posted[turn]
    from_scratch = sum(len(leaves(posted[turn])) for turn in trees)
    last = leaves(posted[trees[-1]])
    # About each leaf of the last tree once: those of the trees before it are its own.
    assert cut <= len(last) + 2 * len(trees)
    assert from_scratch > 1.5 * len(last)


async def test_a_delta_whose_base_is_gone_is_kept_as_a_tree(
    store: EventStore, spec_url: str
) -> None:
    """The base a store remembers may have been purged since (by this store or another
    process), even its id used again for other bytes: the next input is kept whole."""
    from recorder.store import PurgeSelection

    await store.create_run(NewRun("r0", "p", input=_turn(0, "p")))
    await store.set_status("r0", "finished")
    await store.purge(PurgeSelection(thread_ids=("p",)), actor="test", reason=None)
    await store.create_run(NewRun("r1", "p", input=_turn(1, "p"), parent_run_id="r0"))
    assert (await store.get_run("r1")).input == _turn(1, "p")
    assert (await _input_rows(store, "p"))["r1"][1] is None
    if not shared_database(spec_url):
        return
    # Another process purges r1 and uses its id again in the same thread, for other bytes:
    # this store still remembers the first r1.
    await store.set_status("r1", "finished")
    elsewhere = await open_store(spec_url)
    other = orjson.dumps({"threadId": "p", "runId": "r1", "messages": ["other " * 300]})
    try:
        await elsewhere.purge(PurgeSelection(thread_ids=("p",)), actor="test", reason=None)
        await elsewhere.create_run(NewRun("r1", "p", input=other))
    finally:
        await elsewhere.close()
    await store.create_run(NewRun("r2", "p", input=_turn(2, "p"), parent_run_id="r1"))
    assert (await store.get_run("r2")).input == _turn(2, "p")
    assert (await store.get_run("r1")).input == other


async def test_leaves_are_kept_compressed_and_read_back_exactly(
    store: EventStore, spec_url: str
) -> None:
    """Text compresses: the leaves of a tree are kept compressed, under the hash of their
    bytes, and the input comes back byte for byte, from the tables alone too."""
    rng = random.Random(4)
    words = ["alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "seven"]
    history = [
        {"id": f"m{i}", "role": "user", "content": " ".join(rng.choices(words, k=40))}
        for i in range(200)
    ]
    posted = orjson.dumps({"threadId": "z", "runId": "z1", "messages": history})
    await store.create_run(NewRun("z1", "z", input=posted))
    rows = await raw_sql(store, "SELECT hash, level, data FROM input_chunks")
    packed = [bytes(data) for _key, level, data in rows if level == PACKED]
    assert packed and sum(map(len, packed)) < len(posted) // 2
    tree = build(posted)  # the same leaves, under the same hashes, whole
    leaf_hashes = {key for key, chunk in tree.chunks.items() if chunk.level == 0}
    assert {bytes(key) for key, level, _data in rows if level == PACKED} <= leaf_hashes
    assert b"".join(await stored_chunks(store)).count(history[7]["content"].encode()) == 1
    assert (await store.get_run("z1")).input == posted
    if shared_database(spec_url):
        other = await open_store(spec_url)
        try:
            assert (await other.get_run("z1")).input == posted
        finally:
            await other.close()
