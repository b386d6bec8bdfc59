"""The process's chunk cache: bounded by its budget, and never needed for an exact read."""

from __future__ import annotations

import hashlib
from itertools import pairwise

import orjson
import pytest

from recorder.config import Settings
from recorder.runtime import Runtime
from recorder.store import EventStore, NewRun, open_store
from recorder.store.inputs import CHUNK_CACHE_BYTES, INLINE_BELOW, Chunk, ChunkCache
from recorder.store.sql import SqlStore
from tests.store.spec.conftest import shared_database


def _turns(count: int) -> list[bytes]:
    """A thread's posted inputs, each the history so far and a new message."""
    history: list[dict[str, str]] = []
    posted = []
    for turn in range(count):
        history.append({"id": f"m{turn}", "role": "user", "content": f"turn {turn} " * 40})
        posted.append(orjson.dumps({"runId": f"r{turn}", "messages": history}))
    assert len(posted[-1]) > 4 * INLINE_BELOW  # kept as trees and deltas, not whole
    return posted


async def _write(store: EventStore, posted: list[bytes], start: int = 0) -> list[bytes]:
    """Each turn as a run with a checkpoint of its own, bigger than its input."""
    checkpoints = []
    for turn, data in enumerate(posted, start):
        await store.create_run(NewRun(f"r{turn}", "t", input=data))
        checkpoint = data + b"\n\n" + orjson.dumps({"reply": f"answer {turn} " * 30})
        await store.save_checkpoint(f"r{turn}", 9, checkpoint)
        checkpoints.append(checkpoint)
    return checkpoints


async def _reads_back(store: EventStore, posted: list[bytes], checkpoints: list[bytes]) -> None:
    for turn, data in reversed(list(enumerate(posted))):
        assert (await store.get_run(f"r{turn}")).input == data
        assert await store.nearest_checkpoint(f"r{turn}", 9) == (9, checkpoints[turn])


def _cache(store: EventStore) -> tuple[int, int]:
    assert isinstance(store, SqlStore)
    return store.chunk_cache.budget, store.chunk_cache.size


async def test_a_store_without_a_cache_reads_every_byte_back(spec_url: str) -> None:
    posted = _turns(30)
    bare = await open_store(spec_url, migrate=True, chunk_cache_bytes=0)
    try:
        checkpoints = await _write(bare, posted)
        assert _cache(bare) == (0, 0)  # nothing kept in memory
        await _reads_back(bare, posted, checkpoints)
        assert _cache(bare) == (0, 0)
        if shared_database(spec_url):  # and what it wrote, a store with a cache reads too
            cached = await open_store(spec_url)
            try:
                await _reads_back(cached, posted, checkpoints)
                assert 0 < _cache(cached)[1] <= CHUNK_CACHE_BYTES
            finally:
                await cached.close()
    finally:
        await bare.close()


async def test_a_small_cache_stays_within_its_budget(spec_url: str) -> None:
    posted = _turns(40)
    budget = 64 * 1024
    store = await open_store(spec_url, migrate=True, chunk_cache_bytes=budget)
    try:
        sizes = []
        checkpoints = []
        for turn, data in enumerate(posted):
            checkpoints += await _write(store, [data], turn)
            sizes.append(_cache(store)[1])
        await _reads_back(store, posted, checkpoints)
        sizes.append(_cache(store)[1])
    finally:
        await store.close()
    assert max(sizes) <= budget
    # It did keep chunks, and it did start over more than once.
    assert max(sizes) > budget / 2
    assert sum(a > b for a, b in pairwise(sizes)) >= 2


async def test_the_setting_sizes_the_servers_cache(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECORDER_CHUNK_CACHE_MB", "3")
    settings = Settings(db=sqlite_url, journal=False)
    assert settings.chunk_cache_bytes == 3 * 1024 * 1024
    runtime = await Runtime.start(settings)
    try:
        assert _cache(runtime.store)[0] == 3 * 1024 * 1024
    finally:
        await runtime.close()
    monkeypatch.setenv("RECORDER_CHUNK_CACHE_MB", "-1")
    with pytest.raises(ValueError, match="chunk_cache_mb"):
        Settings(db=sqlite_url)


def _chunk(n: int) -> Chunk:
    data = f"chunk {n} ".encode() * 50
    return Chunk(hashlib.sha256(data).digest(), 0, data)


def test_a_full_cache_keeps_what_was_asked_for_lately() -> None:
    """It sheds what nobody read since it last turned over, not everything at once."""
    budget = 40 * (len(_chunk(0).data) + 100)  # twenty chunks a generation
    cache = ChunkCache(budget)
    hot, cold = _chunk(-1), _chunk(-2)
    cache.put([hot, cold])
    for n in range(200):  # ten turn-overs
        cache.put([_chunk(n)])
        assert cache.get(hot.hash) == hot
        assert cache.size <= budget
    assert cache.get(cold.hash) is None
    # The last ten put are all there (half a generation: reading them promotes no more).
    assert all(cache.get(_chunk(n).hash) is not None for n in range(190, 200))
    assert cache.size <= budget
    cache.keep_spans(b"node", (b"x" * 500,), level=1)  # spans as chunks
    for n in range(200, 215):
        cache.put([_chunk(n)])
    assert cache.spans(b"node") == (b"x" * 500,)
    for n in range(215, 255):  # two turn-overs without a read
        cache.put([_chunk(n)])
    assert cache.spans(b"node") is None


def test_what_a_generation_cannot_hold_is_not_kept() -> None:
    cache = ChunkCache(1000)
    big = Chunk(b"h" * 32, 0, b"x" * 600)
    cache.put([big])
    assert cache.get(big.hash) is None
    assert cache.size == 0


def test_spans_moved_from_the_old_generation_count_the_bytes_they_hold() -> None:
    """A node above level 1 keeps its descendants' spans by reference: moved to the young
    generation alone (its descendants never asked for again), it keeps their bytes alive,
    and is counted with them, so the budget still bounds the memory."""
    budget = 200_000
    cache = ChunkCache(budget)
    leaves = tuple(bytes([n]) * 10_000 for n in range(4))
    for n, leaf in enumerate(leaves):
        cache.keep_spans(b"leaf%d" % n, (leaf,), level=1)
    cache.keep_spans(b"root", leaves, level=2)
    for n in range(10):  # the rest ages out; the root is asked for each time
        cache.put([_chunk(n * 1000 + i) for i in range(40)])
        assert cache.spans(b"root") == leaves
    assert all(cache.spans(b"leaf%d" % n) is None for n in range(4))
    held = sum(map(len, leaves))
    assert cache.size >= held  # what the root keeps alive is counted
    assert cache.size <= budget
