"""Annotations: tags, notes and scores on threads and runs, beside the log."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body

from recorder.api.access import (
    ForkDep,
    PrincipalDep,
    ReadDep,
    check_unlimited,
    visible_run,
    visible_thread,
)
from recorder.api.deps import RuntimeDep
from recorder.api.views import ERRORS, JSON
from recorder.models import NewNote, NewScore, Note, ThreadAnnotations
from recorder.timetravel import annotating

# Reading annotations takes the read scope; writing them, the fork scope.
router = APIRouter(tags=["annotations"], dependencies=[ReadDep], responses=ERRORS)

TagsBody = Annotated[
    dict[str, str | None],
    Body(description="tags to set, by key; a null value removes that tag", examples=[{"a": "b"}]),
]


@router.get(
    "/threads/{thread_id}/annotations", response_model=ThreadAnnotations, response_class=JSON
)
async def thread_annotations(thread_id: str, runtime: RuntimeDep, principal: PrincipalDep) -> JSON:
    """The thread's tags, notes and score, and its runs' (under ``runs``)."""
    await visible_thread(runtime, principal, thread_id)
    return JSON(await annotating.thread_annotations(runtime.store, thread_id))


@router.patch(
    "/threads/{thread_id}/tags",
    response_model=ThreadAnnotations,
    response_class=JSON,
    dependencies=[ForkDep],
)
async def tag_thread(
    thread_id: str, tags: TagsBody, runtime: RuntimeDep, principal: PrincipalDep
) -> JSON:
    await visible_thread(runtime, principal, thread_id)
    return JSON(await annotating.set_tags(runtime.store, tags, thread_id=thread_id))


@router.patch(
    "/runs/{run_id}/tags",
    response_model=ThreadAnnotations,
    response_class=JSON,
    dependencies=[ForkDep],
)
async def tag_run(
    run_id: str, tags: TagsBody, runtime: RuntimeDep, principal: PrincipalDep
) -> JSON:
    await visible_run(runtime, principal, run_id)
    return JSON(await annotating.set_tags(runtime.store, tags, run_id=run_id))


@router.post(
    "/threads/{thread_id}/notes", response_model=Note, response_class=JSON, dependencies=[ForkDep]
)
async def note_thread(
    thread_id: str, note: NewNote, runtime: RuntimeDep, principal: PrincipalDep
) -> JSON:
    await visible_thread(runtime, principal, thread_id)
    store = runtime.store
    return JSON(await annotating.add_note(store, note.text, note.author, thread_id=thread_id))


@router.post(
    "/runs/{run_id}/notes", response_model=Note, response_class=JSON, dependencies=[ForkDep]
)
async def note_run(
    run_id: str, note: NewNote, runtime: RuntimeDep, principal: PrincipalDep
) -> JSON:
    await visible_run(runtime, principal, run_id)
    store = runtime.store
    return JSON(await annotating.add_note(store, note.text, note.author, run_id=run_id))


@router.delete(
    "/notes/{note_id}",
    response_model=ThreadAnnotations,
    response_class=JSON,
    dependencies=[ForkDep],
)
async def remove_note(note_id: str, runtime: RuntimeDep, principal: PrincipalDep) -> JSON:
    """Forget a note; answers its thread's annotations."""
    check_unlimited(principal, "removing a note")
    return JSON(await annotating.remove_note(runtime.store, note_id))


@router.put(
    "/threads/{thread_id}/score",
    response_model=ThreadAnnotations,
    response_class=JSON,
    dependencies=[ForkDep],
)
async def score_thread(
    thread_id: str, score: NewScore, runtime: RuntimeDep, principal: PrincipalDep
) -> JSON:
    await visible_thread(runtime, principal, thread_id)
    store = runtime.store
    answer = await annotating.set_score(store, score.value, score.author, thread_id=thread_id)
    return JSON(answer)


@router.put(
    "/runs/{run_id}/score",
    response_model=ThreadAnnotations,
    response_class=JSON,
    dependencies=[ForkDep],
)
async def score_run(
    run_id: str, score: NewScore, runtime: RuntimeDep, principal: PrincipalDep
) -> JSON:
    await visible_run(runtime, principal, run_id)
    store = runtime.store
    return JSON(await annotating.set_score(store, score.value, score.author, run_id=run_id))


@router.delete(
    "/threads/{thread_id}/score",
    response_model=ThreadAnnotations,
    response_class=JSON,
    dependencies=[ForkDep],
)
async def unscore_thread(thread_id: str, runtime: RuntimeDep, principal: PrincipalDep) -> JSON:
    await visible_thread(runtime, principal, thread_id)
    return JSON(await annotating.set_score(runtime.store, None, thread_id=thread_id))


@router.delete(
    "/runs/{run_id}/score",
    response_model=ThreadAnnotations,
    response_class=JSON,
    dependencies=[ForkDep],
)
async def unscore_run(run_id: str, runtime: RuntimeDep, principal: PrincipalDep) -> JSON:
    await visible_run(runtime, principal, run_id)
    return JSON(await annotating.set_score(runtime.store, None, run_id=run_id))
