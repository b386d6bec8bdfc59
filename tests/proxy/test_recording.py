"""A recording's ends that no client can cause, and how its commits overlap its reading.

However a recording task is cancelled (a shutdown at its first step, or while closing), the
client's stream must end and the run's slot must come back (once). While a large batch
commits, the next one is observed. Driven through ``Proxy`` directly, against real
upstreams and a real store.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from starlette.responses import StreamingResponse

from recorder.config import Settings
from recorder.errors import StoreUnavailable
from recorder.proxy.proxy import Proxy, Stream
from recorder.proxy.segments import Segment
from recorder.runtime import upstream_client
from recorder.store import EventStore, open_store
from tests.servers import demo_upstream, scripted_upstream, serving, sse_data


def slow_run(run_id: str) -> bytes:
    return orjson.dumps(
        {
            "threadId": "t",
            "runId": run_id,
            "messages": [{"id": "u1", "role": "user", "content": "hello"}],
            "forwardedProps": {"demo": {"delay": 0.05}},
        }
    )


@asynccontextmanager
async def _proxy(store: Any, settings: Settings) -> AsyncIterator[Proxy]:
    """A proxy over ``store`` with ``settings``, its agent client closed after."""
    client = upstream_client(settings)
    try:
        yield Proxy(store, settings, client, "test")
    finally:
        await client.close()


@asynccontextmanager
async def proxy_on(store: EventStore, db_url: str) -> AsyncIterator[Proxy]:
    """A proxy with one slot, in front of the demo agent."""
    async with demo_upstream() as upstream:
        settings = Settings(db=db_url, agents={"demo": upstream}, max_concurrent_runs=1)
        async with _proxy(store, settings) as proxy:
            yield proxy


@asynccontextmanager
async def proxy_to(
    store: Any, app: Any, name: str, db_url: str, **settings: Any
) -> AsyncIterator[Proxy]:
    """A proxy over ``store`` in front of ``app`` served as agent ``name`` at ``/name``."""
    async with serving(app) as upstream:
        config = Settings(db=db_url, agents={name: f"{upstream}/{name}"}, **settings)
        async with _proxy(store, config) as proxy:
            yield proxy


RUN_R1 = orjson.dumps({"threadId": "t", "runId": "r1", "messages": []})


async def drain(result: Stream) -> list[bytes]:
    return [chunk async for chunk in result.chunks]


async def test_a_recording_stopped_before_it_ran_still_ends_cleanly(db_url: str) -> None:
    # Proxy.close() (a shutdown) can cancel a recording task before its first step, which
    # skips the task's own cleanup: the client's stream must still end and the slot come back.
    store = await open_store(db_url, migrate=True)
    try:
        async with proxy_on(store, db_url) as proxy:
            result = await proxy.start("demo", slow_run("r1"), {})
            assert isinstance(result, Stream) and "r1" in proxy.active
            await proxy.close()  # no await in between: the task has not run yet
            await asyncio.wait_for(drain(result), 10)
            assert not proxy.active and not proxy._slots.locked()
    finally:
        await store.close()


async def test_a_shutdown_mid_run_is_recorded_as_one_not_as_the_client_leaving(
    db_url: str,
) -> None:
    store = await open_store(db_url, migrate=True)
    try:
        async with proxy_on(store, db_url) as proxy:
            result = await proxy.start("demo", slow_run("r1"), {})
            assert isinstance(result, Stream)
            chunks = result.chunks.__aiter__()
            await asyncio.wait_for(chunks.__anext__(), 10)  # the run is under way
            await proxy.close()
            with contextlib.suppress(StopAsyncIteration):
                while True:
                    await asyncio.wait_for(chunks.__anext__(), 10)
        run = await store.get_run("r1")
        last = (await store.read_events("r1"))[-1]
        assert run.status == "error" and run.error == "the recorder stopped; recording ended"
        assert orjson.loads(last.payload)["code"] == "recorder_stopped"
    finally:
        await store.close()


class Wrapped:
    """A real store, its methods those of ``inner`` but for what a subclass overrides."""

    def __init__(self, inner: EventStore) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class HangingClose(Wrapped):
    """A real store whose ``set_status`` hangs (a database that stops answering as the run
    closes); ``closing`` is set once it is called."""

    def __init__(self, inner: EventStore) -> None:
        super().__init__(inner)
        self.closing = asyncio.Event()

    async def set_status(self, *args: Any, **kwargs: Any) -> None:
        self.closing.set()
        await asyncio.Event().wait()


async def test_a_recording_cancelled_while_closing_still_ends_cleanly(sqlite_url: str) -> None:
    inner = await open_store(sqlite_url, migrate=True)
    store = HangingClose(inner)
    try:
        async with proxy_on(store, sqlite_url) as proxy:  # type: ignore[arg-type]
            result = await proxy.start("demo", slow_run("r1"), {})
            assert isinstance(result, Stream)
            reading = asyncio.create_task(drain(result))
            await asyncio.wait_for(store.closing.wait(), 10)
            assert "r1" in proxy.active
            await proxy.close()  # a shutdown while the run's status is being written
            await asyncio.wait_for(reading, 10)
            assert not proxy.active and not proxy._slots.locked()
            # Everything the client may have seen was committed before the run closed.
            events = await inner.read_events("r1")
            assert events[0].type == "RUN_STARTED" and events[-1].type == "RUN_FINISHED"
    finally:
        await inner.close()


class SlowAppend(Wrapped):
    """A real store whose large appends wait before they commit (a database under load),
    until more frames were observed or 5 s went by. ``seen`` holds, for each, the frames
    observed when it was handed over, the frames appended with it (this one included),
    and the frames observed when it went on."""

    def __init__(self, inner: EventStore, observed: list[int], total: int) -> None:
        super().__init__(inner)
        self._observed = observed
        self._total = total
        self._appended = 0
        self.seen: list[tuple[int, int, int]] = []

    async def append_batches(self, batches: Any, closes: Any = ()) -> Any:
        count = sum(len(events) for _run, events in batches)
        if count >= 100:
            handed = self._observed[0]
            for _ in range(500):  # (5 s)
                if self._observed[0] > handed or handed == self._total:
                    break
                await asyncio.sleep(0.01)
            self.seen.append((handed, self._appended + count, self._observed[0]))
        self._appended += count
        return await self._inner.append_batches(batches, closes)


def counting_observed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A one-item list counting the frames every recording observed from now on."""
    observed = [0]
    observe = Segment.observe

    def counting(segment: Segment, data: bytes, summary: Any) -> Any:
        observed[0] += 1
        return observe(segment, data, summary)

    monkeypatch.setattr(Segment, "observe", counting)
    return observed


