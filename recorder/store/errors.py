"""The one place where database errors become the project's own.

Every store method runs inside ``store_errors``. Each database only sorts its driver's
errors into a few ``Failure`` kinds (``classify``); the messages are written here, once,
in the project's words. A driver's text never becomes part of a message (messages reach
HTTP bodies and clients' streams): it stays on the chained cause (``raise ... from``),
where logs find it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from recorder.errors import (
    AppendOnlyViolation,
    Conflict,
    InputError,
    NotMigrated,
    RecorderError,
    StoreError,
    StoreUnavailable,
)


class Failure(enum.Enum):
    """What went wrong, as far as a caller of the store needs to know."""

    UNAVAILABLE = "the database cannot be reached, opened or written (gone, full, busy)"
    NOT_MIGRATED = "the recorder's tables are missing"
    DUPLICATE = "a row with the same key exists"
    COLLISION = "a concurrent transaction won (deadlock, serialization failure)"
    APPEND_ONLY = "the database's triggers refused to change or remove an event"
    UNUSABLE_VALUE = "a value the database cannot take: a NUL in PostgreSQL text, a huge number"


Classify = Callable[[BaseException], Failure | None]


class store_errors:  # lower case, like contextlib.suppress: used as a function
    """Translate what the database raises in the ``with`` block; the project's errors pass
    as they are.

    ``duplicate`` is the message for a duplicate key, when the caller knows what it was
    (``create_run``: the run id). A class rather than a generator: it runs around every
    store call, the recording path's included.
    """

    __slots__ = ("_classify", "_duplicate")

    def __init__(self, classify: Classify, *, duplicate: str | None = None) -> None:
        self._classify = classify
        self._duplicate = duplicate

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: object
    ) -> None:
        if isinstance(exc, Exception) and not isinstance(exc, RecorderError):
            raise translated(self._classify(exc), self._duplicate) from exc


def translated(failure: Failure | None, duplicate: str | None = None) -> RecorderError:
    if failure is Failure.UNAVAILABLE:
        return StoreUnavailable("the database is unavailable")
    if failure is Failure.NOT_MIGRATED:
        return NotMigrated("the database has no recorder tables (it was never migrated)")
    if failure is Failure.DUPLICATE:
        return Conflict(duplicate or "the record already exists")
    if failure is Failure.COLLISION:
        return Conflict("a concurrent write collided with this one; nothing was written")
    if failure is Failure.APPEND_ONLY:
        return AppendOnlyViolation(
            "recorded events, posted inputs and what redaction did are append-only"
        )
    if failure is Failure.UNUSABLE_VALUE:
        return InputError(
            "a value the database cannot take (text with a NUL character, a number out of range)"
        )
    return StoreError("the database failed to complete the operation")
