"""What a caller owes the database's answer: at most a deadline.

A database that stops answering (paused, behind a network partition) holds a query's
connection until it answers again: cancelling the query does not end the wait, for the
driver then waits for the server to confirm the cancel before it gives the connection back.
So a read with a deadline runs as a task of its own, and past the deadline the caller is
released with ``StoreUnavailable`` while the task, cancelled, is left to end whenever the
database lets it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from recorder.errors import StoreUnavailable

T = TypeVar("T")

_LEFT: set[asyncio.Task[Any]] = set()  # tasks let go past their deadline, until they end


async def within(work: Coroutine[Any, Any, T], seconds: float) -> T:
    """``work``'s result, or ``StoreUnavailable`` once ``seconds`` passed without it."""
    task = asyncio.ensure_future(work)
    try:
        finished, _ = await asyncio.wait((task,), timeout=seconds)
    except asyncio.CancelledError:
        _let_go(task)
        raise
    if not finished:
        _let_go(task)
        raise StoreUnavailable(f"the database did not answer within {seconds:g} s")
    return task.result()


def _let_go(task: asyncio.Task[Any]) -> None:
    task.cancel()
    _LEFT.add(task)
    task.add_done_callback(_ended)


def _ended(task: asyncio.Task[Any]) -> None:
    _LEFT.discard(task)
    if not task.cancelled():
        task.exception()  # retrieved: nobody waits for it any more
