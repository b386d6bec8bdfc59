"""Threads: the list, and one thread with its tree of runs and the threads forked from it."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from recorder.models.base import Model
from recorder.models.runs import RunNode, RunStatus


class ForkOrigin(Model):
    """Where a thread branched off another: a point of one of its runs."""

    thread_id: str | None = Field(description="the source thread; null: not recorded here")
    run_id: str
    seq: int | None = Field(
        description="after this event of the run (-1: its start, null: its end)"
    )


class Thread(Model):
    thread_id: str
    agent: str | None
    created_at: datetime
    updated_at: datetime
    run_count: int
    latest_run_id: str | None
    latest_status: RunStatus | None
    summary: str | None = Field(description="the end of the latest recorded text")
    forked_from: ForkOrigin | None = Field(
        default=None, description="the point this thread branched off at (a fork into it)"
    )


class ThreadPage(Model):
    threads: list[Thread]
    next_cursor: str | None = Field(description="cursor for the next page; null: no more")


class ThreadDetail(Thread):
    runs: list[RunNode] = Field(description="the runs as a forest, oldest roots first")
    forks: list[Thread] = Field(
        default_factory=list,
        description="the threads that branched off this one's runs, oldest first",
    )
