"""Retention: threads older than the global or their agent's age are purged automatically
(a background task of the running recorder), with a dry run that lists what would go."""

from __future__ import annotations

import time

import pytest

from recorder.config import Settings, load_settings, parse_age
from recorder.errors import ConfigError
from recorder.runtime import Runtime
from recorder.store import Closing, EventStore, NewRun, PurgeSelection
from recorder.timetravel import audit
from recorder.timetravel.audit import apply_retention
from tests.servers import eventually

DAY = 86400.0


async def _thread(store: EventStore, thread: str, agent: str, age_days: float) -> None:
    """A thread last updated ``age_days`` ago: its one run began and ended then."""
    run = f"{thread}-r"
    then = time.time() - age_days * DAY
    await store.create_run(NewRun(run, thread, agent=agent, created_at=then))
    await store.append_batches([(run, [])], [Closing(run, "finished", finished_at=then)])


async def _threads(store: EventStore) -> list[str]:
    return sorted(t.thread_id for t in (await store.list_threads(limit=100)).items)


async def test_retention_by_age_global_and_per_agent(store: EventStore) -> None:
    await _thread(store, "a-old", "a", 40)
    await _thread(store, "a-new", "a", 10)
    await _thread(store, "b-old", "b", 10)  # b keeps 1 day: 10 days is too old
    await _thread(store, "b-new", "b", 0)
    await _thread(store, "c-old", "c", 100)  # c keeps a year: the global age does not apply
    settings = Settings(db=store.url, retention="30d", retention_agents={"b": "1d", "c": "365d"})
    dry = await apply_retention(store, settings, dry_run=True)
    listed = sorted(t["threadId"] for result in dry for t in result["threads"])
    assert listed == ["a-old", "b-old"]
    assert len(await _threads(store)) == 5  # a dry run deletes nothing
    runtime = await Runtime.start(settings, store)
    try:

        async def purged() -> bool:
            return await _threads(store) == ["a-new", "b-new", "c-old"]

        await eventually(purged, "the retention pass")
    finally:
        await runtime.close()
    stones = await store.tombstones()
    assert {t["threadId"] for s in stones for t in s.detail} == {"a-old", "b-old"}
    assert {s.actor for s in stones} == {"retention"}
    actions = await store.list_actions(action="purge")
    assert {a.actor for a in actions} == {"retention"}
    assert (await store.verify_chains()).ok
    # A pass that finds nothing to purge leaves no entry (one an hour would bury the rest).
    logged = len(await store.list_actions())
    again = await apply_retention(store, settings)
    assert [r["threads"] for r in again] == [[], [], []]
    assert len(await store.list_actions()) == logged


async def test_a_purge_names_the_forks_that_keep_copies(store: EventStore) -> None:
    said = b'{"messages":[{"id":"u","role":"user","content":"my secret"}]}'
    await store.create_run(NewRun("p1", "parent", "a", input=said))
    await store.set_status("p1", "finished")
    # A fork into a new thread, and a fork of that fork: each first input holds the history.
    await store.create_run(NewRun("f1", "fork-1", "a", parent_run_id="p1", input=said))
    await store.set_status("f1", "finished")
    await store.create_run(NewRun("f2", "fork-2", "a", parent_run_id="f1", input=said))
    await store.set_status("f2", "finished")
    selection = PurgeSelection(thread_ids=("parent",))
    dry = await audit.purge(store, selection, actor="cli", reason=None, dry_run=True)
    assert dry["forks"] == ["fork-1", "fork-2"]
    done = await audit.purge(store, selection, actor="cli", reason=None, dry_run=False)
    assert [t["threadId"] for t in done["threads"]] == ["parent"]
    assert done["forks"] == ["fork-1", "fork-2"]  # (read before the purge unlinked them)
    both = PurgeSelection(thread_ids=("fork-1", "fork-2"))
    assert (await audit.purge(store, both, actor="cli", reason=None, dry_run=True))["forks"] == []
    logged = [(a.action, (a.detail or {}).get("dryRun")) for a in await store.list_actions()]
    assert logged[:3] == [("purge", True), ("purge", False), ("purge", True)]


def test_retention_settings_take_ages_and_refuse_others(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_age("90d") == 90 * DAY and parse_age("12h") == 12 * 3600
    assert parse_age("30m") == 1800 and parse_age("45s") == 45 and parse_age("2w") == 14 * DAY
    for bad in ("", "90", "d", "-1d", "tomorrow", "infd"):
        with pytest.raises(ConfigError, match="not an age"):
            parse_age(bad)
    monkeypatch.setenv("RECORDER_RETENTION", "30d")
    monkeypatch.setenv("RECORDER_RETENTION_AGENTS", '{"support": "7d"}')
    settings = load_settings()
    assert (settings.retention, settings.retention_agents) == ("30d", {"support": "7d"})
    monkeypatch.setenv("RECORDER_RETENTION_AGENTS", '{"support": "soon"}')
    with pytest.raises(ConfigError, match="'soon' is not an age"):
        load_settings()


async def test_a_thread_whose_long_run_just_ended_is_not_old(store: EventStore) -> None:
    # Begun 40 days ago, ended now: its age counts from its end, not its start.
    await store.create_run(NewRun("long", "busy", agent="a", created_at=time.time() - 40 * DAY))
    await store.set_status("long", "finished")
    settings = Settings(db=store.url, retention="30d")
    dry = await apply_retention(store, settings, dry_run=True)
    assert [t["threadId"] for result in dry for t in result["threads"]] == []
