"""``recorder redact``: a rule applied to recorded events through the sanctioned rewrite,
the chains re-sealed (``audit verify`` passes), the rewrite in the audit log."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

import pytest

from recorder.store import NewEvent, NewRun, SearchFilter, open_store
from recorder.timetravel.history import History
from recorder.timetravel.indexing import Indexer
from tests.cli.conftest import clean_env, recorder, run_main
from tests.conftest import stored_chunks, stored_inputs

SECRET = "alice@example.com"


async def _record(db: str) -> None:
    store = await open_store(db, migrate=True)
    try:
        for thread, text in (("t1", f"mail {SECRET} today"), ("t2", "nothing to hide")):
            run = f"{thread}-r"
            await store.create_run(NewRun(run, thread, agent="a", input=b'{"messages":[]}'))
            frames = [
                {"type": "RUN_STARTED", "threadId": thread, "runId": run},
                {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": text},
                {"type": "TEXT_MESSAGE_END", "messageId": "m"},
                {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
            ]
            await store.append(
                run, [NewEvent(json.dumps(f).encode(), str(f["type"])) for f in frames]
            )
            await store.set_status(run, "finished")
    finally:
        await store.close()


async def _payloads(db: str, run: str) -> list[bytes]:
    store = await open_store(db)
    try:
        return [event.payload for event in await store.read_events(run)]
    finally:
        await store.close()


async def test_redact_rewrites_what_a_rule_matches_and_reseals(db_url: str) -> None:
    await _record(db_url)
    before = await _payloads(db_url, "t1-r")
    untouched = await _payloads(db_url, "t2-r")

    done = await run_main("redact", "--rule", "email", "--dry-run", "--db", db_url, "--json", "-v")
    assert done.code == 0 and done.err.startswith("read the database "), done.err
    found = json.loads(done.out)
    assert found["events"] == 1 and [r["runId"] for r in found["runs"]] == ["t1-r"]
    assert await _payloads(db_url, "t1-r") == before  # a dry run changes nothing

    done = await run_main(
        "redact", "--rule", "email", "--rule", "card", "--reason", "erasure", "--db", db_url
    )
    assert done.code == 0, done.err
    assert "rewrote 1 events in 1 runs" in done.out
    after = await _payloads(db_url, "t1-r")
    assert b"[REDACTED:email]" in after[2] and SECRET.encode() not in b"".join(after)
    assert after[:2] == before[:2] and after[3:] == before[3:]
    assert await _payloads(db_url, "t2-r") == untouched

    done = await run_main("audit", "verify", "--db", db_url)
    assert done.code == 0, done.out + done.err
    done = await run_main("audit", "log", "--db", db_url, "--action", "rewrite", "--json")
    (action,) = json.loads(done.out)["actions"]
    assert (action["actor"], action["target"], action["outcome"]) == ("cli", "t1-r", "ok")
    # The record's reason names the rules that fired there (card, given, did not).
    store = await open_store(db_url)
    try:
        (record,) = await store.rewrites()
        assert record.reason == "redact (email): erasure"
    finally:
        await store.close()
    # Nothing left to redact: a second pass rewrites nothing.
    done = await run_main("redact", "--rule", "email", "--db", db_url, "--json")
    assert json.loads(done.out)["events"] == 0


async def test_redact_with_a_custom_pattern_and_bad_rules(db_url: str) -> None:
    await _record(db_url)
    done = await run_main("redact", "--rule", "word=hi+de", "--thread", "t2", "--db", db_url)
    assert done.code == 0, done.err
    assert b"[REDACTED:word]" in (await _payloads(db_url, "t2-r"))[2]
    for bad, said in [
        ("nosuchdetector", "give one of email, phone, card, token, ip, builtin"),
        ("broken=(", "pattern is not a regex"),
    ]:
        done = await run_main("redact", "--rule", bad, "--db", db_url)
        assert done.code == 2 and "--rule" in done.err and said in done.err, done.err
        assert "Traceback" not in done.err and "Value error" not in done.err
    done = await run_main("redact", "--db", db_url)
    assert done.code == 2 and "--rule" in done.err
    # It rewrites the database itself: a server named by RECORDER_URL is not where.
    done = await recorder(
        "redact", "--rule", "email", env=clean_env(RECORDER_URL="http://127.0.0.1:9")
    )
    assert done.code == 2 and "give --db URL" in done.err


async def test_the_state_after_a_redaction_is_the_redacted_one(db_url: str) -> None:
    # The checkpoint written when the run closed held the secret: it is dropped with the
    # rewrite and built again, so every read of the state gives the redacted text, the
    # same as a fold from the run's start.
    await _record(db_url)
    store = await open_store(db_url)
    try:
        await History(store).build_checkpoints("t1-r")
        _run, at = await History(store).state("t1-r")
        assert SECRET in at.messages[0]["content"]
    finally:
        await store.close()
    done = await run_main("redact", "--rule", "email", "--db", db_url)
    assert done.code == 0, done.err
    store = await open_store(db_url)
    try:
        assert await store.nearest_checkpoint("t1-r", 4) is not None  # built again
        for seq in (None, 1, 2, 3, 4):
            _run, at = await History(store).state("t1-r", seq)
            run = await store.get_run("t1-r")
            again = await History(store, checkpoint_every=0).project(run, seq)
            assert at == again
            if seq is None or seq >= 2:
                assert at.messages[0]["content"] == "mail [REDACTED:email] today"
    finally:
        await store.close()


async def test_search_after_a_redaction_finds_the_redacted_text_only(db_url: str) -> None:
    """The run's documents held the secret: they go with the rewrite, and the command
    indexes the run again from its rewritten events. The thread's summary is redacted
    too."""
    await _record(db_url)
    store = await open_store(db_url)
    try:
        assert await Indexer(store).index_pending() == 2
        (hit,) = (await store.search(SearchFilter(text="alice"))).items
        assert SECRET in hit.snippet
        # the thread's summary, as a recording proxy writes it when a run closes (an
        # older one's, with a line the run does not say: it is built again from the run)
        await store.set_summary("t1", f"hello\nmail {SECRET} today")
    finally:
        await store.close()
    done = await run_main("redact", "--rule", "email", "--db", db_url, "--dry-run", "--json")
    assert json.loads(done.out)["summaries"] == ["t1"]
    done = await run_main("redact", "--rule", "email", "--db", db_url)
    assert done.code == 0, done.err
    assert "redacted the summary of threads: t1" in done.out
    store = await open_store(db_url)
    try:
        assert (await store.search(SearchFilter(text="alice"))).items == []
        (hit,) = (await store.search(SearchFilter(text="today"))).items
        assert hit.snippet == "mail [REDACTED:email] today"
        assert await store.runs_to_index(10) == []
        assert (await store.get_thread("t1")).summary == "mail [REDACTED:email] today"
        assert (await store.get_thread("t2")).summary is None
    finally:
        await store.close()


@pytest.mark.parametrize("at_once", [50, 2])
async def test_a_secret_said_early_is_redacted_from_the_inputs_posted_after_it(
    db_url: str, at_once: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client posts the history back with every turn: a secret an agent said in the
    first run is in the input of every later one, and in the state each starts from. The
    inputs are redacted too, as the proxy redacts them at record time, and every later
    answer is free of it. Two runs at a time: the first pass replaces r1's input, from
    which r2's is kept as changes (kept whole first), the second r2's."""
    monkeypatch.setattr("recorder.timetravel.redact._INPUTS_AT_ONCE", at_once)
    store = await open_store(db_url, migrate=True)
    try:
        history: list[dict[str, str]] = [{"id": "u0", "role": "user", "content": "hi"}]
        for turn in range(3):
            run = f"r{turn}"
            posted = {"threadId": "t", "runId": run, "messages": history, "state": {}}
            body = json.dumps(posted).encode() + b" " * 1200  # kept as changes or a tree
            await store.create_run(NewRun(run, "t", agent="a", input=body))
            said = f"mail {SECRET} today" if turn == 0 else f"turn {turn}"
            frames = [
                {"type": "RUN_STARTED", "threadId": "t", "runId": run},
                {"type": "TEXT_MESSAGE_START", "messageId": f"a{turn}", "role": "assistant"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"a{turn}", "delta": said},
                {"type": "TEXT_MESSAGE_END", "messageId": f"a{turn}"},
                {"type": "RUN_FINISHED", "threadId": "t", "runId": run},
            ]
            await store.append(
                run, [NewEvent(json.dumps(f).encode(), str(f["type"])) for f in frames]
            )
            await store.set_status(run, "finished")
            history = [*history, {"id": f"a{turn}", "role": "assistant", "content": said}]
        _run, at = await History(store).state("r2")
        assert SECRET in json.dumps(at.messages)
    finally:
        await store.close()
    dry = await run_main("redact", "--rule", "email", "--db", db_url, "--json", "--dry-run")
    done = await run_main("redact", "--rule", "email", "--db", db_url)
    assert dry.code == 0 and done.code == 0, dry.err + done.err
    assert [(r["runId"], r["rules"]) for r in json.loads(dry.out)["inputs"]] == [
        ("r1", ["email"]),
        ("r2", ["email"]),
    ]
    assert "rewrote the posted inputs of 2 runs" in done.out
    store = await open_store(db_url)
    try:
        for run in ("r0", "r1", "r2"):
            got = await store.get_run(run)
            assert got.input is not None and SECRET.encode() not in got.input
            _run, at = await History(store).state(run)
            assert SECRET not in json.dumps(at.messages)
        _run, at = await History(store).state("r2")
        assert at.messages[1]["content"] == "mail [REDACTED:email] today"
        for run in ("r0", "r1", "r2"):  # built again, from the rewritten inputs
            found = await store.nearest_checkpoint(run, 4)
            assert found is not None and SECRET.encode() not in found[1]
        actions = await store.list_actions(action="rewrite_inputs")
        assert {a.target for a in actions} == {"t"} and {a.outcome for a in actions} == {"ok"}
        runs = sorted(run for a in actions for run in (a.detail or {})["runs"])
        assert runs == ["r1", "r2"] and len(actions) == (1 if at_once == 50 else 2)
        chunks = await stored_chunks(store)
        assert not any(SECRET.encode() in data for data in chunks)
        assert not any(SECRET.encode() in data for data in await stored_inputs(store))
    finally:
        await store.close()
    done = await run_main("audit", "verify", "--db", db_url)
    assert done.code == 0, done.out + done.err


