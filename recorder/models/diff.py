"""State diffs: from one point of a run to another, of the same run or another (a fork)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from recorder.models.base import Model


class Point(Model):
    run_id: str
    seq: int | None = Field(description="after this event (-1: the run's start; null: its end)")


class ChangedMessage(Model):
    id: str
    before: dict[str, Any]
    after: dict[str, Any]


class MessageChanges(Model):
    added: list[dict[str, Any]] = Field(description="messages only the target has")
    removed: list[dict[str, Any]] = Field(description="messages only the source has")
    changed: list[ChangedMessage] = Field(description="messages with the same id, changed")


class StateDiff(Model):
    source: Point
    target: Point
    patch: list[dict[str, Any]] = Field(
        description="RFC 6902 JSON Patch from the source's state to the target's"
    )
    messages: MessageChanges
