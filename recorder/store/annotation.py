"""The bodies of annotations: tags, notes and scores on threads and runs, beside the log.

A thread's own annotations have ``run_id`` '' in the tables (a key column cannot be null
on both databases alike) and None in the records. Writing one checks its target: the
thread, or a run of that thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from recorder.errors import InputError, NotFound, RunNotFound, ThreadNotFound
from recorder.store.model import Annotations, Note, Score, Tag
from recorder.store.statements import Body, Execute, Fetch

# Annotations have no foreign key: the thread's row is locked first, as a purge locks it
# before it deletes the thread's annotations. One made while its thread is being purged
# waits for the purge, then finds the thread gone, instead of being left behind it.
THREAD_HELD = Fetch("SELECT 1 FROM threads WHERE thread_id = ?", lock=True)
RUN_OF_THREAD = Fetch("SELECT thread_id FROM runs WHERE run_id = ?")
SET_TAG = Execute(
    "INSERT INTO tags (thread_id, run_id, key, value, updated_at) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (thread_id, run_id, key) DO UPDATE SET value = excluded.value, "
    "updated_at = excluded.updated_at"
)
REMOVE_TAG = Execute("DELETE FROM tags WHERE thread_id = ? AND run_id = ? AND key = ?")
ADD_NOTE = Execute(
    "INSERT INTO notes (note_id, thread_id, run_id, author, text, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (note_id) DO NOTHING"
)
REMOVE_NOTE = Fetch("DELETE FROM notes WHERE note_id = ? RETURNING thread_id")
SET_SCORE = Execute(
    "INSERT INTO scores (thread_id, run_id, value, author, updated_at) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (thread_id, run_id) DO UPDATE SET value = excluded.value, "
    "author = excluded.author, updated_at = excluded.updated_at"
)
REMOVE_SCORE = Execute("DELETE FROM scores WHERE thread_id = ? AND run_id = ?")
TAGS = Fetch(
    "SELECT thread_id, run_id, key, value, updated_at FROM tags WHERE thread_id = ? "
    "ORDER BY run_id, key"
)
NOTES = Fetch(
    "SELECT note_id, thread_id, run_id, text, author, created_at FROM notes "
    "WHERE thread_id = ? ORDER BY created_at, note_id"
)
SCORES = Fetch(
    "SELECT thread_id, run_id, value, author, updated_at FROM scores WHERE thread_id = ? "
    "ORDER BY run_id"
)
MAX_KEY = 200
MAX_VALUE = 2000
MAX_NOTE = 20_000


def check_target(thread_id: str, run_id: str | None) -> Body[None]:
    """Raise unless the thread exists and, when given, the run is one of its runs."""
    held = yield THREAD_HELD, (thread_id,)
    if run_id is None:
        if not held:
            raise ThreadNotFound(thread_id)
        return
    rows = yield RUN_OF_THREAD, (run_id,)
    if not rows:
        raise RunNotFound(run_id)
    if rows[0][0] != thread_id or not held:
        raise NotFound(f"run {run_id!r} is not a run of thread {thread_id!r}")


def set_tags(
    thread_id: str, run_id: str | None, tags: Mapping[str, str | None], now: float
) -> Body[None]:
    yield from check_target(thread_id, run_id)
    for key, value in tags.items():
        _check_text("a tag key", key, MAX_KEY)
        if not key:
            raise InputError("a tag key cannot be empty")
        if ":" in key or "=" in key:
            # A filter is KEY:VALUE (or KEY=VALUE), split at its first ':' or '='.
            raise InputError(f"a tag key cannot hold ':' or '=' (got {key[:60]!r})")
        if value is None:
            yield REMOVE_TAG, (thread_id, run_id or "", key)
        else:
            _check_text("a tag value", value, MAX_VALUE)
            yield SET_TAG, (thread_id, run_id or "", key, value, now)


def add_note(note: Note) -> Body[None]:
    yield from check_target(note.thread_id, note.run_id)
    _check_text("a note", note.text, MAX_NOTE)
    if not note.text.strip():
        raise InputError("a note needs text")
    author = note.author
    if author is not None:
        _check_text("an author", author, MAX_KEY)
    row = (note.note_id, note.thread_id, note.run_id or "", author, note.text, note.created_at)
    yield ADD_NOTE, row


def remove_note(note_id: str) -> Body[str]:
    rows = yield REMOVE_NOTE, (note_id,)
    if not rows:
        raise NotFound(f"no note {note_id!r}")
    return str(rows[0][0])


def set_score(
    thread_id: str, run_id: str | None, value: float | None, author: str | None, now: float
) -> Body[None]:
    yield from check_target(thread_id, run_id)
    if value is None:
        yield REMOVE_SCORE, (thread_id, run_id or "")
        return
    if value != value or value in (float("inf"), float("-inf")):
        raise InputError("a score must be a finite number")
    if author is not None:
        _check_text("an author", author, MAX_KEY)
    yield SET_SCORE, (thread_id, run_id or "", float(value), author, now)


def restore(annotations: Annotations) -> Body[None]:
    """Put back exported annotations as they were (times included); idempotent."""
    thread_id = annotations.thread_id
    yield from check_target(thread_id, None)
    for tag in annotations.tags:
        yield SET_TAG, (thread_id, tag.run_id or "", tag.key, tag.value, tag.updated_at)
    for note in annotations.notes:
        yield from add_note(note)
    for score in annotations.scores:
        row = (thread_id, score.run_id or "", score.value, score.author, score.updated_at)
        yield SET_SCORE, row


def get(thread_id: str) -> Body[Annotations]:
    yield from check_target(thread_id, None)
    tag_rows = yield TAGS, (thread_id,)
    note_rows = yield NOTES, (thread_id,)
    score_rows = yield SCORES, (thread_id,)
    return Annotations(
        thread_id,
        [Tag(r[0], r[1] or None, r[2], r[3], float(r[4])) for r in tag_rows],
        [Note(r[0], r[1], r[2] or None, r[3], r[4], float(r[5])) for r in note_rows],
        [Score(r[0], r[1] or None, float(r[2]), r[3], float(r[4])) for r in score_rows],
    )


def tag_condition(
    tags: Sequence[tuple[str, str]], thread_column: str, run_column: str | None
) -> tuple[list[str], list[Any]]:
    """SQL conditions: each tag is on the thread or on one of its runs (with ``run_column``:
    on the thread or on that run)."""
    conditions: list[str] = []
    params: list[Any] = []
    for key, value in tags:
        on_run = "" if run_column is None else f" AND t.run_id IN ('', {run_column})"
        conditions.append(
            f"EXISTS (SELECT 1 FROM tags t WHERE t.thread_id = {thread_column}{on_run} "
            "AND t.key = ? AND t.value = ?)"
        )
        params += [key, value]
    return conditions, params


def _check_text(what: str, text: str, limit: int) -> None:
    if "\x00" in text:
        raise InputError(f"{what} cannot hold a NUL character")
    if len(text) > limit:
        raise InputError(f"{what} may hold at most {limit} characters")