async def test_redact_finds_an_address_a_model_streamed_in_pieces(db_url: str) -> None:
    store = await open_store(db_url, migrate=True)
    try:
        await store.create_run(NewRun("r", "t", agent="a", input=b'{"messages":[]}'))
        frames = [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
            *(
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": piece}
                for piece in ("write to ali", "ce@exam", "ple.com", " today")
            ),
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ]
        await store.append("r", [NewEvent(json.dumps(f).encode(), str(f["type"])) for f in frames])
        await store.set_status("r", "finished")
    finally:
        await store.close()

    done = await run_main("redact", "--rule", "email", "--db", db_url, "--json")
    assert done.code == 0, done.err
    (rewritten,) = json.loads(done.out)["runs"]
    assert rewritten["rewritten"] == [2, 3, 4]
    store = await open_store(db_url)
    try:  # what redaction did, as for record time (no key set: no keyed hashes)
        listed = [(r.seq, r.rules, r.mac) for r in await store.list_redactions("r")]
        assert listed == [(seq, ("email",), None) for seq in (2, 3, 4)]
    finally:
        await store.close()
    deltas = [json.loads(p).get("delta") for p in await _payloads(db_url, "r")]
    assert deltas[2:6] == ["write to [REDACTED:email]", "", "", " today"]
    done = await run_main("state", "t", "--db", db_url, "--json")
    assert done.code == 0, done.err
    assert json.loads(done.out)["messages"][0]["content"] == "write to [REDACTED:email] today"
    assert (await run_main("audit", "verify", "--db", db_url)).code == 0


