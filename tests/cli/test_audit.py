"""Governance end to end: ``recorder audit verify|receipt|log`` and ``recorder purge`` on the
database of a running recorder, and the same through its API (``/audit/*``,
``/admin/purge``); tampering with the database is found both ways, receipts included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recorder.store import open_store
from tests.cli.conftest import TOKEN, Recorded, run_main
from tests.conftest import raw_sql


def _config(tmp_path: Path, key: str) -> str:
    path = tmp_path / "recorder.toml"
    path.write_text(f'audit_key = "{key}"\n')
    return str(path)


async def _tamper(db: str, run_id: str, seq: int) -> None:
    store = await open_store(db)
    try:
        if db.startswith("sqlite"):
            await raw_sql(store, "DROP TRIGGER events_no_update")
        else:
            await raw_sql(store, "DROP TRIGGER events_append_only ON events")
        await raw_sql(
            store, "UPDATE events SET payload = ? WHERE run_id = ? AND seq = ?", b"{}", run_id, seq
        )
    finally:
        await store.close()


async def test_verify_receipt_purge_and_tampering(recorded: Recorded, tmp_path: Path) -> None:
    db, http = recorded.db, recorded.http
    config = _config(tmp_path, "k3y")
    done = await run_main("audit", "verify", "--db", db)
    assert done.code == 0 and done.out.startswith("ok: ") and "verified" in done.out
    answer = (await http.get("/audit/verify", params={"threadId": "t1"})).json()
    assert answer["ok"] is True and answer["threads"] == 1 and answer["problems"] == []

    receipt = tmp_path / "receipt.json"
    done = await run_main("audit", "receipt", "--db", db, "--config", config, "--out", str(receipt))
    assert done.code == 0, done.err
    signed = json.loads(receipt.read_text())
    assert signed["signature"] and set(signed["threads"]) >= {"t1", "t2", "t2-branch"}
    assert "unsigned" not in done.err
    unsigned = await run_main("audit", "receipt", "--db", db)  # (no key in its settings)
    assert unsigned.code == 0 and json.loads(unsigned.out)["signature"] is None
    assert unsigned.err == "the receipt is unsigned: no audit_key is set where it was made\n"

    # A dry run over the API lists, deletes nothing; the CLI's purge deletes, with a tombstone.
    dry = await http.post("/admin/purge", json={"threadIds": ["t2"], "dryRun": True})
    assert dry.status_code == 200 and dry.json()["dryRun"] is True
    assert [t["threadId"] for t in dry.json()["threads"]] == ["t2"]
    assert (await http.get("/threads/t2")).status_code == 200
    done = await run_main(
        "purge", "--thread", "t2", "--reason", "erasure request", "--db", db, "--json"
    )
    assert done.code == 0, done.err
    purged = json.loads(done.out)
    assert purged["tombstone"] and purged["threads"][0]["threadId"] == "t2"
    assert (await http.get("/threads/t2")).status_code == 404

    # The receipt still proves the rest unchanged: t2 is gone with a tombstone.
    done = await run_main(
        "audit", "verify", "--receipt", str(receipt), "--db", db, "--config", config
    )
    assert done.code == 0, done.out + done.err
    assert "against the receipt of" in done.out

    # Someone with the database rewrites an event of t1: found, with where and what.
    await _tamper(db, "t1-r2", 3)
    done = await run_main("audit", "verify", "t1", "--db", db)
    assert done.code == 1
    assert "MISMATCH" in done.out and "thread t1 run t1-r2 seq 3: hash" in done.out
    answer = (await http.get("/audit/verify")).json()
    assert answer["ok"] is False
    assert [(p["threadId"], p["runId"], p["seq"]) for p in answer["problems"]] == [
        ("t1", "t1-r2", 3)
    ]
    done = await run_main(
        "audit", "verify", "--receipt", str(receipt), "--db", db, "--config", config
    )
    assert done.code == 1 and "t1-r2 seq 3" in done.out
    checked = await http.post("/audit/verify", content=receipt.read_bytes())
    assert checked.status_code == 422  # the server has no key to check the signature with
    assert "set audit_key" in checked.json()["detail"]

    # A receipt whose content was changed no longer matches its signature.
    signed["threads"]["t1"]["sealed"] = 1
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(signed))
    done = await run_main(
        "audit", "verify", "--receipt", str(forged), "--db", db, "--config", config
    )
    assert done.code == 1 and "signature does not match" in done.out


async def test_the_audit_log_lists_forks_imports_and_purges(
    recorded: Recorded, tmp_path: Path
) -> None:
    http = recorded.http
    exported = (await http.get("/export", params={"threadId": "t1"})).content
    assert (await http.post("/import", content=exported)).status_code == 200
    answer = await http.post("/admin/purge", json={"olderThan": "0s", "agent": "nope"})
    assert answer.status_code == 200 and answer.json()["threads"] == []
    unset = await http.post("/admin/retention", params={"dryRun": "true"})
    assert unset.status_code == 422 and "no retention is set" in unset.json()["detail"]
    bad = await http.post("/admin/purge", json={"olderThan": "soon"})
    assert bad.status_code == 422 and "not an age" in bad.json()["detail"]
    log = (await http.get("/audit/log")).json()
    seen = [(a["actor"], a["action"], a["target"], a["outcome"]) for a in log["actions"]]
    assert seen[0] == ("api_token", "purge", None, "ok")
    assert ("api_token", "import", None, "ok") in seen
    assert ("api_token", "fork", "t1-r1", "ok") in seen and (
        "api_token",
        "fork",
        "t2-r1",
        "ok",
    ) in seen
    fork = next(a for a in log["actions"] if a["target"] == "t2-r1")
    assert fork["detail"]["threadId"] == "t2-branch"
    done = await run_main("purge", "--thread", "nope", "--db", recorded.db)
    # An erasure that named a thread it did not erase did not do its job.
    assert done.code == 2 and "nope: no such thread" in done.out
    assert done.err == "not purged: nope\n"
    done = await run_main("audit", "log", "--db", recorded.db, "--json", "--limit", "1")
    (latest,) = json.loads(done.out)["actions"]
    assert (latest["actor"], latest["action"], latest["target"]) == ("cli", "purge", "nope")
    done = await run_main("audit", "log", "--db", recorded.db, "--action", "import")
    assert done.code == 0 and "import" in done.out and "purge" not in done.out
    # A dry run is in the log as one: it changed nothing.
    done = await run_main("purge", "--thread", "t1", "--dry-run", "--db", recorded.db)
    assert done.code == 0 and "would delete 1 threads" in done.out
    done = await run_main("audit", "log", "--db", recorded.db, "--limit", "2")
    dry, real = done.out.splitlines()
    assert " purge (dry) " in dry and " purge " in real and "(dry)" not in real
    done = await run_main("audit", "log", "--db", recorded.db, "--action", "nothing-like-it")
    assert done.out == "no actions match\n"


@pytest.mark.parametrize(
    "args",
    [
        ("purge",),
        ("purge", "--older-than", "x"),
        ("purge", "--older-than", "99999999999d", "--dry-run"),
        # --retention applies the settings: a selection beside it would be ignored.
        ("purge", "--retention", "--thread", "t1"),
        ("purge", "--retention", "--agent", "demo", "--dry-run"),
    ],
)
async def test_a_purge_that_names_nothing_usable_is_refused(
    recorded: Recorded, args: tuple[str, ...]
) -> None:
    done = await run_main(*args, "--db", recorded.db)
    assert done.code == 2 and done.err.startswith("recorder: ") and "Traceback" not in done.err
    assert (await recorded.http.get("/threads/t1")).status_code == 200


async def test_a_file_that_cannot_be_written_is_one_line(
    recorded: Recorded, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no" / "such" / "dir" / "f.json")
    for args in (("audit", "receipt"), ("export",)):
        done = await run_main(*args, "--db", recorded.db, "--out", missing)
        assert done.code == 2, (args, done.err)
        assert done.err.endswith(f"recorder: {missing}: No such file or directory\n")
        assert "Traceback" not in done.err


async def test_forks_and_imports_through_the_database_are_recorded_as_the_cli(
    recorded: Recorded, tmp_path: Path
) -> None:
    db = recorded.db
    agent = f"demo={recorded.upstream}"
    done = await run_main("fork", "t1-r1", "--message", "Again?", "--db", db, "--agent", agent)
    assert done.code == 0, done.err
    export = tmp_path / "t1.jsonl"
    assert (await run_main("export", "t1", "--out", str(export), "--db", db)).code == 0
    assert (await run_main("import", str(export), "--db", db)).code == 0
    done = await run_main("import", str(tmp_path / "missing.jsonl"), "--db", db)
    assert done.code == 2
    done = await run_main("audit", "log", "--db", db, "--json", "--limit", "2")
    latest = json.loads(done.out)["actions"]
    assert [(a["actor"], a["action"], a["outcome"]) for a in latest] == [
        ("cli", "import", "ok"),
        ("cli", "fork", "ok"),
    ]
    assert latest[0]["detail"]["runsSkipped"] > 0 and latest[1]["target"] == "t1-r1"


async def test_the_database_and_the_server_give_the_same_answers(
    recorded: Recorded, tmp_path: Path
) -> None:
    sides = (("--db", recorded.db), ("--url", recorded.url, "--token", TOKEN))
    answers = []
    for side in sides:
        verified = await run_main("audit", "verify", "t1", "t2-f", *side, "--json")
        assert verified.code == 0, verified.err
        dry = await run_main("purge", "--thread", "t2", "--dry-run", *side, "--json")
        assert dry.code == 0, dry.err
        purge = json.loads(dry.out)
        purge.pop("at")
        answers.append((json.loads(verified.out), purge))
    assert answers[0] == answers[1]
    assert answers[0][0]["threads"] == 1 and answers[0][0]["runs"] == 5  # t1 (4) and t2-f
    # A receipt from the server, checked through the server and against the database.
    receipt = tmp_path / "receipt.json"
    done = await run_main("audit", "receipt", *sides[1], "--out", str(receipt))
    assert done.code == 0, done.err
    for side in sides:
        done = await run_main("audit", "verify", "--receipt", str(receipt), *side)
        assert done.code == 0 and done.out.startswith("ok: "), done.out + done.err
    done = await run_main("purge", "--thread", "t2", "--reason", "gdpr", *sides[1], "--json")
    assert json.loads(done.out)["tombstone"]
    done = await run_main("audit", "log", *sides[1], "--limit", "1", "--json")
    (latest,) = json.loads(done.out)["actions"]
    assert (latest["actor"], latest["action"], latest["target"]) == ("api_token", "purge", "t2")
    done = await run_main("purge", "--retention", *sides[1])
    assert done.code == 2 and "no retention is set" in done.err
