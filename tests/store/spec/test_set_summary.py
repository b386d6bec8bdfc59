"""EventStore.set_summary."""

from __future__ import annotations

import pytest

from recorder.errors import ThreadNotFound
from recorder.store import EventStore, NewRun


async def test_the_summary_is_replaced(store: EventStore) -> None:
    await store.create_run(NewRun("r1", "t1"))
    await store.create_run(NewRun("r2", "t2"))
    await store.set_summary("t1", "first")
    await store.set_summary("t1", "sécond\x00 one")
    assert (await store.get_thread("t1")).summary == "sécond one"
    assert (await store.get_thread("t2")).summary is None


async def test_an_unknown_thread_is_not_found(store: EventStore) -> None:
    with pytest.raises(ThreadNotFound, match="'nope'"):
        await store.set_summary("nope", "lost")
