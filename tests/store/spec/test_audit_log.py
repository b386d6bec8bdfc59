"""EventStore.record_action and list_actions: the audit log of write and admin actions."""

from __future__ import annotations

import time

import pytest

from recorder.store import EventStore
from tests.conftest import raw_sql


async def test_actions_are_kept_and_listed_newest_first(store: EventStore) -> None:
    first = await store.record_action("cli", "import", None, "ok", {"runsCreated": 2})
    second = await store.record_action("token", "fork", "run-1", "error", {"error": "gone"})
    third = await store.record_action("anonymous", "purge", "thread-1", "ok")
    assert first < second < third
    actions = await store.list_actions()
    assert [a.id for a in actions] == [third, second, first]
    fork = actions[1]
    assert (fork.actor, fork.action, fork.target, fork.outcome) == (
        "token",
        "fork",
        "run-1",
        "error",
    )
    assert fork.detail == {"error": "gone"} and abs(fork.at - time.time()) < 60
    assert [a.id for a in await store.list_actions(limit=1, before=third)] == [second]
    assert [a.id for a in await store.list_actions(action="import")] == [first]


async def test_the_audit_log_is_append_only(store: EventStore) -> None:
    await store.record_action("cli", "purge", "t1", "ok")
    with pytest.raises(Exception, match="append-only"):
        await raw_sql(store, "UPDATE audit_log SET actor = 'someone else'")
    with pytest.raises(Exception, match="append-only"):
        await raw_sql(store, "DELETE FROM audit_log")
    assert [a.actor for a in await store.list_actions()] == ["cli"]
