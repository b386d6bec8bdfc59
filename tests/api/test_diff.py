"""GET /runs/{id}/diff against a real recorder: the patch takes the source's state to the
target's, and the message changes are those between the two points' messages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import jsonpatch
import pytest

from recorder.client import AsyncRecorderClient
from recorder.errors import InputError, NotFound
from tests.servers import conversation, demo_upstream, recorder_at


@pytest.fixture
async def served(db_url: str) -> AsyncIterator[tuple[str, httpx.AsyncClient]]:
    async with (
        demo_upstream() as upstream,
        recorder_at(db_url, {"demo": upstream}) as rec,
        httpx.AsyncClient(base_url=rec, timeout=60, trust_env=False) as http,
    ):
        await conversation(http, rec, "c1")
        yield rec, http


async def state_at(http: httpx.AsyncClient, run: str, seq: int | None) -> dict[str, Any]:
    params = {} if seq is None else {"seq": seq}
    answer: dict[str, Any] = (await http.get(f"/runs/{run}/state", params=params)).json()
    return answer


def check(diff: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> None:
    assert jsonpatch.apply_patch(before["state"], diff["patch"]) == after["state"]
    old = {m["id"]: m for m in before["messages"]}
    new = {m["id"]: m for m in after["messages"]}
    changes = diff["messages"]
    assert [m["id"] for m in changes["added"]] == [i for i in new if i not in old]
    assert [m["id"] for m in changes["removed"]] == [i for i in old if i not in new]
    assert [c["id"] for c in changes["changed"]] == [
        i for i in new if i in old and old[i] != new[i]
    ]


async def test_diff_within_a_run_across_runs_and_across_a_fork(served: Any) -> None:
    rec, http = served
    run = (await http.get("/runs/c1-r1")).json()
    last = run["eventCount"] - 1
    for source, target in [(-1, None), (-1, 2), (2, last), (last, -1)]:
        params: dict[str, Any] = {"from": source}
        if target is not None:
            params["to"] = target
        answer = await http.get("/runs/c1-r1/diff", params=params)
        assert answer.status_code == 200, answer.text
        diff = answer.json()
        assert diff["source"] == {"runId": "c1-r1", "seq": source}
        check(diff, await state_at(http, "c1-r1", source), await state_at(http, "c1-r1", target))
    whole = (await http.get("/runs/c1-r1/diff")).json()
    assert whole["messages"]["added"] and not whole["messages"]["removed"]

    # Across runs of the thread, and across a fork that changed the state and a message.
    later = await http.get("/runs/c1-r1/diff", params={"from": last, "toRun": "c1-r3"})
    check(later.json(), await state_at(http, "c1-r1", last), await state_at(http, "c1-r3", None))
    body = {
        "runId": "c1-f1",
        "statePatch": [{"op": "add", "path": "/forked", "value": True}],
        "messages": ["What about Rome?"],
        "strategy": "same-thread",
    }
    async with http.stream("POST", "/runs/c1-r1/fork", json=body) as response:
        assert response.status_code == 200
        await response.aread()
    fork = (
        await http.get("/runs/c1-r1/diff", params={"from": -1, "toRun": "c1-f1", "toSeq": -1})
    ).json()
    assert fork["target"] == {"runId": "c1-f1", "seq": -1}
    # `to` names the target's seq with toRun too, and toSeq without it: never dropped.
    for params in ({"toRun": "c1-f1", "to": -1}, {"toSeq": 2}):
        answer = (await http.get("/runs/c1-r1/diff", params=params)).json()
        assert answer["target"]["seq"] == (-1 if "toRun" in params else 2), params
    both = await http.get("/runs/c1-r1/diff", params={"to": 1, "toSeq": 2})
    assert both.status_code == 422 and "give one" in both.json()["detail"]
    check(fork, await state_at(http, "c1-r1", -1), await state_at(http, "c1-f1", -1))
    assert {"op": "add", "path": "/forked", "value": True} in fork["patch"]
    assert any(m.get("content") == "What about Rome?" for m in fork["messages"]["added"])

    async with AsyncRecorderClient(rec) as client:
        typed = await client.diff("c1-r1", to_run="c1-f1", to_seq=-1)
        assert typed.to_json() == fork
        with pytest.raises(InputError):
            await client.diff("c1-r1", from_seq=10_000)
        with pytest.raises(NotFound):
            await client.diff("c1-r1", to_run="nope")