def flood(chunks: int) -> Any:
    """An upstream (agent ``big``) that sends RUN_STARTED and a message's start, then, 0.3 s
    later, ``chunks`` chunks of 500 text deltas at once, the message's end and
    RUN_FINISHED: ``4 + 500 * chunks`` frames. The first batch is the first event's
    (committed alone); the next frames are there already whenever a batch was observed."""
    frame = b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}\n\n'
    start = (
        b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r1"}\n\n'
        b'data: {"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}\n\n'
    )
    end = (
        b'data: {"type":"TEXT_MESSAGE_END","messageId":"m"}\n\n'
        b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r1"}\n\n'
    )

    async def answer() -> AsyncIterator[bytes]:
        yield start
        await asyncio.sleep(0.3)
        for _ in range(chunks):
            yield frame * 500
        yield end

    return scripted_upstream(
        {"big": lambda _request: StreamingResponse(answer(), media_type="text/event-stream")}
    )


async def test_the_next_batch_is_observed_while_one_commits(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A large batch is handed to the store as soon as it is observed, and the recording
    # observes what came next while the store works: the two overlap instead of taking
    # turns (the hop's rate is the slower of the two, not their sum).
    observed = counting_observed(monkeypatch)
    total = 4 + 6000
    app = flood(12)
    inner = await open_store(sqlite_url, migrate=True)
    store = SlowAppend(inner, observed, total)
    try:
        async with proxy_to(store, app, "big", sqlite_url) as proxy:
            result = await proxy.start("big", RUN_R1, {})
            assert isinstance(result, Stream)
            frames = sse_data(b"".join(await asyncio.wait_for(drain(result), 60)))
        assert len(frames) == total
        assert [e.seq for e in await inner.read_events("r1")] == list(range(total))
        # The first large batch was handed over before any frame after it was observed
        # (the later ones wait their turn behind it: the next test), and each one's
        # successors were observed while it waited to commit.
        assert len(store.seen) >= 2, store.seen
        assert store.seen[0][0] == store.seen[0][1], store.seen
        for handed, _appended, after in store.seen:
            assert after > handed or handed == total, store.seen
    finally:
        await inner.close()


class HeldAppend(Wrapped):
    """A real store whose first large append waits for ``release`` (``waiting`` is set when
    it does), then commits, or with ``fail`` raises StoreUnavailable, as every append after
    it does. ``counts`` holds the events of each append it was given, and ``handed`` the
    frames observed when the held one came."""

    def __init__(self, inner: EventStore, observed: list[int], fail: bool = False) -> None:
        super().__init__(inner)
        self._observed = observed
        self._fail = fail
        self._failing = False
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()
        self.handed = -1
        self.counts: list[int] = []

    async def append_batches(self, batches: Any, closes: Any = ()) -> Any:
        count = sum(len(events) for _run, events in batches)
        self.counts.append(count)
        if count >= 100 and not self.waiting.is_set():
            self.handed = self._observed[0]
            self.waiting.set()
            await self.release.wait()
            self._failing = self._fail
        if self._failing:
            raise StoreUnavailable("database connection lost")
        return await self._inner.append_batches(batches, closes)


async def quiet(observed: list[int]) -> int:
    """The frames observed once no more were for 0.3 s: as far as the recording goes."""
    while True:
        seen = observed[0]
        await asyncio.sleep(0.3)
        if observed[0] == seen:
            return seen


@dataclass
class Held:
    """A run through a proxy whose store holds its first large commit (``HeldAppend``)."""

    proxy: Proxy
    stream: Stream
    store: HeldAppend
    log: EventStore  # the store under it: what was committed
    observed: list[int]

    async def hold(self) -> int:
        """Once the first large commit is held: the frames observed when no more are."""
        await asyncio.wait_for(self.store.waiting.wait(), 10)
        return await quiet(self.observed)


@asynccontextmanager
async def held_run(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, *, fail: bool = False, **settings: Any
) -> AsyncIterator[Held]:
    """Run r1 of ``flood(60)`` (4 + 30,000 frames: a batch is up to 2,000 frames and what
    one read brings) through a proxy with ``settings`` over a ``HeldAppend`` store."""
    observed = counting_observed(monkeypatch)
    inner = await open_store(sqlite_url, migrate=True)
    store = HeldAppend(inner, observed, fail=fail)
    try:
        async with proxy_to(store, flood(60), "big", sqlite_url, **settings) as proxy:
            stream = await proxy.start("big", RUN_R1, {})
            assert isinstance(stream, Stream)
            yield Held(proxy, stream, store, inner, observed)
    finally:
        await inner.close()


async def test_one_more_batch_is_observed_while_the_one_before_waits_its_turn(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # While a large batch commits, the next is handed over and waits its turn (in the
    # recording: the store is given one batch of a run at a time), and the one after
    # that is observed: the loop does not wait for the store at each batch. No further:
    # the recording then waits for the first commit.
    total = 4 + 30000
    async with held_run(sqlite_url, monkeypatch) as run:
        reading = asyncio.create_task(drain(run.stream))
        held_at = await run.hold()
        appends_while_held = len(run.store.counts)
        run.store.release.set()
        frames = sse_data(b"".join(await asyncio.wait_for(reading, 60)))
        assert len(frames) == total
        assert [e.seq for e in await run.log.read_events("r1")] == list(range(total))
    counts, handed = run.store.counts, run.store.handed
    held = next(n for n, count in enumerate(counts) if count >= 100)
    assert appends_while_held == held + 1, counts  # nothing more reached it
    after, next_after = counts[held + 1], counts[held + 2]
    assert held_at == handed + after + next_after, (held_at, handed, counts)
    assert held_at < total


async def test_two_batches_are_handed_over_at_a_time_on_sqlite_only(db_url: str) -> None:
    # SQLite's large appends run on the writer's thread, in parallel with the loop that
    # observes the next batch; PostgreSQL's client side of a commit runs on the loop itself.
    store = await open_store(db_url, migrate=True)
    try:
        async with proxy_on(store, db_url) as proxy:
            expected = 2 if db_url.startswith("sqlite") else 1
            assert proxy.committer.in_flight == expected
    finally:
        await store.close()


async def test_a_failed_commit_stops_the_batch_waiting_behind_it(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The batch handed over behind a commit that fails commits nothing and reaches no
    # client: the client's stream is what was committed, then the store_failure RUN_ERROR.
    config = {"journal": False, "on_store_failure": "error"}
    async with held_run(sqlite_url, monkeypatch, fail=True, **config) as run:
        reading = asyncio.create_task(drain(run.stream))
        held_at = await run.hold()
        run.store.release.set()
        frames = sse_data(b"".join(await asyncio.wait_for(reading, 60)))
        recorded = await run.log.read_events("r1")
        assert (await run.log.get_run("r1")).status == "error"
    assert [e.type for e in recorded] == ["RUN_STARTED", "TEXT_MESSAGE_START"]
    last = orjson.loads(frames[-1])
    assert (last["type"], last["code"]) == ("RUN_ERROR", "store_failure")
    assert frames[:-1] == [e.payload for e in recorded]
    # The store was offered the held batch and nothing after it: never the batch observed
    # behind it (which was, while the held one waited). (The RUN_ERROR is the one frame
    # never in the log: the log failed.)
    counts = run.store.counts
    assert held_at > run.store.handed
    assert len(counts) == 2 and counts[1] >= 100, counts


async def test_a_client_gone_while_batches_wait_their_turn_loses_none_of_them(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With keep_reading_on_disconnect off, a client that leaves while one batch commits and
    # the next waits behind it stops the recording: both are committed first, then what was
    # observed and not handed over, then the recorder's RUN_ERROR. The log has no gap.
    async with held_run(sqlite_url, monkeypatch, keep_reading_on_disconnect=False) as run:
        chunks = run.stream.chunks
        await asyncio.wait_for(anext(chunks), 10)  # the first events reach the client
        held_at = await run.hold()
        await chunks.aclose()  # type: ignore[attr-defined]  # the client leaves
        run.store.release.set()
        for _ in range(500):
            if not run.proxy.active:
                break
            await asyncio.sleep(0.01)
        assert not run.proxy.active
        events = await run.log.read_events("r1")
        assert (await run.log.get_run("r1")).status == "error"
    assert [e.seq for e in events] == list(range(len(events)))
    last = orjson.loads(events[-1].payload)
    assert (last["type"], last["code"]) == ("RUN_ERROR", "client_disconnected")
    # Everything observed was committed, in flight or not (and nothing after it).
    assert len(events) - 1 == held_at < 4 + 30000


class GatedAppend(Wrapped):
    """A real store whose ``gated``-th append (1-based) waits for ``release`` before it
    commits; ``waiting`` is set once it does."""

    def __init__(self, inner: EventStore, gated: int) -> None:
        super().__init__(inner)
        self._gated = gated
        self._calls = 0
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def append_batches(self, batches: Any, closes: Any = ()) -> Any:
        self._calls += 1
        if self._calls == self._gated:
            self.waiting.set()
            await self.release.wait()
        return await self._inner.append_batches(batches, closes)


def _two_batches() -> Any:
    """An answer in two chunks 0.2 s apart: RUN_STARTED and a message's start, then its
    content, its end and RUN_FINISHED (two batches: two appends, then the close)."""
    first = (
        b'data: {"type":"RUN_STARTED","threadId":"t","runId":"r1"}\n\n'
        b'data: {"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}\n\n'
    )
    second = (
        b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"hi"}\n\n'
        b'data: {"type":"TEXT_MESSAGE_END","messageId":"m"}\n\n'
        b'data: {"type":"RUN_FINISHED","threadId":"t","runId":"r1"}\n\n'
    )

    async def answer() -> AsyncIterator[bytes]:
        yield first
        await asyncio.sleep(0.2)
        yield second

    return scripted_upstream(
        {"two": lambda _request: StreamingResponse(answer(), media_type="text/event-stream")}
    )


@pytest.mark.parametrize("gated", [1, 2])
@pytest.mark.parametrize("durability", ["commit", "buffered"])
async def test_buffered_forwards_before_the_commit_and_commit_after_it(
    sqlite_url: str, durability: str, gated: int
) -> None:
    # While the first (or the second) batch's commit is held back: with durability
    # "commit" the client gets none of that batch; with "buffered" it gets the batch
    # before the commit, whose events reach the log once it is let go, and nothing after
    # it meanwhile. Either way the client's frames are the log's, seq for seq.
    inner = await open_store(sqlite_url, migrate=True)
    store = GatedAppend(inner, gated)
    try:
        async with proxy_to(
            store, _two_batches(), "two", sqlite_url, durability=durability
        ) as proxy:
            started = asyncio.create_task(proxy.start("two", RUN_R1, {}))
            await asyncio.wait_for(store.waiting.wait(), 10)
            got: list[bytes] = []
            pending: asyncio.Future[bytes] | None = None
            if gated == 1 and durability == "commit":
                await asyncio.sleep(0.3)
                assert not started.done()  # no stream to read before the commit
            else:
                result = await asyncio.wait_for(started, 10)
                assert isinstance(result, Stream)
                chunks = result.chunks.__aiter__()
                # Buffered, the held batch is the client's too; commit, only those before.
                shown = 2 if gated == 1 or durability == "commit" else 5
                while len(sse_data(b"".join(got))) < shown:
                    got.append(await asyncio.wait_for(chunks.__anext__(), 10))
                if shown < 5:
                    # What comes next waits for the held commit (buffered, the client is
                    # at most one batch ahead of the log).
                    pending = asyncio.ensure_future(chunks.__anext__())
                    with pytest.raises(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(pending), 0.3)
            logged = len(await inner.read_events("r1"))
            assert logged == 2 * (gated - 1), logged  # the held batch is not in the log
            store.release.set()
            if pending is not None:
                got.append(await asyncio.wait_for(pending, 10))
            result = await asyncio.wait_for(started, 10)
            assert isinstance(result, Stream)
            got += await asyncio.wait_for(drain(result), 10)
        frames = sse_data(b"".join(got))
        events = await inner.read_events("r1")
        assert [e.payload for e in events] == frames and len(frames) == 5
        assert (await inner.get_run("r1")).status == "finished"
    finally:
        await inner.close()


class Probed(Wrapped):
    """A real store that notes, as each append begins, how many events were appended
    before it, how many it holds, and how many frames the client had read by then."""

    def __init__(self, inner: EventStore, read: list[bytes]) -> None:
        super().__init__(inner)
        self._read = read
        self._appended = 0
        self.seen: list[tuple[int, int, int]] = []

    async def append_batches(self, batches: Any, closes: Any = ()) -> Any:
        count = sum(len(events) for _run, events in batches)
        self.seen.append((self._appended, count, len(sse_data(b"".join(self._read)))))
        self._appended += count
        return await self._inner.append_batches(batches, closes)


async def test_buffered_hands_each_batch_to_the_client_before_its_commit_begins(
    sqlite_url: str,
) -> None:
    # On SQLite a small commit runs on the event loop without yielding: a batch queued for
    # the client and committed at once would reach the client after its commit all the
    # same. With durability "buffered" the client's task takes each batch first.
    inner = await open_store(sqlite_url, migrate=True)
    read: list[bytes] = []
    store = Probed(inner, read)
    try:
        async with proxy_to(
            store, _two_batches(), "two", sqlite_url, durability="buffered"
        ) as proxy:
            result = await proxy.start("two", RUN_R1, {})
            assert isinstance(result, Stream)
            async with asyncio.timeout(30):
                async for chunk in result.chunks:  # as the endpoint sends: no task between
                    read.append(chunk)
        assert len(store.seen) == 2, store.seen
        for before, count, client_had in store.seen:
            assert client_had >= before + count, store.seen
        assert [e.payload for e in await inner.read_events("r1")] == sse_data(b"".join(read))
    finally:
        await inner.close()
