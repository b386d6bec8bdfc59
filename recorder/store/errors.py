"""Driver errors shared by both dialects, translated into the project's own."""

from __future__ import annotations

from sqlalchemy import exc as sa_exc

from recorder.errors import AppendOnlyViolation, Conflict, StoreError, StoreUnavailable

APPEND_ONLY_MESSAGE = "events are append-only"


def translate_common(exc: BaseException) -> StoreError | None:
    text = str(exc)
    if APPEND_ONLY_MESSAGE in text:
        return AppendOnlyViolation(APPEND_ONLY_MESSAGE)
    if isinstance(exc, sa_exc.IntegrityError):
        return Conflict(f"conflict: {_first_line(exc)}")
    if isinstance(exc, (OSError, ConnectionError)):
        return StoreUnavailable(f"database unreachable: {exc}")
    return None


def _first_line(exc: sa_exc.DBAPIError) -> str:
    return str(exc.orig).splitlines()[0] if exc.orig is not None else str(exc)
