"""``RecorderClient``: the async client, called from synchronous code.

Not a second implementation: every method is the async one, run on an event loop that the
client keeps in a thread of its own (an anyio blocking portal), so results, errors and
streams are the same objects, and it works where a loop is already running.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import ExitStack
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx
from anyio.from_thread import BlockingPortal, start_blocking_portal

from recorder.client.aio import AsyncRecorderClient

P = ParamSpec("P")
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


async def _wait(awaitable: Awaitable[T]) -> T:
    return await awaitable


async def _next(iterator: AsyncIterator[T]) -> tuple[bool, T | None]:
    try:
        return True, await iterator.__anext__()
    except StopAsyncIteration:
        return False, None


def _blocking(
    method: Callable[Concatenate[AsyncRecorderClient, P], Awaitable[T]],
) -> Callable[Concatenate[RecorderClient, P], T]:
    def call(self: RecorderClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._portal.call(_wait, method(self._client, *args, **kwargs))

    return _named(call, method)


def _blocking_iter(
    method: Callable[Concatenate[AsyncRecorderClient, P], AsyncIterator[T]],
) -> Callable[Concatenate[RecorderClient, P], Iterator[T]]:
    def call(self: RecorderClient, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        return self._iterate(method(self._client, *args, **kwargs))

    return _named(call, method)


def _named(call: F, method: Callable[..., Any]) -> F:
    call.__name__ = call.__qualname__ = method.__name__
    call.__doc__ = method.__doc__
    return call


class RecorderClient:
    """The same methods as ``AsyncRecorderClient``, blocking; iterators instead of async
    iterators. Use it as a context manager, or call ``close()``."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._exit = ExitStack()
        self._portal: BlockingPortal = self._exit.enter_context(start_blocking_portal())
        self._client = AsyncRecorderClient(
            base_url, token=token, timeout=timeout, transport=transport
        )
        self.base_url = self._client.base_url

    def __enter__(self) -> RecorderClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._portal.call(self._client.aclose)
        finally:
            self._exit.close()

    def _iterate(self, iterator: AsyncIterator[T]) -> Iterator[T]:
        try:
            while True:
                more, item = self._portal.call(_next, iterator)
                if not more:
                    return
                yield item  # type: ignore[misc]  # (more: item is a T)
        finally:
            close: Any = getattr(iterator, "aclose", None)
            if close is not None:
                self._portal.call(close)

    health = _blocking(AsyncRecorderClient.health)
    agents = _blocking(AsyncRecorderClient.agents)
    threads = _blocking(AsyncRecorderClient.threads)
    iter_threads = _blocking_iter(AsyncRecorderClient.iter_threads)
    thread = _blocking(AsyncRecorderClient.thread)
    run = _blocking(AsyncRecorderClient.run)
    events = _blocking(AsyncRecorderClient.events)
    iter_events = _blocking_iter(AsyncRecorderClient.iter_events)
    thread_state = _blocking(AsyncRecorderClient.thread_state)
    run_state = _blocking(AsyncRecorderClient.run_state)
    history = _blocking(AsyncRecorderClient.history)
    verify = _blocking(AsyncRecorderClient.verify)
    replay_run = _blocking_iter(AsyncRecorderClient.replay_run)
    replay_thread = _blocking_iter(AsyncRecorderClient.replay_thread)
    plan_fork = _blocking(AsyncRecorderClient.plan_fork)
    fork = _blocking_iter(AsyncRecorderClient.fork)
    export_jsonl = _blocking_iter(AsyncRecorderClient.export_jsonl)
    import_jsonl = _blocking(AsyncRecorderClient.import_jsonl)
    verify_chains = _blocking(AsyncRecorderClient.verify_chains)
    receipt = _blocking(AsyncRecorderClient.receipt)
    check_receipt = _blocking(AsyncRecorderClient.check_receipt)
    audit_log = _blocking(AsyncRecorderClient.audit_log)
    purge = _blocking(AsyncRecorderClient.purge)
    retention = _blocking(AsyncRecorderClient.retention)
    diff = _blocking(AsyncRecorderClient.diff)
    search = _blocking(AsyncRecorderClient.search)
    iter_search = _blocking_iter(AsyncRecorderClient.iter_search)
    reindex = _blocking(AsyncRecorderClient.reindex)
    annotations = _blocking(AsyncRecorderClient.annotations)
    set_tags = _blocking(AsyncRecorderClient.set_tags)
    add_note = _blocking(AsyncRecorderClient.add_note)
    remove_note = _blocking(AsyncRecorderClient.remove_note)
    set_score = _blocking(AsyncRecorderClient.set_score)
