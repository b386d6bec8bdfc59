"""The same commands against the database (``--db``) and a running server (``--url``) give
the same output, answers and errors alike."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import TOKEN, Recorded, clean_env, recorder, run_main

QUESTIONS = [
    ("threads",),
    ("threads", "--json"),
    ("threads", "--limit", "1", "--json"),
    ("threads", "--limit", "1", "--all", "--json"),
    ("threads", "--limit", "2"),
    ("threads", "--search", "Deleted report", "--status", "finished", "--agent", "demo"),
    ("show", "t1"),
    ("show", "t1", "--json"),
    ("show", "t1-r2"),
    ("show", "t1-f", "--json"),
    ("show", "t2"),
    ("show", "t2-branch"),
    ("show", "t2-branch", "--json"),
    ("events", "t1-r1", "--after", "3", "--limit", "2", "--json"),
    ("events", "t1-r1", "--limit", "10"),
    ("events", "t1-r1", "--limit", "7", "--all", "--json"),
    ("state", "t1"),
    ("state", "t1", "--json"),
    ("state", "t1", "--run", "t1-r2", "--seq", "3", "--json"),
    ("state", "t1", "--run", "t1-r1", "--seq", "-1"),
    ("history", "t1"),
    ("history", "t2", "--limit", "3", "--json"),
    ("replay", "t1-r2", "--no-follow"),
    ("replay", "t1-r2", "--after", "5", "--json"),
    ("replay", "t1", "--no-follow"),
    ("replay", "t2", "--compact", "--no-follow"),
    ("verify", "t1-r2"),
    ("verify", "t1-r2", "--json"),
    ("export", "t1"),
    ("fork", "t1-r1", "--at", "5", "--run-id", "x1", "--dry-run"),
    ("fork", "t1-r1", "--at", "5", "--run-id", "x1", "--dry-run", "--json"),
    ("fork", "t1-r1", "--thread", "--run-id", "x1", "--dry-run"),
    ("fork", "t1-r1", "--thread", "elsewhere", "--run-id", "x1", "--dry-run", "--json"),
    ("fork", "t1-r1", "--same-thread", "--run-id", "x1", "--dry-run"),
    ("fork", "t1-r3", "--edit", "t1-r2-u", "--text", "What now?", "--run-id", "x1", "--dry-run"),
    ("fork", "t1-r3", "--regenerate", "t1-r1-a2", "--run-id", "x1", "--dry-run", "--json"),
    # Errors, with the same words.
    ("state", "t1", "--run", "t2-r1"),
    ("state", "t1", "--run", "t1-r1", "--seq", "9999"),
    ("state", "t1", "--seq", "-2"),
    ("state", "nope"),
    ("show", "nope"),
    ("events", "nope"),
    ("events", "t1-r1", "--after", "-3"),
    ("replay", "nope"),
    ("replay", "t1-r1", "--after", "-2"),
    ("history", "nope"),
    ("verify", "nope"),
    ("export", "nope"),
    ("threads", "--status", "weird"),
    ("threads", "--limit", "0"),
    ("threads", "--since", "yesterday"),
    ("fork", "nope", "--run-id", "x2", "--dry-run"),
    ("fork", "t1-r1", "--at", "9999", "--run-id", "x2", "--dry-run"),
    ("fork", "t1-r1", "--thread", "t2", "--dry-run"),
    ("fork", "t1-r3", "--edit", "t1-r1-a2", "--text", "x", "--dry-run"),
    ("fork", "t1-r3", "--regenerate", "nope", "--dry-run"),
    # Ids no URL carries as a segment: none is recorded, so none is found, both ways.
    *[
        (command, unroutable)
        for unroutable in ("", ".", "..")
        for command in ("show", "events", "state", "history", "replay", "verify", "diff")
    ],
    ("state", "t1", "--run", ""),  # named, and empty: not "the latest"
    ("fork", "t1-r1", "--run-id", "t1-r2", "--dry-run"),  # taken: refused as the fork is
    ("export", "t1", "t1"),  # once
    ("tag", ".", "k=v"),
    ("note", "..", "text"),
    ("annotations", ""),
]


async def test_the_same_answers_both_ways(recorded: Recorded) -> None:
    for question in QUESTIONS:
        local = await run_main(*question, "--db", recorded.db)
        remote = await run_main(*question, "--url", recorded.url, "--token", TOKEN)
        assert (remote.code, remote.out, remote.err) == (local.code, local.out, local.err), question
        assert "Traceback" not in local.err, question
        if local.code:
            assert local.err.startswith("recorder: ") and local.err.count("\n") == 1, question


async def test_what_the_answers_say(recorded: Recorded) -> None:
    db = ("--db", recorded.db)
    done = await run_main("state", "t1", "--run", "", *db)
    assert (done.code, done.err) == (2, "recorder: run '' not found\n")
    done = await run_main("fork", "t1-r1", "--run-id", "t1-r2", "--dry-run", *db)
    assert (done.code, done.err) == (2, "recorder: run 't1-r2' already exists\n")
    once, twice = [(await run_main("export", *ids, *db)).out for ids in (["t1"], ["t1", "t1"])]
    assert once == twice and once.count("\n") > 10
    logged = json.loads((await run_main("audit", "log", "--json", *db)).out)["actions"]
    assert logged and all(action["at"].endswith("Z") for action in logged)
    done = await run_main("state", "t1", "--run", "t2-r1", *db)
    assert (done.code, done.err) == (2, "recorder: run 't2-r1' is not in thread 't1'\n")
    done = await run_main("state", "t1", "--run", "t1-r1", "--seq", "9999", *db)
    assert done.code == 2 and "seq 9999 is outside run 't1-r1'" in done.err
    done = await run_main("verify", "nope", *db)
    assert done.code == 2 and done.out == "" and "run 'nope' not found" in done.err
    done = await run_main("verify", "t1-r2", *db)
    count = (await recorded.http.get("/runs/t1-r2")).json()["eventCount"]
    assert (done.code, done.out) == (0, f"ok: {count} events\n")

    page = json.loads((await run_main("threads", "--limit", "1", "--json", *db)).out)
    assert len(page["threads"]) == 1 and page["nextCursor"]
    rest = json.loads(
        (await run_main("threads", "--cursor", page["nextCursor"], "--json", *db)).out
    )
    every = json.loads((await run_main("threads", "--all", "--limit", "1", "--json", *db)).out)
    assert every["nextCursor"] is None
    assert [t["threadId"] for t in every["threads"]] == [
        t["threadId"] for t in page["threads"] + rest["threads"]
    ]
    assert len(every["threads"]) == 4
    done = await run_main("threads", "--limit", "1", *db)
    assert f"more threads: --cursor {page['nextCursor']} (or --all)" in done.err

    # The API's shapes, camelCase.
    state = json.loads((await run_main("state", "t1", "--json", *db)).out)
    assert set(state) == {
        "threadId",
        "runId",
        "seq",
        "messages",
        "state",
        "pendingInterrupts",
        "problems",
    }
    assert state == (await recorded.http.get("/threads/t1/state")).json()
    shown = json.loads((await run_main("show", "t1", "--json", *db)).out)
    assert shown["thread"] == (await recorded.http.get("/threads/t1")).json()
    events = json.loads(
        (await run_main("events", "t1-r1", "--all", "--limit", "9", "--json", *db)).out
    )
    assert events == (await recorded.http.get("/runs/t1-r1/events")).json()

    # Human output: JSON values as JSON, and columns that hold long ids.
    text = (await run_main("state", "t1", *db)).out
    assert text.endswith('  state: {"turns":1,"topic":"Rome?","todo":["weather checked"]}\n')
    assert "None" not in text
    table = (await run_main("threads", *db)).out.splitlines()
    header, *rows = table
    status_at = header.index("STATUS")
    assert all(row[status_at - 2 : status_at] == "  " for row in rows), table
    assert any(row.startswith("a-thread-with-a-rather-long-identifier") for row in rows)
    done = await run_main("fork", "t1-r1", "--at", "5", "--dry-run", "--json", *db)
    plan = json.loads(done.out)
    assert (plan["parentRunId"], plan["parentSeq"], plan["strategy"]) == ("t1-r1", 5, "new-thread")
    assert plan["threadId"] == "thread-" + plan["input"]["runId"].removeprefix("run-")
    done = await run_main("fork", "t1-r1", "--same-thread", "--dry-run", *db)
    assert json.loads(done.out)["threadId"] == "t1"  # the input, printed as it is posted
    assert (
        done.err == "(to agent demo, from run t1-r1 at its end, on its thread, t1 (same-thread))\n"
    )

    # Lineage both ways, in words.
    origin = (await run_main("show", "t2", *db)).out
    assert (
        "- t2-r1  finished  36 events\n  > forked into thread t2-branch at its end  (1 run)\n"
        in origin
    )
    branch = (await run_main("show", "t2-branch", *db)).out
    assert branch.startswith(
        "thread t2-branch  (1 run, agent demo)\nforked from thread t2, run t2-r1 at its end\n"
    )


@pytest.mark.parametrize("where", ["db", "url"])
async def test_environment_settings_choose_the_source(recorded: Recorded, where: str) -> None:
    env = (
        clean_env(RECORDER_DB=recorded.db)
        if where == "db"
        else clean_env(RECORDER_URL=recorded.url, RECORDER_API_TOKEN=TOKEN)
    )
    done = await recorder("show", "t1", "-v", env=env)
    assert done.code == 0 and "t1-r1" in done.out
    said = "read the database" if where == "db" else f"asked the recorder at {recorded.url}"
    assert said in done.err
    if where == "url":
        # --db on the command line wins over RECORDER_URL; both flags are an error.
        done = await recorder("show", "t1", "-v", "--db", recorded.db, env=env)
        assert done.code == 0 and "read the database" in done.err
        done = await recorder("show", "t1", "--db", recorded.db, "--url", recorded.url, env=env)
        assert (done.code, done.err) == (2, "recorder: give --db or --url, not both\n")
        done = await recorder("threads", env=clean_env(RECORDER_URL=recorded.url))
        assert done.code == 2 and "401" in done.err and "token" in done.err
