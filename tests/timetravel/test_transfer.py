"""Export and import: what an export carries comes back as it was."""

from __future__ import annotations

from pathlib import Path

import httpx

from recorder.store import EventStore, NewRun, ThreadFilter, open_store
from recorder.timetravel.transfer import export_lines, import_lines, rebuild_summaries
from tests.conftest import raw_sql
from tests.servers import demo_upstream, post_run, recorder_at, user
from tests.store.spec.conftest import ev


async def test_an_imported_run_keeps_its_times(store: EventStore, tmp_path: Path) -> None:
    await store.create_run(NewRun("r1", "t1", "a", created_at=1_700_000_000.25))
    await store.append("r1", [ev('{"type":"RUN_STARTED"}'), ev('{"type":"RUN_FINISHED"}')])
    await store.set_status("r1", "finished")
    await store.create_run(NewRun("r2", "t1", "a", created_at=1_700_000_100.5))
    await store.set_status("r2", "error", error="gone")  # (closed with no event)
    original = {r.run_id: r for r in await store.list_runs("t1")}
    lines = [line async for line in export_lines(store, ["t1"])]
    copy = await open_store(f"sqlite+aiosqlite:///{tmp_path}/copy.db", migrate=True)
    try:
        report = await import_lines(copy, lines)
        assert report.runs_created == 2
        for run_id, run in original.items():
            imported = await copy.get_run(run_id)
            assert imported.created_at == run.created_at
            # (It was the import's time: a run of 0.1 s lasted as long as the import took.)
            assert run.finished_at is not None and imported.finished_at == run.finished_at
            assert imported.status == run.status
    finally:
        await copy.close()


async def test_summaries_come_back_with_an_import_and_a_rebuild(
    db_url: str, tmp_path: Path
) -> None:
    async with demo_upstream() as up, recorder_at(db_url, {"demo": up}) as rec:
        async with httpx.AsyncClient(base_url=rec, timeout=30, trust_env=False) as client:
            for thread, text in (("s1", "kiwi and plums"), ("s2", "pears")):
                for n in (1, 2):
                    body = {"threadId": thread, "runId": f"{thread}-{n}"}
                    body["messages"] = [user(f"{text} {n}", f"{thread}-u{n}")]
                    await post_run(client, "/agents/demo", body)
    store = await open_store(db_url)
    copy = await open_store(f"sqlite+aiosqlite:///{tmp_path}/copy.db", migrate=True)
    try:
        kept = {t: (await store.get_thread(t)).summary for t in ("s1", "s2")}
        assert kept["s1"] is not None and "kiwi and plums 2" in kept["s1"]
        assert "You said" in kept["s1"]  # (what the agent streamed, too)
        await import_lines(copy, [line async for line in export_lines(store, [])])
        assert {t: (await copy.get_thread(t)).summary for t in kept} == kept
        found = await copy.list_threads(ThreadFilter(text="KIWI"))
        assert [t.thread_id for t in found.items] == ["s1"]
        # Derived data: gone, then built again from the log to the same text.
        await raw_sql(store, "UPDATE threads SET summary = NULL")
        assert await rebuild_summaries(store, None) == 2
        assert {t: (await store.get_thread(t)).summary for t in kept} == kept
    finally:
        await copy.close()
        await store.close()
