"""ClientOutput: what the client has yet to read, held, queued (bounded), ended or dropped."""

from __future__ import annotations

import asyncio

from recorder.proxy.output import QUEUED_BATCHES, ClientOutput, OutputState


def output() -> tuple[ClientOutput, list[str]]:
    told: list[str] = []
    return ClientOutput(lambda: told.append("left")), told


async def read_all(out: ClientOutput) -> list[bytes]:
    return await asyncio.wait_for(_collect(out), 5)


async def _collect(out: ClientOutput) -> list[bytes]:
    return [chunk async for chunk in out.chunks()]


async def test_what_is_put_before_open_reaches_the_client_as_one_chunk() -> None:
    out, _told = output()
    for chunk in (b"a", b"b", b"c"):
        await out.put(chunk)
    out.open()
    await out.put(b"d")
    await out.end()
    assert await read_all(out) == [b"abc", b"d"]


async def test_a_slow_client_holds_the_recording_back() -> None:
    out, _told = output()
    out.open()
    for n in range(QUEUED_BATCHES):
        await asyncio.wait_for(out.put(b"%d" % n), 1)
    blocked = asyncio.create_task(out.put(b"more"))
    await asyncio.sleep(0.05)
    assert not blocked.done()
    chunks = out.chunks()
    assert await anext(chunks) == b"0"
    await asyncio.wait_for(blocked, 1)  # one taken: room for one more
    await chunks.aclose()


async def test_a_client_that_leaves_is_told_once_and_no_longer_queued_for() -> None:
    out, told = output()
    out.open()
    await out.put(b"seen")
    chunks = out.chunks()
    assert await anext(chunks) == b"seen"
    await chunks.aclose()  # the client's connection closes the stream
    out.leave()
    assert told == ["left"] and out.state is OutputState.GONE
    for _ in range(3 * QUEUED_BATCHES):  # dropped, never waiting for a reader
        await asyncio.wait_for(out.put(b"unseen"), 1)
    await out.end()
    assert out.state is OutputState.GONE


async def test_ending_at_once_drops_what_was_not_read() -> None:
    out, told = output()
    out.open()
    await out.put(b"queued")
    out.end_now()
    assert await read_all(out) == []
    assert told == ["left"]  # reading to the end is leaving, too
