"""Logging: one line per event worth an operator's attention, as text or as JSON.

Every line is one record of the standard ``logging`` module under the ``recorder`` logger
(``recorder.runs``: a line per ended run; ``recorder.api``: errors, with the id their answer
carries; ``recorder.access``: the optional access log; ``recorder.server``: start and stop;
``recorder.export``: traces that could not be exported).
Fields travel as ``extra={"fields": {...}}`` and are rendered ``key=value`` in text, as
members in JSON. ``configure`` also takes over uvicorn's loggers, so a server writes one
format only.
"""

from __future__ import annotations

import json
import logging
import sys
import uuid
from datetime import UTC, datetime
from typing import Any, Literal

from recorder.telemetry.observer import RunReport

LogFormat = Literal["text", "json"]

RUNS = logging.getLogger("recorder.runs")
API = logging.getLogger("recorder.api")
ACCESS = logging.getLogger("recorder.access")
SERVER = logging.getLogger("recorder.server")
EXPORT = logging.getLogger("recorder.export")

_OURS = "recorder_configured"  # marks the handler ``configure`` installs
_TAKEN_OVER = ("recorder", "uvicorn", "uvicorn.error", "uvicorn.access")

# As a library: silent until configured (here, or by the program that embeds the recorder,
# whose root handlers still get every record).
logging.getLogger("recorder").addHandler(logging.NullHandler())


def configure(level: str = "info", fmt: LogFormat = "text", stream: Any = None) -> None:
    """Send the recorder's and uvicorn's records at ``level`` and above to ``stream``
    (standard error by default), one line each, in ``fmt``; every other logger's warnings
    and errors too."""
    handler = logging.StreamHandler(stream or sys.stderr)
    setattr(handler, _OURS, True)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    for name in _TAKEN_OVER:
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False
    # Every other library's warnings (asyncpg's pool during an outage, asyncio's), one line
    # each in the same format: never a stray traceback among JSON lines.
    # Handlers others put on the root (a log shipper, a test runner's) are kept; only one
    # configured here before is replaced.
    root = logging.getLogger()
    root.handlers = [h for h in root.handlers if not getattr(h, _OURS, False)] + [handler]
    root.setLevel(max(logging.WARNING, logging.getLevelName(level.upper())))


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    fields = record.__dict__.get("fields")
    return fields if isinstance(fields, dict) else {}


def _timestamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TextFormatter(logging.Formatter):
    """``2026-01-02T03:04:05.678Z INFO recorder.runs run ended run=r1 status=finished``"""

    def format(self, record: logging.LogRecord) -> str:
        parts = [_timestamp(record), record.levelname, record.name, record.getMessage()]
        parts += [f"{key}={_text_value(value)}" for key, value in fields_of(record).items()]
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _text_value(value: Any) -> str:
    if value is None:
        return "-"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    if not text or any(c.isspace() or c in '"=' for c in text):
        return json.dumps(text, ensure_ascii=False)
    return text


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the fields, and the
    traceback as ``exception`` when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        line.update(fields_of(record))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def run_fields(report: RunReport) -> dict[str, Any]:
    end = report.end
    first = report.first_event
    return {
        "thread": end.thread_id,
        "run": end.run_id,
        "agent": report.agent,
        "status": end.status,
        "outcome": end.outcome,
        "events": end.events,
        "bytes": end.bytes,
        "first_event_ms": None if first is None else round(first * 1000, 3),
        "duration_ms": round(report.duration * 1000, 3),
        "code": end.code,
        "error": end.error,
    }


def log_run(report: RunReport) -> None:
    """The run's line: INFO, or WARNING when it ended in an error."""
    level = logging.WARNING if report.end.status == "error" else logging.INFO
    if RUNS.isEnabledFor(level):
        RUNS.log(level, "run ended", extra={"fields": run_fields(report)})


def new_error_id() -> str:
    """An id that an error's answer and its log line share."""
    return uuid.uuid4().hex[:16]
