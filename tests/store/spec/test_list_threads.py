"""EventStore.list_threads."""

from __future__ import annotations

from typing import Any

import pytest

from recorder.errors import InputError
from recorder.store import Closing, EventStore, NewRun, ThreadFilter


async def test_list_threads_filters_and_pages(store: EventStore) -> None:
    for i in range(7):
        agent = "even" if i % 2 == 0 else "odd"
        await store.create_run(NewRun(f"r{i}", f"t{i}", agent=agent, created_at=1000.0 + i))
    # (Closed at a given time, as an import closes it: a close moves its thread's update.)
    close = Closing("r3", "error", error="boom", finished_at=1003.5)
    await store.append_batches([("r3", [])], [close])
    await store.set_summary("t5", "User asked about the Weather in Paris")
    seen: list[str] = []
    cursor = None
    while True:
        page = await store.list_threads(limit=3, cursor=cursor)
        assert len(page.items) <= 3
        seen += [t.thread_id for t in page.items]
        if page.cursor is None:
            break
        cursor = page.cursor
    assert seen == [f"t{i}" for i in reversed(range(7))]
    odd = await store.list_threads(ThreadFilter(agent="odd"))
    assert [t.thread_id for t in odd.items] == ["t5", "t3", "t1"]
    errored = await store.list_threads(ThreadFilter(status="error"))
    assert [t.thread_id for t in errored.items] == ["t3"]
    assert errored.items[0].latest_status == "error"
    window = await store.list_threads(ThreadFilter(since=1002.0, until=1004.0))
    assert [t.thread_id for t in window.items] == ["t4", "t3", "t2"]
    found = await store.list_threads(ThreadFilter(text="weather in"))
    assert [t.thread_id for t in found.items] == ["t5"]
    assert found.items[0].summary == "User asked about the Weather in Paris"
    assert (await store.list_threads(ThreadFilter(text="100%_"))).items == []


async def test_filters_combine_and_pages_keep_them(store: EventStore) -> None:
    for i in range(6):
        await store.create_run(NewRun(f"r{i}", f"t{i}", agent="a", created_at=1000.0 + i))
        await store.set_summary(f"t{i}", "about cats" if i % 3 else "about dogs")
    wanted = ThreadFilter(agent="a", status="running", text="CATS")
    first = await store.list_threads(wanted, limit=2)
    assert [t.thread_id for t in first.items] == ["t5", "t4"]
    second = await store.list_threads(wanted, limit=2, cursor=first.cursor)
    assert [t.thread_id for t in second.items] == ["t2", "t1"]
    assert second.cursor is None


async def test_ties_are_ordered_by_thread_id(store: EventStore) -> None:
    for thread_id in ("b", "c", "a"):
        await store.create_run(NewRun(f"r-{thread_id}", thread_id, created_at=1000.0))
    page = await store.list_threads(limit=2)
    rest = await store.list_threads(limit=2, cursor=page.cursor)
    assert [t.thread_id for t in page.items + rest.items] == ["c", "b", "a"]


async def test_like_characters_are_plain_text(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.create_run(NewRun("r2", "t2"))
    await store.set_summary("t1", "100% sure_thing \\o/")
    await store.set_summary("t2", "1000 sure thing")
    for text in ("100%", "sure_thing", "\\o/"):
        found = await store.list_threads(ThreadFilter(text=text))
        assert [t.thread_id for t in found.items] == ["t1"], text


async def test_text_with_a_nul_character_is_looked_for_without_it(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.set_status("r1", "finished", summary="hello\x00world")
    found = await store.list_threads(ThreadFilter(text="lo\x00wor"))
    assert [t.thread_id for t in found.items] == ["t1"]


async def test_nothing_matches_nothing(store: EventStore) -> None:
    assert await store.list_threads() == await store.list_threads(ThreadFilter(agent="x"))
    assert (await store.list_threads()).items == [] and (await store.list_threads()).cursor is None


# (The last two: [1e400, "t"] and [1, "t\u0000"], no cursor this store gives: the database
# would have refused their values with a message that named no cursor.)
@pytest.mark.parametrize(
    "cursor", ["@@not-a-cursor", "bm90IGpzb24=", "WzFd", "WzFlNDAwLCJ0Il0=", "WzEsInRcdTAwMDAiXQ=="]
)
async def test_bad_cursor_is_a_clear_error(store: EventStore, cursor: str) -> None:
    with pytest.raises(InputError, match=r"^invalid cursor"):
        await store.list_threads(cursor=cursor)


async def test_an_agent_limit_keeps_only_threads_all_of_whose_runs_it_covers(
    store: EventStore,
) -> None:
    await store.create_run(NewRun("a1", "ta", agent="a", created_at=1000.0))
    await store.create_run(NewRun("b1", "tb", agent="b", created_at=1001.0))
    # A thread begun through "a" that later ran through "b" holds b's data: not a's to see.
    await store.create_run(NewRun("m1", "tm", agent="a", created_at=1002.0))
    await store.create_run(NewRun("m2", "tm", agent="b", created_at=1003.0))
    await store.create_run(NewRun("n1", "tn", agent=None, created_at=1004.0))

    def ids(page: Any) -> list[str]:
        return [t.thread_id for t in page.items]

    assert ids(await store.list_threads(ThreadFilter(agents=("a",)))) == ["ta"]
    assert ids(await store.list_threads(ThreadFilter(agents=("b",)))) == ["tb"]
    assert ids(await store.list_threads(ThreadFilter(agents=("a", "b")))) == ["tm", "tb", "ta"]
    assert ids(await store.list_threads(ThreadFilter(agents=()))) == []
    assert ids(await store.list_threads(ThreadFilter(agents=("a",), agent="b"))) == []
    # Paging under the limit keeps to it.
    first = await store.list_threads(ThreadFilter(agents=("a", "b")), limit=2)
    assert ids(first) == ["tm", "tb"]
    rest = await store.list_threads(ThreadFilter(agents=("a", "b")), limit=2, cursor=first.cursor)
    assert ids(rest) == ["ta"]
