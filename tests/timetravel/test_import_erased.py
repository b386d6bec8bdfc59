"""An export made before an erasure does not bring the erased runs back on import: the
purge's tombstone names them, and the import leaves them out, counted."""

from __future__ import annotations

import orjson

from recorder.errors import ThreadNotFound
from recorder.store import EventStore, NewEvent, NewRun, PurgeSelection
from recorder.timetravel.transfer import export_lines, import_lines


async def _thread(store: EventStore, thread: str, runs: list[str], created_at: float) -> None:
    for run in runs:
        await store.create_run(NewRun(run, thread, agent="a", created_at=created_at))
        said = {"type": "CUSTOM", "name": "said", "value": f"{thread} {run}"}
        await store.append(run, [NewEvent(orjson.dumps(said), "CUSTOM")])
        await store.set_status(run, "finished")


async def test_an_import_does_not_bring_back_what_a_purge_erased(store: EventStore) -> None:
    await _thread(store, "erase-me", ["e1", "e2"], created_at=1000.0)
    await _thread(store, "keep-me", ["k1"], created_at=1000.0)
    await store.set_tags("erase-me", None, {"label": "x"})
    before = [line async for line in export_lines(store, [])]
    await store.purge(PurgeSelection(thread_ids=("erase-me",)), actor="t", reason="erasure")

    report = await import_lines(store, before)
    assert (report.runs_purged, report.runs_created, report.runs_skipped) == (2, 0, 1)
    assert any(b'"annotations"' in line and b"erase-me" in line for line in before)
    assert report.annotations_restored == 0  # erase-me's left out with its runs
    try:
        await store.get_thread("erase-me")
    except ThreadNotFound:
        pass
    else:
        raise AssertionError("an erased thread came back")
    # The same thread id, used again after the erasure, is a new conversation: it imports,
    # and the erased thread's annotations are not put on it by the export from before.
    await _thread(store, "erase-me", ["e3"], created_at=10**10)
    assert (await import_lines(store, before)).runs_purged == 2
    assert (await store.annotations("erase-me")).tags == []
    later = [line async for line in export_lines(store, ["erase-me"])]
    await store.purge(PurgeSelection(thread_ids=("keep-me",)), actor="t", reason=None)
    again = await import_lines(store, later)
    assert (again.runs_purged, again.runs_skipped) == (0, 1)
