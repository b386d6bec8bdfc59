"""FrameReader: an agent's answer read into frames a bounded way ahead of the recording."""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import Response

from recorder.proxy.reader import READ_AHEAD, FrameReader
from recorder.proxy.upstream import UpstreamClient
from tests.servers import scripted_upstream, serving, sse

FRAMES = 10_000
PADDING = b"p" * 1000  # about 1 KB a frame: one read of the socket holds a few hundred


def flood(_request: Request) -> Response:
    chunks = [b'data: {"n":%d,"pad":"%s"}\n\n' % (n, PADDING) for n in range(FRAMES)]
    return sse([b"".join(chunks[i : i + 100]) for i in range(0, FRAMES, 100)])


async def test_a_reader_nobody_takes_from_stops_reading_and_loses_nothing() -> None:
    async with serving(scripted_upstream({"flood": flood})) as url:
        client = UpstreamClient(idle_timeout=10)
        try:
            response = await client.post(f"{url}/flood", b"{}", {})
            reader = FrameReader(response, None)
            reader.start("read-test")
            await asyncio.sleep(0.5)  # ample time to read all 10 MB, were it not held back
            first = await reader.take()
            assert first is not None and READ_AHEAD <= len(first) < READ_AHEAD + 1000
            taken = list(first)
            while (batch := await asyncio.wait_for(reader.take(), 10)) is not None:
                taken.extend(batch)
            assert reader.failure() is None
            assert [data[:16] for data in taken[:2]] == [
                b'{"n":0,"pad":"pp',
                b'{"n":1,"pad":"pp',
            ]
            assert [int(data[5 : data.index(b",")]) for data in taken] == list(range(FRAMES))
            await reader.stop()
        finally:
            await client.close()


async def test_a_broken_answer_is_the_reader_s_failure() -> None:
    def drop(_request: Request) -> Response:
        return sse([b'data: {"type":"RUN_STARTED"}\n\n'], then=ConnectionResetError("gone"))

    async with serving(scripted_upstream({"drop": drop})) as url:
        client = UpstreamClient(idle_timeout=10)
        try:
            reader = FrameReader(await client.post(f"{url}/drop", b"{}", {}), None)
            reader.start("read-test")
            taken = []
            while (batch := await asyncio.wait_for(reader.take(), 10)) is not None:
                taken.extend(batch)
            assert taken == [b'{"type":"RUN_STARTED"}']
            assert "mid-answer" in str(reader.failure())
            await reader.stop()
        finally:
            await client.close()


async def test_the_end_of_an_answer_is_known_once_every_frame_is_taken() -> None:
    """``ended``: nothing more will come. Not before reading started, not while the answer
    is open or frames wait to be taken, not after a broken answer; yes once it is over."""

    def slow(_request: Request) -> Response:
        return sse([b"data: 1\n\n", b"data: 2\n\n"], delay=0.2)

    def drop(_request: Request) -> Response:
        return sse([b"data: 1\n\n"], then=ConnectionResetError("gone"))

    async with serving(scripted_upstream({"slow": slow, "drop": drop})) as url:
        client = UpstreamClient(idle_timeout=10)
        try:
            reader = FrameReader(await client.post(f"{url}/slow", b"{}", {}), None)
            assert not await reader.ended()  # not reading yet
            reader.start("read-test")
            assert await reader.take() == [b"1"]
            assert not await reader.ended()  # open: the second frame is 0.2 s away
            await asyncio.sleep(0.5)
            assert not await reader.ended()  # over, but a frame waits to be taken
            assert await reader.take() == [b"2"]
            assert await reader.ended()
            assert await reader.take() is None
            await reader.stop()

            broken = FrameReader(await client.post(f"{url}/drop", b"{}", {}), None)
            broken.start("read-test")
            assert await broken.take() == [b"1"]
            await asyncio.sleep(0.2)
            assert not await broken.ended()
            assert broken.failure() is not None
            await broken.stop()
        finally:
            await client.close()
