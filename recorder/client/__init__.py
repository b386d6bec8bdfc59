"""A Python client for a running recorder: ``AsyncRecorderClient`` and ``RecorderClient``.

    from recorder.client import RecorderClient

    with RecorderClient("http://127.0.0.1:8000", token=None) as recorder:
        for checkpoint in recorder.history("thread-1"):
            print(checkpoint.run_id, checkpoint.seq, len(checkpoint.messages))

Results are the API's own response models (``recorder.models``); errors are the project's
(``NotFound``, ``Conflict``, ``InputError``, ``StoreUnavailable``, ``UpstreamError``,
``RecorderError``), each with the server's sentence. The client imports neither FastAPI
nor a database driver. ``RecorderClient`` is the async client run on an event loop of its
own, in a thread, so it also works where a loop is already running (a notebook).
"""

from recorder.client.aio import AsyncRecorderClient
from recorder.client.blocking import RecorderClient
from recorder.models import (
    Checkpoint,
    Event,
    EventPage,
    ForkOptions,
    ForkOrigin,
    ForkPlan,
    Health,
    ImportReport,
    MessageEdit,
    Run,
    State,
    StreamedEvent,
    Thread,
    ThreadDetail,
    ThreadPage,
    Verification,
)

__all__ = [
    "AsyncRecorderClient",
    "Checkpoint",
    "Event",
    "EventPage",
    "ForkOptions",
    "ForkOrigin",
    "ForkPlan",
    "Health",
    "ImportReport",
    "MessageEdit",
    "RecorderClient",
    "Run",
    "State",
    "StreamedEvent",
    "Thread",
    "ThreadDetail",
    "ThreadPage",
    "Verification",
]
