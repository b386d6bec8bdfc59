"""The project's errors, in one tree.

    RecorderError
    ├── ConfigError             bad settings: an agent spec, a database URL
    ├── StoreError              anything the event store reports
    │   ├── StoreUnavailable    the database cannot be reached or opened
    │   │   └── NotMigrated     it has no recorder tables
    │   ├── NotFound            an unknown run, thread or agent
    │   │   ├── RunNotFound
    │   │   ├── ThreadNotFound
    │   │   └── AgentNotFound   no agent of that name is configured (raised by the proxy)
    │   ├── Conflict            a duplicate run id, a seq taken by a concurrent writer
    │   ├── RunClosed           appending to a run that has a terminal status
    │   └── AppendOnlyViolation the database refused to change a recorded event
    ├── InputError              a request or file we cannot use (bad JSON, missing ids)
    │   ├── BodyTooLarge        a posted body over ``max_body_bytes``
    │   └── FrameTooLarge       an SSE frame over ``max_frame_bytes`` (``recorder.wire.sse``)
    ├── TooManyRuns             ``max_concurrent_runs`` runs are being recorded already
    ├── Unauthenticated         no token, or one the recorder does not know (401)
    ├── Forbidden               a known token without the scope the action needs (403)
    ├── JournalCorrupt          the local journal is damaged (moved aside, kept, not replayed)
    └── UpstreamError           the agent behind the proxy cannot be reached, or its answer broke
        ├── ConnectFailed       no connection (refused, unresolvable, TLS, not an http(s) URL)
        ├── Disconnected        the connection ended before the whole answer, or it is not HTTP
        └── UpstreamTimeout     the agent was silent past the idle timeout (a TimeoutError too)

Driver errors never leave the store: they are translated in one place
(``recorder.store.errors.store_errors``), the original chained with ``from``. The agent client
(``recorder.proxy.upstream``) raises only ``UpstreamError``s; the proxy turns them into a
RUN_ERROR of its own on the client's stream (or the relayed answer), never into an HTTP error.
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


class AgentNotFound(NotFound):
    def __init__(self, name: str) -> None:
        super().__init__(f"no agent named {name!r} is configured")
        self.name = name


class Conflict(StoreError):
    pass


class RunClosed(StoreError):
    pass


class AppendOnlyViolation(StoreError):
    pass


class InputError(RecorderError):
    pass


class BodyTooLarge(InputError):
    pass


class TooManyRuns(RecorderError):
    pass


class Unauthenticated(RecorderError):
    pass


class Forbidden(RecorderError):
    pass


class JournalCorrupt(RecorderError):
    pass


class UpstreamError(RecorderError):
    pass


class ConnectFailed(UpstreamError):
    pass


class Disconnected(UpstreamError):
    pass


class UpstreamTimeout(UpstreamError, TimeoutError):
    pass
