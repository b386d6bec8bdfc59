"""Search: hits in recorded content, each pointing at the events it came from."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from recorder.models.base import Model

SearchKind = Literal["message", "tool_call", "reasoning", "error", "input"]
SEARCH_KINDS: tuple[str, ...] = ("message", "tool_call", "reasoning", "error", "input")


class SearchHit(Model):
    thread_id: str
    run_id: str
    seq_from: int = Field(description="the first event the hit's text came from (-1: the input)")
    seq_to: int = Field(description="the last event the hit's text came from (-1: the input)")
    kind: SearchKind
    snippet: str = Field(description="the text around the match (… where it was cut)")
    highlights: list[tuple[int, int]] = Field(
        description="[start, end) offsets in the snippet of the words that matched"
    )
    score: float = Field(description="relevance: higher is better (0 without a query)")
    recorded_at: datetime
    agent: str | None
    message_id: str | None = Field(description="the message, tool call or reasoning id")
    role: str | None
    tool_name: str | None
    error_code: str | None


class SearchPage(Model):
    hits: list[SearchHit]
    next_cursor: str | None = Field(description="cursor for the next page; null: no more")


class ReindexReport(Model):
    runs: int = Field(description="runs indexed")
