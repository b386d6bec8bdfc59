"""EventStore.set_tags, add_note, remove_note, set_score, annotations, restore_annotations,
and the tag filters of list_threads and search."""

from __future__ import annotations

import math

import pytest

from recorder.errors import InputError, NotFound, RunNotFound, ThreadNotFound
from recorder.store import EventStore, NewRun, Note, SearchFilter, ThreadFilter
from recorder.timetravel.indexing import Indexer
from tests.store.spec.test_search import record, said


async def test_tags_notes_and_scores(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1", "a"))
    await store.create_run(NewRun("r2", "t1", "a"))
    await store.set_tags("t1", None, {"team": "billing", "env": "prod"})
    await store.set_tags("t1", "r2", {"verdict": "bad"})
    await store.set_tags("t1", None, {"env": None, "team": "support"})
    await store.add_note(Note("n1", "t1", None, "escalated to a human", "ana", 10.0))
    await store.add_note(Note("n2", "t1", "r2", "wrong refund amount", None, 20.0))
    await store.set_score("t1", "r2", 0.25, "ana")
    await store.set_score("t1", None, 1.0, None)
    await store.set_score("t1", None, None, None)
    saved = await store.annotations("t1")
    assert [(t.run_id, t.key, t.value) for t in saved.tags] == [
        (None, "team", "support"),
        ("r2", "verdict", "bad"),
    ]
    assert [(n.note_id, n.run_id, n.text, n.author) for n in saved.notes] == [
        ("n1", None, "escalated to a human", "ana"),
        ("n2", "r2", "wrong refund amount", None),
    ]
    assert [(s.run_id, s.value, s.author) for s in saved.scores] == [("r2", 0.25, "ana")]
    await store.remove_note("n1")
    assert [n.note_id for n in (await store.annotations("t1")).notes] == ["n2"]
    with pytest.raises(NotFound):
        await store.remove_note("n1")
    # Annotations are beside the log: the run's events and status are untouched.
    assert (await store.get_run("r2")).event_count == 0


async def test_targets_and_values_are_checked(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1", "a"))
    await store.create_run(NewRun("r9", "t9", "a"))
    with pytest.raises(ThreadNotFound):
        await store.set_tags("nope", None, {"a": "b"})
    with pytest.raises(RunNotFound):
        await store.set_tags("t1", "nope", {"a": "b"})
    with pytest.raises(NotFound):
        await store.set_score("t1", "r9", 1.0, None)  # a run of another thread
    with pytest.raises(ThreadNotFound):
        await store.annotations("nope")
    # (A key with ':' or '=' could be set but never found: a filter is KEY:VALUE.)
    for bad in ({"": "x"}, {"k\x00": "x"}, {"k": "x" * 3000}, {"a:b": "v"}, {"a=b": "v"}):
        with pytest.raises(InputError):
            await store.set_tags("t1", None, bad)
    with pytest.raises(InputError):
        await store.add_note(Note("n", "t1", None, "  ", None, 1.0))
    for number in (math.nan, math.inf):
        with pytest.raises(InputError):
            await store.set_score("t1", None, number, None)
    saved = await store.annotations("t1")
    assert (saved.tags, saved.notes, saved.scores) == ([], [], [])


async def test_tag_filters_in_threads_and_search(store: EventStore) -> None:
    await record(store, "r1", "t1", said("m1", "a refund for you"), created_at=1000.0)
    await record(store, "r2", "t2", said("m2", "no refund today"), created_at=2000.0)
    await record(store, "r3", "t2", said("m3", "refund after all"), created_at=3000.0)
    await Indexer(store).index_pending()
    await store.set_tags("t1", None, {"team": "billing"})
    await store.set_tags("t2", "r3", {"team": "billing", "verdict": "good"})

    async def threads(**tags: str) -> list[str]:
        page = await store.list_threads(ThreadFilter(tags=tuple(tags.items())))
        return [t.thread_id for t in page.items]

    assert await threads(team="billing") == ["t2", "t1"]
    assert await threads(team="billing", verdict="good") == ["t2"]
    assert await threads(team="sales") == []

    async def runs(**tags: str) -> list[str]:
        page = await store.search(SearchFilter(text="refund", tags=tuple(tags.items())))
        return sorted(h.doc.run_id for h in page.items)

    assert await runs(team="billing") == ["r1", "r3"]  # t1's own tag; r3's, not r2's
    assert await runs(verdict="good") == ["r3"]
    assert await runs(team="sales") == []


async def test_restore_puts_them_back_as_they_were(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1", "a"))
    await store.set_tags("t1", "r1", {"k": "v"})
    await store.add_note(Note("n1", "t1", "r1", "looked at it", "ana", 5.0))
    await store.set_score("t1", None, -2.5, "bob")
    saved = await store.annotations("t1")
    await store.restore_annotations(saved)
    await store.restore_annotations(saved)
    assert await store.annotations("t1") == saved
