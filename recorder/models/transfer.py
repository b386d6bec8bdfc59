"""Export and import (JSONL)."""

from __future__ import annotations

from pydantic import Field

from recorder.models.base import Model


class ImportReport(Model):
    runs_created: int
    runs_skipped: int
    events_added: int
    annotations_restored: int = Field(0, description="threads whose annotations came back")
    runs_purged: int = Field(
        0, description="runs a purge erased after they were exported: not brought back"
    )
