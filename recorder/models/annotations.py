"""Annotations: tags, notes and a score on threads and runs, kept beside the log."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from recorder.models.base import Model


class Note(Model):
    note_id: str
    run_id: str | None = Field(description="the run it is about; null: the thread")
    text: str
    author: str | None
    created_at: datetime


class Score(Model):
    value: float
    author: str | None
    updated_at: datetime


class Annotated(Model):
    """What is annotated on one thread or one run."""

    tags: dict[str, str] = Field(default_factory=dict)
    notes: list[Note] = Field(default_factory=list, description="oldest first")
    score: Score | None = None


class ThreadAnnotations(Annotated):
    thread_id: str
    runs: dict[str, Annotated] = Field(
        default_factory=dict, description="the thread's annotated runs, by run id"
    )


class NewNote(Model):
    text: str
    author: str | None = None


class NewScore(Model):
    value: float = Field(allow_inf_nan=False)
    author: str | None = None
