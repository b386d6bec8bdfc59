"""Annotation answers, for the API and the CLI alike (see ``recorder.timetravel.views``)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from recorder.errors import InputError
from recorder.store import Annotations, EventStore, Note
from recorder.timetravel.views import moment


def annotations_view(saved: Annotations) -> dict[str, Any]:
    """The thread's annotations, with each annotated run's under ``runs``."""
    thread: dict[str, Any] = {"threadId": saved.thread_id, **_empty(), "runs": {}}

    def target(run_id: str | None) -> dict[str, Any]:
        if run_id is None:
            return thread
        runs: dict[str, dict[str, Any]] = thread["runs"]
        return runs.setdefault(run_id, _empty())

    for tag in saved.tags:
        target(tag.run_id)["tags"][tag.key] = tag.value
    for note in saved.notes:
        target(note.run_id)["notes"].append(note_view(note))
    for score in saved.scores:
        target(score.run_id)["score"] = {
            "value": score.value,
            "author": score.author,
            "updatedAt": moment(score.updated_at),
        }
    return thread


def _empty() -> dict[str, Any]:
    return {"tags": {}, "notes": [], "score": None}


def note_view(note: Note) -> dict[str, Any]:
    return {
        "noteId": note.note_id,
        "runId": note.run_id,
        "text": note.text,
        "author": note.author,
        "createdAt": moment(note.created_at),
    }


async def target_thread(store: EventStore, thread_id: str | None, run_id: str | None) -> str:
    """The thread of an annotation's target: the one named, or the run's."""
    if thread_id is not None:
        return thread_id
    if run_id is None:
        raise InputError("name a thread or a run")
    return (await store.get_run(run_id)).thread_id


async def thread_annotations(store: EventStore, thread_id: str) -> dict[str, Any]:
    return annotations_view(await store.annotations(thread_id))


async def set_tags(
    store: EventStore,
    tags: Mapping[str, str | None],
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    thread = await target_thread(store, thread_id, run_id)
    await store.set_tags(thread, run_id, tags)
    return await thread_annotations(store, thread)


async def add_note(
    store: EventStore,
    text: str,
    author: str | None = None,
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    thread = await target_thread(store, thread_id, run_id)
    note = Note(f"note-{uuid.uuid4().hex}", thread, run_id, text, author, time.time())
    await store.add_note(note)
    return note_view(note)


async def remove_note(store: EventStore, note_id: str) -> dict[str, Any]:
    return await thread_annotations(store, await store.remove_note(note_id))


async def set_score(
    store: EventStore,
    value: float | None,
    author: str | None = None,
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    thread = await target_thread(store, thread_id, run_id)
    await store.set_score(thread, run_id, value, author)
    return await thread_annotations(store, thread)


def parse_tags(specs: list[str] | None) -> tuple[tuple[str, str], ...]:
    """``key:value`` (or ``key=value``) filters as pairs."""
    pairs = []
    for spec in specs or []:
        separator = min((i for i in (spec.find(":"), spec.find("=")) if i > 0), default=-1)
        if separator < 0:
            raise InputError(f"a tag filter is KEY:VALUE, got {spec!r}")
        pairs.append((spec[:separator], spec[separator + 1 :]))
    return tuple(pairs)
