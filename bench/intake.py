"""What the proxy checks in each request before it records it, against only parsing it.

Ours: ``parse_run_input`` (JSON, the id rule, the nesting limit), ``forwarded_headers``
(the allow list, hop-by-hop and ``Connection``-named headers, the recorder's token), the
``Host`` check and the content-type check, in process. Baseline: ``orjson.loads`` of the
same body. Two bodies: a 20-message conversation (few brackets: the nesting limit is a
count) and a 200-message one (more brackets than the limit: the nesting walk runs).
"""

from __future__ import annotations

import time

import orjson

from bench.context import Context
from bench.report import Row
from recorder.api import host_name
from recorder.api.proxy_endpoint import posts_json
from recorder.config import Settings, allowed_hosts
from recorder.proxy.request import forwarded_headers, parse_run_input

HEADERS = {
    "host": "127.0.0.1:8000",
    "content-type": "application/json",
    "accept": "text/event-stream",
    "authorization": "Bearer user-token",
    "user-agent": "bench",
    "connection": "keep-alive",
    "x-request-id": "abc",
}


def conversation(messages: int) -> bytes:
    history = [
        {
            "id": f"m{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"message {i} " + "words " * 20,
            **(
                {
                    "toolCalls": [
                        {
                            "id": f"c{i}",
                            "type": "function",
                            "function": {"name": "f", "arguments": "{}"},
                        }
                    ]
                }
                if i % 5 == 4
                else {}
            ),
        }
        for i in range(messages)
    ]
    body = {
        "threadId": "t",
        "runId": "r",
        "messages": history,
        "state": {"turn": messages},
        "tools": [],
        "context": [],
    }
    return orjson.dumps(body)


def per_request_us(work: object, body: bytes, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        work(body)  # type: ignore[operator]
    return (time.perf_counter() - started) / count * 1e6


async def run(ctx: Context) -> list[Row]:
    settings = Settings(api_token="recorder-token")
    hosts = allowed_hosts(settings)

    def ours(body: bytes) -> None:
        assert posts_json(HEADERS["content-type"])
        assert hosts is None or host_name(HEADERS["host"]) in hosts
        parse_run_input(body, settings.max_body_bytes)
        forwarded_headers(HEADERS, settings)

    count = 200 if ctx.plan.quick else 2000
    rows = []
    for messages in (20, 200):
        body = conversation(messages)
        ours(body)
        mine: list[float] = []
        base: list[float] = []
        for _ in range(ctx.plan.rounds):
            mine.append(per_request_us(ours, body, count))
            base.append(per_request_us(orjson.loads, body, count))
        rows.append(
            Row(
                "intake",
                f"request checks, {messages} messages ({len(body) // 1024} KB) vs orjson.loads",
                "us",
                mine,
                base,
                "added <= 50 us" if messages == 20 else "",
                (lambda o, b, _r: o - b <= 50) if messages == 20 else None,
                note=f"{count} requests per round, in process",
            )
        )
    return rows
