"""What outage tests share: streams whose every frame is kept as the client saw it, and the
check that the database holds exactly those frames once the journal is drained."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpx

from recorder.store import EventStore
from recorder.wire.sse import FrameSplitter
from tests.servers import eventually


@dataclass
class Seen:
    """One run as its client saw it: the HTTP status and every frame, (seq, data)."""

    run_id: str
    status: int = 0
    frames: list[tuple[int, bytes]] = field(default_factory=list)
    error: str | None = None


def body(thread: str, run: str, *, extra: int = 0, delay: float = 0.0) -> dict[str, Any]:
    return {
        "threadId": thread,
        "runId": run,
        "messages": [{"id": f"{run}-u", "role": "user", "content": "hi"}],
        "forwardedProps": {"demo": {"delay": delay, "extra": extra}},
    }


async def stream(
    client: httpx.AsyncClient, url: str, thread: str, run: str, *, extra: int = 0, delay: float = 0
) -> Seen:
    seen = Seen(run)
    splitter = FrameSplitter()
    try:
        async with client.stream(
            "POST", url, json=body(thread, run, extra=extra, delay=delay)
        ) as r:
            seen.status = r.status_code
            async for chunk in r.aiter_bytes():
                seen.frames += [(int(f.id or -1), f.data) for f in splitter.feed(chunk)]
        seen.frames += [(int(f.id or -1), f.data) for f in splitter.close()]
    except httpx.HTTPError as exc:
        seen.error = f"{type(exc).__name__}: {exc}"
    return seen


def assert_clean(seen: Seen) -> None:
    """The client saw a whole run and no error."""
    assert seen.error is None, (seen.run_id, seen.error)
    assert seen.status == 200, (seen.run_id, seen.status, seen.frames[:1])
    assert all(b"RUN_ERROR" not in data for _, data in seen.frames), (seen.run_id, seen.frames[-1])
    assert b"RUN_FINISHED" in seen.frames[-1][1], (seen.run_id, seen.frames[-1])


async def assert_recorded(store: EventStore, seen: Seen, status: str = "finished") -> None:
    """Every frame the client saw is in the database byte for byte, seqs gap-free."""
    run = await store.get_run(seen.run_id)
    events = await store.read_events(seen.run_id)
    assert [e.seq for e in events] == list(range(len(events))), seen.run_id
    recorded = [(e.seq, e.payload) for e in events]
    differ = next(
        (
            i
            for i, pair in enumerate(zip(recorded, seen.frames, strict=False))
            if pair[0] != pair[1]
        ),
        None,
    )
    if differ is not None:
        at = max(differ - 3, 0)
        print("RECORDED", [(s, p[-30:]) for s, p in recorded[at : differ + 4]])
        print("SEEN", [(s, p[-30:]) for s, p in seen.frames[at : differ + 4]])
    assert differ is None, (seen.run_id, differ, recorded[differ or 0], seen.frames[differ or 0])
    assert len(recorded) >= len(seen.frames), (seen.run_id, len(recorded), len(seen.frames))
    if status == "finished":
        assert len(events) == len(seen.frames), seen.run_id
    assert run.status == status, (seen.run_id, run.status, run.error)
    assert run.event_count == len(events)


async def drained(client: httpx.AsyncClient, base: str, timeout: float = 60) -> None:
    """Wait until the recorder at ``base`` reports its journal empty and its database up."""

    async def ok() -> bool:
        response = await client.get(f"{base}/healthz")
        return response.status_code == 200 and response.json()["status"] == "ok"

    await eventually(ok, "journal drained", timeout)


async def degraded(client: httpx.AsyncClient, base: str, timeout: float = 20) -> dict[str, Any]:
    """Wait until the recorder reports a degraded state, its journal holding records; its
    health answer."""
    answer: dict[str, Any] = {}

    async def check() -> bool:
        response = await client.get(f"{base}/healthz")
        answer.update(response.json())
        held = (answer.get("journal") or {}).get("bytes", 0)
        return response.status_code == 200 and answer.get("status") == "degraded" and held > 0

    await eventually(check, "degraded", timeout)
    return answer


async def gather_streams(*calls: Any) -> list[Seen]:
    return list(await asyncio.gather(*calls))
