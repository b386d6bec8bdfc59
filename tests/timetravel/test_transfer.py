"""Export and import: what an export carries comes back as it was."""

from __future__ import annotations

from pathlib import Path

from recorder.store import EventStore, NewRun, open_store
from recorder.timetravel.transfer import export_lines, import_lines
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
