"""The agent leg: how a run's request reaches its agent, and the answer a recording reads.

A recording reads an ``Answer``: a status and headers, then the body as it arrives. Two
legs give one: ``HttpLeg``, a POST over the network to the agent's URL (``upstream.py``),
and ``AppLeg`` (``inprocess.py``), an ASGI app of the same process called directly. The
recording, its guarantees and its faults are the same either way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from recorder.config import AgentConfig, Settings
from recorder.proxy.request import forwarded_headers
from recorder.proxy.upstream import Response, UpstreamClient


class Answer(Protocol):
    """The agent's answer. Every failure is an ``UpstreamError``."""

    @property
    def status(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]:
        """Lower-case names."""
        ...

    async def readany(self) -> bytes:
        """The next bytes of the body (b"" at its end); ``UpstreamTimeout`` after the idle
        timeout without any."""
        ...

    async def read_within(self, seconds: float) -> bytes | None:
        """Like ``readany``, but None when nothing came within ``seconds``."""
        ...

    def close(self) -> None:
        """Done with the answer (read whole or not)."""
        ...


class AgentLeg(Protocol):
    async def post(
        self, body: bytes, headers: Mapping[str, str], sent: Callable[[], None] | None = None
    ) -> Answer:
        """Send the run's input; returns once the answer's head arrived. ``sent`` is called
        as soon as the request is on its way (what the caller does then, the agent's time
        covers)."""
        ...


class HttpLeg:
    """An agent at a URL; only the headers the settings allow are forwarded, then the
    agent's configured ones."""

    def __init__(self, client: UpstreamClient, agent: AgentConfig, settings: Settings) -> None:
        self.client = client
        self.url = agent.url
        self._settings = settings
        self._own = {k.lower(): v for k, v in agent.headers.items()}

    async def post(
        self, body: bytes, headers: Mapping[str, str], sent: Callable[[], None] | None = None
    ) -> Response:
        forwarded = forwarded_headers(headers, self._settings)
        if self._own:
            forwarded |= self._own
        return await self.client.post(self.url, body, forwarded, sent)
