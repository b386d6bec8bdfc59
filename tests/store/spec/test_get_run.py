"""EventStore.get_run."""

from __future__ import annotations

import pytest

from recorder.errors import RunNotFound
from recorder.store import EventStore, NewRun


async def test_a_run_is_read_with_its_input(store: EventStore) -> None:
    created = await store.create_run(NewRun("r1", "t1", agent="a", input=b'{"x": 1}'))
    assert await store.get_run("r1") == created
    without = await store.create_run(NewRun("r2", "t1"))
    assert (await store.get_run("r2")).input is None
    assert await store.get_run("r2") == without


async def test_an_unknown_run_is_not_found(store: EventStore) -> None:
    with pytest.raises(RunNotFound, match=r"^run 'nope' not found$") as raised:
        await store.get_run("nope")
    assert raised.value.run_id == "nope"
