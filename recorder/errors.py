"""The project's errors, in one tree.

    RecorderError
    ├── ConfigError            bad settings: an agent spec, a database URL
    ├── StoreError             anything the event store reports
    │   ├── StoreUnavailable   the database cannot be reached or opened
    │   │   └── NotMigrated    it has no recorder tables
    │   ├── NotFound           an unknown run or thread
    │   │   ├── RunNotFound
    │   │   └── ThreadNotFound
    │   ├── Conflict           a duplicate run id, a seq taken by a concurrent writer
    │   ├── RunClosed          appending to a run that has a terminal status
    │   └── AppendOnlyViolation the database refused to change a recorded event
    ├── InputError             a request or file we cannot use (bad JSON, missing ids)
    └── UpstreamError          the agent behind the proxy failed (refused, non-2xx, ...)

Driver errors never leave the store: they are translated in one place
(``recorder.store.errors.store_errors``), the original chained with ``from``.
"""

from __future__ import annotations


class RecorderError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigError(RecorderError):
    pass


class StoreError(RecorderError):
    pass


class StoreUnavailable(StoreError):
    pass


class NotMigrated(StoreUnavailable):
    pass


class NotFound(StoreError):
    pass


class RunNotFound(NotFound):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} not found")
        self.run_id = run_id


class ThreadNotFound(NotFound):
    def __init__(self, thread_id: str) -> None:
        super().__init__(f"thread {thread_id!r} not found")
        self.thread_id = thread_id


class Conflict(StoreError):
    pass


class RunClosed(StoreError):
    pass


class AppendOnlyViolation(StoreError):
    pass


class InputError(RecorderError):
    pass


class UpstreamError(RecorderError):
    pass
