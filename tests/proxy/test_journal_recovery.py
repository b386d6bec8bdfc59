"""A journal left by a recorder that crashed: replayed at the next start, its torn tail cut;
a damaged one refused with a clear error and kept aside, never replayed nor dropped."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from recorder.config import Settings
from recorder.errors import ConfigError, Conflict, JournalCorrupt
from recorder.proxy.journal import MAGIC, JournalFile, Record, encode
from recorder.proxy.journaled import JournaledStore
from recorder.proxy.replay import Replay
from recorder.runtime import Runtime
from recorder.store import Closing, NewEvent, NewRun, open_store
from tests.proxy.down import Switchable

OWNER = "recorder-gone"


def _journaled(down: Switchable, directory: Path) -> JournaledStore:
    """A journaled store over ``down``, its journal in ``directory``."""
    return JournaledStore(
        down,  # type: ignore[arg-type]
        JournalFile.create(directory),
        deadline=1,
        max_bytes=1 << 20,
        max_outage=60,
    )


async def _crashed_journal(url: str, directory: Path, batches: int) -> Path:
    """A journal as a recorder leaves it when killed during an outage: a run created and
    ``batches`` batches appended, none of them in the database."""
    store = await open_store(url, migrate=True)
    down = Switchable(store)
    down.down = True
    journaled = _journaled(down, directory)
    await journaled.create_run(NewRun("r1", "t1", agent="demo", input=b'{"x": 1}', owner=OWNER))
    for i in range(batches):
        events = [NewEvent(f'{{"n": {i}, "k": {k}}}'.encode(), "CUSTOM") for k in range(3)]
        await journaled.append("r1", events)
    assert journaled._drain is not None
    journaled._drain.cancel()  # killed: the drain never ran
    journaled.journal.close(remove=False)
    await store.close()
    (path,) = directory.glob("journal-*.log")
    return path


async def _start(url: str, directory: Path) -> Runtime:
    return await Runtime.start(Settings(db=url, journal_dir=str(directory)))


async def _payloads(url: str) -> list[bytes]:
    store = await open_store(url)
    try:
        return [e.payload for e in await store.read_events("r1")]
    finally:
        await store.close()


@pytest.mark.parametrize("tear", ["cut", "garbled"])
async def test_a_torn_tail_is_cut_and_the_rest_replayed(
    tmp_path: Path, sqlite_url: str, tear: str
) -> None:
    directory = tmp_path / "journal"
    path = await _crashed_journal(sqlite_url, directory, batches=3)
    last = encode(
        Record(
            {"op": "append", "run_id": "r1", "first_seq": 9, "events": [["X", "upstream", 1.0]]},
            (b"{}",),
        )
    )
    with path.open("ab") as file:  # the write a crash interrupted
        file.write(last[:-5] if tear == "cut" else last[:-1] + b"!")
    runtime = await _start(sqlite_url, directory)
    try:
        run = await runtime.store.get_run("r1")
        assert run.input == b'{"x": 1}' and run.owner == OWNER
        assert run.status == "incomplete"  # its recorder is gone: it never ends
        assert not path.exists()
    finally:
        await runtime.close()
    payloads = await _payloads(sqlite_url)
    assert payloads == [f'{{"n": {i}, "k": {k}}}'.encode() for i in range(3) for k in range(3)]


async def test_replaying_twice_writes_nothing_twice(tmp_path: Path, sqlite_url: str) -> None:
    """A crash in the middle of a drain: the records replayed already are skipped."""
    directory = tmp_path / "journal"
    path = await _crashed_journal(sqlite_url, directory, batches=4)
    kept = path.read_bytes()
    runtime = await _start(sqlite_url, directory)
    await runtime.close()
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(kept)  # as if the drain had crashed before removing the file
    runtime = await _start(sqlite_url, directory)
    try:
        assert (await runtime.store.get_run("r1")).status == "incomplete"
    finally:
        await runtime.close()
    assert len(await _payloads(sqlite_url)) == 12


async def test_a_corrupt_journal_is_refused_and_kept(tmp_path: Path, sqlite_url: str) -> None:
    directory = tmp_path / "journal"
    path = await _crashed_journal(sqlite_url, directory, batches=3)
    data = bytearray(path.read_bytes())
    data[len(MAGIC) + 20] ^= 0xFF  # inside the first record, with records after it
    path.write_bytes(bytes(data))
    with pytest.raises(JournalCorrupt) as refused:
        await _start(sqlite_url, directory)
    message = str(refused.value)
    (aside,) = directory.glob("journal-*.log.corrupt-*")
    assert "fails its checksum" in message and str(aside) in message
    assert aside.read_bytes() == bytes(data)  # kept whole
    assert not path.exists()
    # Nothing of it was written; the next start runs (the damaged file stays aside).
    runtime = await _start(sqlite_url, directory)
    try:
        with pytest.raises(Exception, match="not found"):
            await runtime.store.get_run("r1")
        assert aside.exists()
    finally:
        await runtime.close()


async def test_a_file_that_is_not_a_journal_is_refused(tmp_path: Path, sqlite_url: str) -> None:
    directory = tmp_path / "journal"
    directory.mkdir()
    (directory / "journal-1-x.log").write_bytes(b"something else entirely\n" * 3)
    with pytest.raises(JournalCorrupt, match="journal header"):
        await _start(sqlite_url, directory)
    assert list(directory.glob("journal-1-x.log.corrupt-*"))


async def test_each_live_process_keeps_its_own_journal(tmp_path: Path, sqlite_url: str) -> None:
    """A journal locked by a live recorder is not adopted by another one."""
    directory = tmp_path / "journal"
    first = await _start(sqlite_url, directory)
    try:
        second = await _start(sqlite_url, directory)
        try:
            assert first.journal is not None and second.journal is not None
            assert first.journal.journal.path != second.journal.journal.path
            assert first.journal.journal.path.exists() and second.journal.journal.path.exists()
        finally:
            await second.close()
    finally:
        await first.close()
    assert not list(directory.glob("journal-*.log"))  # empty journals go with their process
    await asyncio.sleep(0)


async def test_recorder_serve_refuses_a_corrupt_journal_plainly(tmp_path: Path) -> None:
    directory = tmp_path / "recorder.db.journal"  # the default place, beside the database
    directory.mkdir()
    (directory / "journal-1-x.log").write_bytes(b"not a journal\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "recorder.cli.main",
        "serve",
        "--db",
        f"sqlite+aiosqlite:///{tmp_path / 'recorder.db'}",
        "--port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2
    message = err.decode()
    assert message.startswith("recorder: the journal ") and "moved to" in message
    assert "Traceback" not in message
    assert list(directory.glob("journal-1-x.log.corrupt-*"))


async def test_an_unwritable_journal_directory_is_a_clear_error(
    tmp_path: Path, sqlite_url: str
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the directory should be")
    with pytest.raises(ConfigError, match="journal_dir"):
        await _start(sqlite_url, blocker / "journal")


async def test_a_close_journaled_with_its_events_is_replayed_after_them(
    tmp_path: Path, sqlite_url: str
) -> None:
    """During an outage, a run's last events and its close are journaled in one write
    (events first); the drain writes them in that order: the run ends closed, whole."""
    store = await open_store(sqlite_url, migrate=True)
    down = Switchable(store)
    journaled = _journaled(down, tmp_path / "journal")
    try:
        await journaled.create_run(NewRun("r1", "t1", agent="demo", owner=OWNER))
        down.down = True
        events = [NewEvent(b'{"k": %d}' % k, "CUSTOM") for k in range(3)]
        close = Closing("r1", "finished", "success", summary="said")
        appended = await journaled.append_batches([("r1", events)], [close])
        assert [a.seq for a in appended[0]] == [0, 1, 2] and journaled.degraded
        assert (await store.get_run("r1")).status == "running"  # held in the journal
        down.down = False
        for _ in range(200):
            if not journaled.degraded:
                break
            await asyncio.sleep(0.05)
        run = await store.get_run("r1")
        assert (run.status, run.outcome, run.event_count) == ("finished", "success", 3)
        assert (await store.get_thread("t1")).summary == "said"
        assert (await store.verify_chains(["t1"])).ok
    finally:
        await journaled.close()
        await store.close()


@pytest.mark.postgres
async def test_a_crash_journal_under_another_spelling_of_the_url_is_named_at_start(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The per-user journal directory is kept by the URL as written: a recorder killed in
    an outage and started again with ``localhost`` for ``127.0.0.1`` finds nothing there.
    It says where the journal is, and for which URL, instead of starting without a word."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    from recorder.proxy.journal import journal_directory

    first, _ = journal_directory(None, pg_url)
    runtime = await Runtime.start(Settings(db=pg_url))
    # The directory notes which URL it is for (a crash leaves the note with its journal).
    note = (first / "database.txt").read_text()
    await runtime.close()
    assert not first.exists()  # a clean stop leaves nothing behind, the note included
    await _crashed_journal(pg_url, first, 2)
    (first / "database.txt").write_text(note)
    other = pg_url.replace("127.0.0.1", "localhost")
    assert journal_directory(None, other)[0] != first
    with caplog.at_level("WARNING", logger="recorder.journal"):
        runtime = await Runtime.start(Settings(db=other))
        await runtime.close()
    (said,) = [r.getMessage() for r in caplog.records if "journals left" in r.getMessage()]
    assert str(first) in said and "@127.0.0.1" in said
    # Started with that directory, it replays them.
    runtime = await _start(other, first)
    await runtime.close()
    assert len(await _payloads(pg_url)) == 6


async def test_a_run_the_replay_refused_writes_nothing_more(
    tmp_path: Path, sqlite_url: str
) -> None:
    """A run created in the journal under an id another process's live run took meanwhile:
    the replay refuses it, and its later writes (straight to the database once the journal
    is drained) are refused too, never appended to the other run."""
    store = await open_store(sqlite_url, migrate=True)
    down = Switchable(store)
    journaled = _journaled(down, tmp_path / "journal")
    try:
        await store.create_run(NewRun("x", "t", agent="demo", owner="another-process"))
        await store.append("x", [NewEvent(b'{"theirs": 1}', "CUSTOM")])
        down.down = True
        await journaled.create_run(NewRun("x", "t", agent="demo", owner="this-process"))
        await journaled.append("x", [NewEvent(b'{"mine": 1}', "CUSTOM")])
        assert journaled._drain is not None
        journaled._drain.cancel()
        down.down = False
        assert await journaled._drain_once()
        assert journaled.rejected == 2  # its create and its batch, kept in rejected.log
        with pytest.raises(Conflict, match="refused when the journal reached the database"):
            await journaled.append("x", [NewEvent(b'{"mine": 2}', "CUSTOM")])
        with pytest.raises(Conflict):
            await journaled.set_status("x", "finished")
        assert [e.payload for e in await store.read_events("x")] == [b'{"theirs": 1}']
        assert (await store.get_run("x")).status == "running"
    finally:
        await journaled.close()
        await store.close()


async def test_a_refused_run_stays_refused_across_the_passes_of_a_drain(
    tmp_path: Path, sqlite_url: str
) -> None:
    """A drain cut short (the database failing again) leaves the rest of a refused run to a
    later pass, past its create record: its batches and status must still be refused, not
    written into the run that holds its id."""
    store = await open_store(sqlite_url, migrate=True)
    try:
        await store.create_run(NewRun("X", "t", agent="a", owner="other", created_at=100.0))
        await store.append("X", [NewEvent(b'{"theirs": 0}', "CUSTOM")])
        directory = tmp_path / "journal"
        directory.mkdir()
        records = [
            Record(
                {
                    "op": "create",
                    "run_id": "X",
                    "thread_id": "t",
                    "agent": "a",
                    "parent_run_id": None,
                    "parent_seq": None,
                    "parent_inferred": False,
                    "origin": "proxy",
                    "owner": "me",
                    "created_at": 200.0,
                    "infer_parent": False,
                    "has_input": False,
                }
            ),
            Record(
                {
                    "op": "append",
                    "run_id": "X",
                    "first_seq": 0,
                    "events": [["CUSTOM", "upstream", 200.0]],
                },
                (b'{"mine": 0}',),
            ),
            Record(
                {
                    "op": "append",
                    "run_id": "X",
                    "first_seq": 1,
                    "events": [["CUSTOM", "upstream", 201.0]],
                },
                (b'{"mine": 1}',),
            ),
            Record(
                {
                    "op": "status",
                    "run_id": "X",
                    "status": "error",
                    "outcome": None,
                    "error": "mine",
                    "violations": None,
                    "summary": None,
                    "at": 202.0,
                }
            ),
        ]
        blobs = [encode(record) for record in records]
        path = directory / "journal-me.log"
        path.write_bytes(MAGIC + b"".join(blobs))
        middle = len(MAGIC) + len(blobs[0]) + len(blobs[1])
        refused: set[str] = set()
        first = Replay(store, directory, refused)
        await first.run(path, len(MAGIC), middle)
        second = Replay(store, directory, refused)  # the next attempt of the drain
        await second.run(path, middle, len(MAGIC) + sum(map(len, blobs)))
        assert (first.rejected, second.rejected) == (2, 2)
        assert [e.payload for e in await store.read_events("X")] == [b'{"theirs": 0}']
        assert (await store.get_run("X")).status == "running"
    finally:
        await store.close()
