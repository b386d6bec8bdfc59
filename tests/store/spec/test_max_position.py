"""EventStore.max_position."""

from __future__ import annotations

from recorder.store import EventStore, NewRun
from tests.store.spec.conftest import ev


async def test_zero_without_events_then_the_last_position(store: EventStore) -> None:
    assert await store.max_position() == 0
    await store.create_run(NewRun("r1", "t1"))
    assert await store.max_position() == 0
    appended = await store.append("r1", [ev("{}"), ev("{}"), ev("{}")])
    assert await store.max_position() == appended[-1].position
    assert (await store.read_after(0))[-1].position == appended[-1].position
