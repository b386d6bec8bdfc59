"""Export and import (JSONL)."""

from __future__ import annotations

from recorder.models.base import Model


class ImportReport(Model):
    runs_created: int
    runs_skipped: int
    events_added: int
