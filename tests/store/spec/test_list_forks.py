"""EventStore.list_forks, and the ``source`` a thread keeps when it branched off another."""

from __future__ import annotations

from recorder.store import EventStore, NewRun, ThreadFilter, ThreadSource


async def test_a_thread_started_from_a_given_parent_keeps_it_as_its_source(
    store: EventStore,
) -> None:
    await store.create_run(NewRun("a1", "a", created_at=1000.0))
    await store.create_run(NewRun("a2", "a", infer_parent=True, created_at=1001.0))
    await store.create_run(NewRun("b1", "b", parent_run_id="a1", parent_seq=7, created_at=1002.0))
    await store.create_run(NewRun("b2", "b", infer_parent=True, created_at=1003.0))
    await store.create_run(NewRun("c1", "c", parent_run_id="a2", created_at=1004.0))

    assert (await store.get_thread("a")).source is None
    assert (await store.get_thread("b")).source == ThreadSource("a", "a1", 7)
    assert (await store.get_thread("c")).source == ThreadSource("a", "a2", None)
    # The thread's later runs (their parents inferred, in the thread) change nothing.
    assert (await store.get_run("b2")).parent_run_id == "b1"
    listed = {t.thread_id: t.source for t in (await store.list_threads()).items}
    assert listed == {
        "a": None,
        "b": ThreadSource("a", "a1", 7),
        "c": ThreadSource("a", "a2", None),
    }
    filtered = await store.list_threads(ThreadFilter(agent=None, text=None))
    assert {t.thread_id for t in filtered.items} == {"a", "b", "c"}


async def test_list_forks_lists_the_threads_that_branched_off_oldest_first(
    store: EventStore,
) -> None:
    await store.create_run(NewRun("a1", "a", created_at=1000.0))
    await store.create_run(NewRun("c1", "c", parent_run_id="a1", parent_seq=3, created_at=1003.0))
    await store.create_run(NewRun("b1", "b", parent_run_id="a1", created_at=1002.0))
    await store.create_run(NewRun("d1", "d", parent_run_id="b1", parent_seq=0, created_at=1004.0))
    assert [t.thread_id for t in await store.list_forks("a")] == ["b", "c"]
    assert [t.source for t in await store.list_forks("b")] == [ThreadSource("b", "b1", 0)]
    assert await store.list_forks("d") == []
    assert await store.list_forks("nope") == []


async def test_a_parent_in_the_same_or_an_existing_thread_is_not_a_source(
    store: EventStore,
) -> None:
    await store.create_run(NewRun("a1", "a"))
    await store.create_run(NewRun("a2", "a", parent_run_id="a1", parent_seq=2))
    await store.create_run(NewRun("b1", "b"))
    # A run posted on an existing thread with a parent elsewhere: the thread began before.
    await store.create_run(NewRun("b2", "b", parent_run_id="a1"))
    # An inferred parent never names a source.
    await store.create_run(NewRun("c1", "c", parent_run_id="a1", parent_inferred=True))
    for thread in ("a", "b", "c"):
        assert (await store.get_thread(thread)).source is None, thread
    assert await store.list_forks("a") == []


async def test_a_source_recorded_later_is_found_then(store: EventStore) -> None:
    # An import may bring the fork before the run it came from.
    await store.create_run(NewRun("f1", "fork", parent_run_id="o1", parent_seq=4))
    assert (await store.get_thread("fork")).source == ThreadSource(None, "o1", 4)
    assert await store.list_forks("origin") == []
    await store.create_run(NewRun("o1", "origin"))
    assert (await store.get_thread("fork")).source == ThreadSource("origin", "o1", 4)
    assert [t.thread_id for t in await store.list_forks("origin")] == ["fork"]
