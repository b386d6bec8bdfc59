"""Redaction as the proxy records: the stored bytes redacted and still valid JSON, the
projection of the redacted run, the client's stream byte for byte as without redaction, the
agent given the original input, the rules that fired and the keyed hash kept, imports."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import Response

from recorder.store import open_store
from tests.conftest import raw_sql
from tests.servers import Tee, recorder_at, scripted_upstream, serving, sse, sse_data, user

KEY = "audit-key"
REDACTION = {
    "rules": ["builtin", {"name": "ticket", "pattern": r"TCK-\d+", "where": ["tool_args"]}],
    "key": KEY,
}

EVENTS: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Write to bob@example.com, "},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "or carol@exa"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "mple.org."},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {
        "type": "TOOL_CALL_START",
        "toolCallId": "c1",
        "toolCallName": "refund",
        "parentMessageId": "m1",
    },
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"card":"4111 1111 1111 1111",'},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '"ticket":"TCK-4242"}'},
    {"type": "TOOL_CALL_END", "toolCallId": "c1"},
    {
        "type": "TOOL_CALL_RESULT",
        "messageId": "m2",
        "toolCallId": "c1",
        "content": "ok from 10.1.2.3",
    },
    {"type": "STATE_SNAPSHOT", "snapshot": {"user": {"ip": "2001:db8::1", "plan": "pro"}}},
    {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"},
]
RAW_FRAMES = [json.dumps(e, separators=(", ", ": ")).encode() for e in EVENTS]
SECRETS = [b"bob@example.com", b"4111 1111 1111 1111", b"TCK-4242", b"10.1.2.3", b"2001:db8::1"]
POSTED = {
    "threadId": "t1",
    "runId": "r1",
    "messages": [user("I am dave@example.net, key sk-abcdefghijklmnopqrstuvwx")],
    "state": {},
}


def agent(request: Request) -> Response:
    return sse([b"data: " + f + b"\n\n" for f in RAW_FRAMES])


async def run_once(db: str, tee_url: str, **settings: Any) -> bytes:
    async with (
        recorder_at(db, {"a": tee_url}, **settings) as rec,
        httpx.AsyncClient(base_url=rec, timeout=30, trust_env=False) as client,
    ):
        async with client.stream("POST", "/agents/a", json=POSTED) as answer:
            assert answer.status_code == 200
            return await answer.aread()


async def test_the_stored_run_is_redacted_and_the_stream_is_not(tmp_path: Path) -> None:
    async with serving(scripted_upstream({"a": agent})) as scripted:
        tee = Tee(f"{scripted}/a")
        async with serving(tee.app()) as tee_url:
            plain_db = f"sqlite+aiosqlite:///{tmp_path / 'plain.db'}"
            redacted_db = f"sqlite+aiosqlite:///{tmp_path / 'redacted.db'}"
            plain = await run_once(plain_db, tee_url + "/")
            streamed = await run_once(redacted_db, tee_url + "/", redaction=REDACTION)

    # The client's stream: byte for byte what it is without redaction, the agent's frames.
    assert streamed == plain
    assert sse_data(streamed) == RAW_FRAMES
    # The agent got the input as posted (the secrets in it included).
    assert [e.body() for e in tee.exchanges] == [POSTED, POSTED]

    store = await open_store(redacted_db)
    try:
        events = await store.read_events("r1")
        stored = [e.payload for e in events]
        for secret in SECRETS:
            assert not any(secret in p for p in stored), secret
        payloads = [json.loads(p) for p in stored]  # every stored frame: valid JSON
        assert payloads[2]["delta"] == "Write to [REDACTED:email], "
        # Split across two deltas: redacted once the run ended, through a sanctioned
        # rewrite of those two (the replacement where the address starts).
        assert payloads[3]["delta"] == "or [REDACTED:email]"
        assert payloads[4]["delta"] == "."
        assert not any(b"carol" in p or b"mple.org" in p for p in stored)
        (record,) = await store.rewrites()
        assert (record.actor, record.run_id, sorted(record.events)) == ("redaction", "r1", [3, 4])
        assert record.reason == "redact (email): split across streamed deltas"
        assert (await store.verify_chains(run_ids=["r1"])).ok
        assert payloads[7]["delta"] == '{"card":"[REDACTED:card]",'
        assert payloads[8]["delta"] == '"ticket":"[REDACTED:ticket]"}'
        assert payloads[10]["content"] == "ok from [REDACTED:ip]"
        assert payloads[11]["snapshot"] == {"user": {"ip": "[REDACTED:ip]", "plan": "pro"}}
        # Frames nothing matched keep their exact bytes.
        for i in (0, 1, 5, 6, 9, 12):
            assert stored[i] == RAW_FRAMES[i], i

        run = await store.get_run("r1")
        assert run.input is not None and b"dave@example.net" not in run.input
        assert (
            json.loads(run.input)["messages"][0]["content"]
            == "I am [REDACTED:email], key [REDACTED:token]"
        )

        # The rules that fired, and the keyed hash of each original.
        redactions = {r.seq: r for r in await store.list_redactions("r1")}
        assert set(redactions) == {-1, 2, 3, 4, 7, 8, 10, 11}
        for seq in (3, 4):  # the split address, redacted behind the run
            assert redactions[seq].rules == ("email",)
        assert redactions[7].rules == ("card",) and redactions[8].rules == ("ticket",)
        assert redactions[-1].rules == ("email", "token")
        for seq in (2, 3, 4, 7, 8, 10, 11):
            expected = hmac.new(KEY.encode(), RAW_FRAMES[seq], hashlib.sha256).hexdigest()
            assert redactions[seq].mac == expected
        posted_bytes = tee.exchanges[1].request
        assert (
            redactions[-1].mac == hmac.new(KEY.encode(), posted_bytes, hashlib.sha256).hexdigest()
        )

        # The thread's searchable text: redacted whole, so the split address is caught too.
        summary = (await store.get_thread("t1")).summary or ""
        assert "carol@example.org" not in summary and "dave@example.net" not in summary
        assert "[REDACTED:email]" in summary
        plain_store = await open_store(plain_db)
        try:
            assert await plain_store.list_redactions("r1") == []
        finally:
            await plain_store.close()
        rows = await raw_sql(store, "SELECT count(*) FROM redactions")
        assert rows == [(8,)]
    finally:
        await store.close()


async def test_a_redacted_run_projects_and_reads_over_http(tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'r.db'}"
    async with serving(scripted_upstream({"a": agent})) as scripted:
        async with (
            recorder_at(db, {"a": f"{scripted}/a"}, redaction=REDACTION) as rec,
            httpx.AsyncClient(base_url=rec, timeout=30, trust_env=False) as client,
        ):
            async with client.stream("POST", "/agents/a", json=POSTED) as answer:
                await answer.aread()
            # The address split across deltas is redacted behind the run, off its path.
            for _ in range(100):
                state = (await client.get("/runs/r1/state")).json()
                if "carol" not in state["messages"][1]["content"]:
                    break
                await asyncio.sleep(0.1)
            messages = state["messages"]
            assert messages[0]["content"] == "I am [REDACTED:email], key [REDACTED:token]"
            assistant = messages[1]
            assert assistant["content"] == "Write to [REDACTED:email], or [REDACTED:email]."
            args = json.loads(assistant["toolCalls"][0]["function"]["arguments"])
            assert args == {"card": "[REDACTED:card]", "ticket": "[REDACTED:ticket]"}
            assert messages[2]["content"] == "ok from [REDACTED:ip]"
            assert state["state"] == {"user": {"ip": "[REDACTED:ip]", "plan": "pro"}}
            assert (await client.get("/runs/r1/verify")).json()["ok"] is True
            listed = (await client.get("/runs/r1/redactions")).json()["redactions"]
            assert [(r["seq"], r["rules"]) for r in listed][:2] == [
                (-1, ["email", "token"]),
                (2, ["email"]),
            ]
            assert all(len(r["originalMac"]) == 64 for r in listed)
            found = (await client.get("/threads", params={"q": "bob@example"})).json()["threads"]
            assert found == []
            assert (await client.get("/runs/nope/redactions")).status_code == 404

            # An export taken here, imported into a recorder without rules: as stored.
            exported = (await client.get("/export")).content
            assert b"bob@example.com" not in exported


async def test_an_import_is_redacted(tmp_path: Path) -> None:
    plain_db = f"sqlite+aiosqlite:///{tmp_path / 'plain.db'}"
    other_db = f"sqlite+aiosqlite:///{tmp_path / 'other.db'}"
    async with serving(scripted_upstream({"a": agent})) as scripted:
        async with (
            recorder_at(plain_db, {"a": f"{scripted}/a"}) as rec,
            httpx.AsyncClient(base_url=rec, timeout=30, trust_env=False) as client,
        ):
            async with client.stream("POST", "/agents/a", json=POSTED) as answer:
                await answer.aread()
            exported = (await client.get("/export")).content
    assert b"bob@example.com" in exported
    async with (
        recorder_at(other_db, {}, redaction=REDACTION) as rec,
        httpx.AsyncClient(base_url=rec, timeout=30, trust_env=False) as client,
    ):
        jsonl = {"content-type": "application/x-ndjson"}
        report = await client.post("/import", content=exported, headers=jsonl)
        assert report.status_code == 200, report.text
        again = (await client.get("/export")).content
        for secret in (*SECRETS, b"dave@example.net"):
            assert secret not in again
        listed = (await client.get("/runs/r1/redactions")).json()["redactions"]
        # The address split across deltas 3 and 4 too, each with its original's keyed hash.
        assert {r["seq"] for r in listed} == {-1, 2, 3, 4, 7, 8, 10, 11}
        by_seq = {r["seq"]: r for r in listed}
        for seq in (3, 4):
            assert by_seq[seq]["rules"] == ["email"]
            expected = hmac.new(KEY.encode(), RAW_FRAMES[seq], hashlib.sha256).hexdigest()
            assert by_seq[seq]["originalMac"] == expected
        state = (await client.get("/runs/r1/state")).json()
        assert state["messages"][2]["content"] == "ok from [REDACTED:ip]"
        assert state["messages"][1]["content"] == "Write to [REDACTED:email], or [REDACTED:email]."


async def test_a_run_gone_before_its_split_secrets_were_looked_for_is_let_go(
    tmp_path: Path,
) -> None:
    """A run purged between its end and the redaction behind it: nothing to redact, and
    not tried again at every heartbeat."""
    from recorder.config import Settings
    from recorder.runtime import Runtime

    settings = Settings(db=f"sqlite+aiosqlite:///{tmp_path / 'r.db'}", redaction=REDACTION)
    runtime = await Runtime.start(settings)
    try:
        await runtime._redact_split("purged-meanwhile")
        assert runtime._unredacted == set()
    finally:
        await runtime.close()


async def test_a_run_whose_close_waits_is_redacted_once_it_closed(tmp_path: Path) -> None:
    """A run whose close is held back (the database blipped as it ended: the proxy closes
    it later) is still open when the redaction behind it comes: tried again, not dropped."""
    from recorder.config import Settings
    from recorder.runtime import Runtime
    from recorder.store import NewEvent, NewRun

    settings = Settings(db=f"sqlite+aiosqlite:///{tmp_path / 'r.db'}", redaction=REDACTION)
    runtime = await Runtime.start(settings)
    try:
        store = runtime.store
        await store.create_run(NewRun("r", "t", agent="a"))
        pieces = ("mail carol@exa", "mple.org now")
        await store.append(
            "r",
            [
                NewEvent(
                    json.dumps(
                        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": p}
                    ).encode(),
                    "TEXT_MESSAGE_CONTENT",
                )
                for p in pieces
            ],
        )
        await runtime._redact_split("r")
        assert runtime._unredacted == {"r"}  # still recording: later
        await store.set_status("r", "finished")
        await runtime._redact_split("r")  # (the heartbeat hands it back; here by hand)
        assert runtime._unredacted == set()
        stored = [json.loads(e.payload)["delta"] for e in await store.read_events("r")]
        assert stored == ["mail [REDACTED:email]", " now"]
        assert runtime._redact_tries == {}
    finally:
        await runtime.close()
