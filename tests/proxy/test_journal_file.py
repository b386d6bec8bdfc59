"""The journal file: records come back as written, and concurrent appends share flushes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from recorder.proxy.journal import JournalFile, Record, read, scan


async def test_concurrent_appends_are_group_committed(tmp_path: Path) -> None:
    journal = JournalFile.create(tmp_path)
    try:
        records = [
            Record({"op": "append", "n": i}, (bytes([i % 256]) * i, b"\xff\x00raw"))
            for i in range(200)
        ]
        await asyncio.gather(*(journal.append([record]) for record in records))
        # Everything handed over while a flush ran went into the next one.
        assert 1 <= journal.commits < len(records) / 4
        assert journal.records == len(records) and journal.size > 0
        assert scan(journal.path) == (journal.synced, len(records))
        back = [record for _end, record in read(journal.path, journal.start, journal.synced)]
        assert back == records  # in the order handed over, bytes exactly as given
        journal.truncate()
        assert journal.size == 0 and scan(journal.path) == (journal.start, 0)
    finally:
        journal.close(remove=True)
    assert not journal.path.exists()