async def test_redact_keeps_the_keyed_hash_of_what_it_found(db_url: str, tmp_path: Path) -> None:
    await _record(db_url)
    before = await _payloads(db_url, "t1-r")
    config = tmp_path / "recorder.toml"
    config.write_text('[redaction]\nkey = "k1"\nrules = []\n')
    done = await run_main("redact", "--rule", "email", "--config", str(config), "--db", db_url)
    assert done.code == 0, done.err
    store = await open_store(db_url)
    try:
        (row,) = await store.list_redactions("t1-r")
        assert (row.seq, row.rules) == (2, ("email",))
        assert row.mac == hmac.new(b"k1", before[2], hashlib.sha256).hexdigest()
    finally:
        await store.close()


async def test_a_posted_input_redacted_after_the_fact_gets_its_row_and_hash(
    db_url: str, tmp_path: Path
) -> None:
    """As at record time: seq -1, the rules, the keyed hash of the input as it was; an
    input already redacted there keeps its hash and gains the rules."""
    posted = json.dumps(
        {
            "threadId": "t",
            "runId": "r1",
            "messages": [{"id": "u", "role": "user", "content": SECRET}],
        }
    ).encode()
    store = await open_store(db_url, migrate=True)
    try:
        await store.create_run(NewRun("r1", "t", agent="a", input=posted))
        await store.set_status("r1", "finished")
    finally:
        await store.close()
    config = tmp_path / "recorder.toml"
    config.write_text('[redaction]\nkey = "k1"\nrules = []\n')
    done = await run_main("redact", "--rule", "email", "--config", str(config), "--db", db_url)
    assert done.code == 0, done.err
    done = await run_main(
        "redact", "--rule", "word=REDACTED", "--config", str(config), "--db", db_url
    )
    assert done.code == 0, done.err
    store = await open_store(db_url)
    try:
        (row,) = await store.list_redactions("r1")
        assert (row.seq, set(row.rules)) == (-1, {"email", "word"})
        assert row.mac == hmac.new(b"k1", posted, hashlib.sha256).hexdigest()
        got = await store.get_run("r1")
        assert got.input is not None and SECRET.encode() not in got.input
    finally:
        await store.close()
