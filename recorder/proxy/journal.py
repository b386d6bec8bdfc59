"""The journal: an append-only file that holds the writes the database could not take.

A record is one write of the recorder's (a new run, a batch of events, a run's status, a
thread's summary), framed so that a crash in the middle of writing it is told apart from
damage:

    file   = MAGIC record*
    record = length:u32 crc32:u32 body          (big-endian; crc32 of body)
    body   = meta_length:u32 meta:JSON blob*    (the blobs' lengths are in meta)

Payloads are kept as the bytes received (blobs), never re-encoded. Writes are group
committed like the database path: everything handed over while a flush runs goes into the
next one, one ``write`` and one ``fsync`` each, so ``append`` returns only once its records
are on disk.

Opening a file that holds records checks every one. A last record cut short, or whose
checksum fails with nothing after it, is what a crash mid-write leaves: it was never
acknowledged, so it is cut. A damaged record followed by more data (or a file that does
not start with ``MAGIC``) is corruption: the file is renamed aside, kept, and
``JournalCorrupt`` names it.

Each process writes a file of its own, locked (``flock``) while the process lives; a
process that starts adopts the files of processes that are gone (unlocked ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import os
import struct
import tempfile
import time
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy.engine import make_url

from recorder.errors import JournalCorrupt

MAGIC = b"AGUI-RECORDER-JOURNAL 1\n"
_HEAD = struct.Struct(">II")
_META = struct.Struct(">I")
_PREFIX = "journal-"
_SUFFIX = ".log"
_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Record:
    """One journaled write: ``meta`` says what it was, ``blobs`` are its payloads."""

    meta: dict[str, Any]
    blobs: tuple[bytes, ...] = ()


def encode(record: Record) -> bytes:
    meta = orjson.dumps({**record.meta, "blobs": [len(b) for b in record.blobs]})
    body = b"".join((_META.pack(len(meta)), meta, *record.blobs))
    return _HEAD.pack(len(body), zlib.crc32(body)) + body


def decode(body: bytes) -> Record:
    (size,) = _META.unpack_from(body)
    meta = orjson.loads(body[_META.size : _META.size + size])
    blobs: list[bytes] = []
    at = _META.size + size
    for length in meta.pop("blobs"):
        blobs.append(body[at : at + length])
        at += length
    if at != len(body):
        raise ValueError("the record's blobs do not fill its body")
    return Record(meta, tuple(blobs))


def scan(path: Path) -> tuple[int, int]:
    """Check the file at ``path``: the offset where its good records end and their count.

    Raises ``JournalCorrupt`` (after renaming the file aside) for damage a crash cannot
    explain. A torn tail is not cut here: the caller cuts it at the returned offset.
    """
    size = path.stat().st_size
    with path.open("rb") as file:
        header = file.read(len(MAGIC))
        if header != MAGIC:
            if len(header) < len(MAGIC) and MAGIC.startswith(header):
                return 0, 0  # cut short while its header was written: no record yet
            _refuse(path, "it does not start with the journal header")
        at, count = len(MAGIC), 0
        while at < size:
            head = file.read(_HEAD.size)
            if len(head) < _HEAD.size:
                break  # torn: a crash while the length was written
            length, crc = _HEAD.unpack(head)
            end = at + _HEAD.size + length
            if end > size:
                break  # torn: the body was cut short
            body = file.read(length)
            if zlib.crc32(body) != crc or not _decodes(body):
                if end == size:
                    break  # the last record, never acknowledged: torn
                _refuse(path, f"record {count + 1} at byte {at} fails its checksum")
            at, count = end, count + 1
    return at, count


def read(path: Path, start: int, stop: int) -> Iterator[tuple[int, Record]]:
    """The records between byte offsets ``start`` and ``stop``, each with its end offset."""
    with path.open("rb") as file:
        file.seek(start)
        at = start
        while at < stop:
            length, _crc = _HEAD.unpack(file.read(_HEAD.size))
            body = file.read(length)
            at += _HEAD.size + length
            yield at, decode(body)


def _decodes(body: bytes) -> bool:
    try:
        decode(body)
    except Exception:
        return False
    return True


def _refuse(path: Path, why: str) -> None:
    aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
    path.rename(aside)
    raise JournalCorrupt(
        f"the journal {path} is damaged ({why}); it was moved to {aside} and kept: "
        "nothing in it was written to the database"
    )


class JournalFile:
    """This process's journal file: appended to with group commit, drained, truncated."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd
        self.synced = os.fstat(fd).st_size  # bytes on disk: every record below is durable
        self.records = 0
        self.commits = 0  # flushes (one write and one fsync each) since the process began
        self.first_at: float | None = None  # when the oldest record held was written
        self._pending: list[tuple[bytes, asyncio.Future[None]]] = []
        self._flushing: asyncio.Task[None] | None = None

    @classmethod
    def create(cls, directory: Path) -> JournalFile:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}{_SUFFIX}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, MAGIC)
        os.fsync(fd)
        _sync_directory(directory)
        return cls(path, fd)

    start = len(MAGIC)  # the offset of the first record

    @property
    def size(self) -> int:
        """Bytes of records held (the header aside)."""
        return self.synced - len(MAGIC)

    @property
    def idle(self) -> bool:
        """Nothing is waiting to be written or being written."""
        return not self._pending and (self._flushing is None or self._flushing.done())

    async def append(self, records: list[Record]) -> None:
        """Write ``records``; returns once they are on disk (with whatever else was handed
        over meanwhile)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((b"".join(map(encode, records)), done))
        if self.first_at is None:
            self.first_at = time.time()
        self.records += len(records)
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.create_task(self._flush(), name="journal-flush")
        await done

    async def _flush(self) -> None:
        while self._pending:
            group, self._pending = self._pending, []
            data = b"".join(chunk for chunk, _ in group)
            try:
                await asyncio.to_thread(_write_all, self._fd, data)
            except OSError as exc:
                # Nothing of this group is acknowledged; a partial write is cut so that the
                # file stays a sequence of whole records.
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self.synced)
                for _, done in group:
                    if not done.done():
                        done.set_exception(exc)
                continue
            self.synced += len(data)
            self.commits += 1
            for _, done in group:
                if not done.done():
                    done.set_result(None)

    def truncate(self) -> None:
        """Forget every record (they are all in the database now)."""
        os.ftruncate(self._fd, len(MAGIC))
        os.fsync(self._fd)
        self.synced = len(MAGIC)
        self.records = 0
        self.first_at = None

    def close(self, *, remove: bool) -> None:
        if remove:
            with contextlib.suppress(OSError):
                self.path.unlink()
        os.close(self._fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view[:_CHUNK])
        view = view[written:]
    os.fsync(fd)


def _sync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def orphans(directory: Path) -> list[tuple[Path, int]]:
    """The journal files in ``directory`` whose process is gone, each opened and locked;
    oldest first."""
    if not directory.is_dir():
        return []
    found: list[tuple[Path, int]] = []
    for path in sorted(directory.glob(f"{_PREFIX}*{_SUFFIX}"), key=lambda p: p.stat().st_mtime):
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # a live process's
            continue
        found.append((path, fd))
    return found


def recover(path: Path, fd: int) -> int:
    """Check an adopted file, cut its torn tail; where its good records end.

    Raises ``JournalCorrupt`` (the file is moved aside and released) for damage.
    """
    try:
        end, _count = scan(path)
    except JournalCorrupt:
        os.close(fd)
        raise
    if end < os.fstat(fd).st_size:
        os.ftruncate(fd, max(end, 0))
        os.fsync(fd)
    return end


def release(path: Path, fd: int) -> None:
    """Remove an adopted file whose records are all in the database."""
    with contextlib.suppress(OSError):
        path.unlink()
    os.close(fd)


# In a per-user journal directory: the database URL it is for, as written (no password).
DATABASE_NOTE = "database.txt"


def left_beside(directory: Path) -> list[tuple[Path, str | None]]:
    """Other per-user journal directories (``journal_directory``: one per database URL, as
    it is spelled) holding journals of processes that are gone, with the URL each is for:
    a database named another way (``localhost`` for ``127.0.0.1``) whose crash left them."""
    found: list[tuple[Path, str | None]] = []
    for other in sorted(directory.parent.glob("journal-*")):
        if other == directory or not other.is_dir():
            continue
        left = orphans(other)
        for _path, fd in left:
            os.close(fd)
        if left:
            note = other / DATABASE_NOTE
            found.append((other, note.read_text().strip() if note.is_file() else None))
    return found


def journal_directory(settings_dir: str | None, url: str) -> tuple[Path, bool]:
    """Where the journal of the database at ``url`` lives, and whether that directory is a
    private temporary one (an in-memory database: nothing to recover after the process).

    ``settings_dir`` when given; else beside a SQLite file (``NAME.journal``); else a
    per-user state directory, one folder per database.
    """
    if settings_dir:
        return Path(settings_dir).expanduser(), False
    parsed = make_url(url)
    if parsed.drivername.startswith("sqlite"):
        database = parsed.database or ""
        if not database or database == ":memory:" or parsed.query.get("uri"):
            return Path(tempfile.mkdtemp(prefix="recorder-journal-")), True
        path = Path(database).expanduser().absolute()
        return path.with_name(path.name + ".journal"), False
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    identity = parsed.render_as_string(hide_password=True)
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return Path(state) / "agui-recorder" / f"journal-{digest}", False
