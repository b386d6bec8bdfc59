"""``GET /runs/{id}/state`` and ``GET /threads/{id}/state`` as bare ASGI endpoints.

These are what a frontend asks on every reload, and their answers run to megabytes.
FastAPI's request handling in front of them (route matching through every router,
dependency solving, a ``Request``, its middleware's wrappers around each message) took
0.2-0.3 ms of a small answer and about 1 ms of a 2 MB one on a 2-core machine, a fifth
of the whole query. Here a request the routes would take as they are (one path segment
for the id; ``seq`` a plain integer, ``runId`` not empty, each given at most once, no
other parameter) is answered directly: the same checks in the same order (the token and
its ``read`` scope, the run or thread visible to it), the same body, every error
answered by ``deps.error_response`` as the routes' handlers answer it; the answer is sent
in the pieces ``History.answer_parts`` made it of. Anything else
(a malformed ``seq``, a parameter twice, a trailing slash) goes to the routes, which
answer it as they always did. The routes stay: they document the API and answer the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl

from starlette.types import Receive, Scope, Send

from recorder.api.access import check_scope, principal_for, visible_run, visible_thread
from recorder.api.deps import error_response
from recorder.api.proxy_endpoint import send_parts
from recorder.runtime import Runtime
from recorder.timetravel import views

_SEQ = re.compile(r"-?[0-9]{1,18}")  # what the routes' ``int`` reads the same way
_PARAMETERS = {"runs": frozenset({"seq"}), "threads": frozenset({"seq", "runId"})}


@dataclass(frozen=True, slots=True)
class StateRequest:
    collection: str  # "runs" or "threads"
    id: str
    seq: int | None
    run_id: str | None  # a thread's run (``runId``)


def state_request(path: str, query: bytes) -> StateRequest | None:
    """The state asked for by ``GET path?query``, when the bare endpoint answers it; None
    for any other request (the routes take it)."""
    collection, _, rest = path[1:].partition("/")
    allowed = _PARAMETERS.get(collection)
    if allowed is None:
        return None
    id_, slash, tail = rest.partition("/")
    if not id_ or not slash or tail != "state":
        return None
    given: dict[str, str] = {}
    # (as Starlette reads a query string: latin-1, then percent-decoded as UTF-8)
    for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if name not in allowed or name in given or not value:
            return None
        given[name] = value
    seq = given.get("seq")
    if seq is not None and not _SEQ.fullmatch(seq):
        return None
    return StateRequest(collection, id_, None if seq is None else int(seq), given.get("runId"))


async def serve_state(
    runtime: Runtime, wanted: StateRequest, scope: Scope, receive: Receive, send: Send
) -> None:
    """Answer ``wanted`` as the route ``GET /{collection}/{id}/state`` does."""
    try:
        principal = principal_for(runtime.settings, scope)
        check_scope(principal, "read")
        if wanted.collection == "runs":
            await visible_run(runtime, principal, wanted.id)
            parts = await views.run_state_parts(
                runtime.store, runtime.history, wanted.id, seq=wanted.seq
            )
        else:
            await visible_thread(runtime, principal, wanted.id)
            if wanted.run_id is not None:  # another thread's run, hidden: as an unknown one
                await visible_run(runtime, principal, wanted.run_id)
            parts = await views.thread_state_parts(
                runtime.store, runtime.history, wanted.id, run_id=wanted.run_id, seq=wanted.seq
            )
    except Exception as exc:
        await error_response(exc, runtime, "GET", scope["path"])(scope, receive, send)
        return
    # (the checkpoint's messages a view of it: 2 MB took a quarter of a millisecond to copy)
    await send_parts(send, 200, parts, "application/json")
