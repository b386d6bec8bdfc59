"""``recorder fork`` with every option, through a server and through the database: the
strategy flags, a state from a file or a JSON Patch, an edited message, a regenerated turn,
and what the command says about each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import TOKEN, Recorded, recorder, run_main


def server(recorded: Recorded) -> tuple[str, ...]:
    return ("--url", recorded.url, "--token", TOKEN)


async def test_state_from_a_file_or_a_patch(recorded: Recorded, tmp_path: Path) -> None:
    patch = tmp_path / "patch.json"
    patch.write_text(json.dumps([{"op": "replace", "path": "/turns", "value": 41}]))
    done = await run_main(
        "fork",
        "t1-r1",
        "--patch",
        str(patch),
        "--message",
        "Hi",
        "--run-id",
        "p1",
        *server(recorded),
    )
    assert done.code == 0, done.err
    assert done.err == (
        "forked run p1 from run t1-r1 at its end, into a new thread, thread-p1 (new-thread)\n"
    )
    run = (await recorded.http.get("/runs/p1")).json()
    at = (await recorded.http.get("/runs/t1-r1/state")).json()["state"]
    assert run["input"]["state"] == {**at, "turns": 41}
    assert (await recorded.http.get("/threads/thread-p1/state")).json()["state"]["turns"] == 42

    state = tmp_path / "state.json"
    state.write_text('{"turns": 7}')
    done = await run_main(
        "fork", "t1-r1", "--state", str(state), "--dry-run", "--json", *server(recorded)
    )
    assert json.loads(done.out)["input"]["state"] == {"turns": 7}

    state.write_text("{not json")
    done = await run_main("fork", "t1-r1", "--state", str(state), "--dry-run", "--db", recorded.db)
    assert done.code == 2 and done.err.startswith(f"recorder: --state: {state} is not JSON (")
    done = await run_main("fork", "t1-r1", "--patch", str(tmp_path / "gone.json"), "--dry-run")
    assert done.code == 2
    assert done.err == (
        f"recorder: --patch: cannot read {tmp_path / 'gone.json'}: No such file or directory\n"
    )
    done = await recorder("fork", "t1-r1", "--state", str(state), "--patch", str(patch))
    assert done.code == 2 and "not allowed with argument" in done.err


async def test_edit_and_regenerate_through_the_database(recorded: Recorded) -> None:
    agent = ("--agent", f"demo={recorded.upstream}")
    done = await run_main(
        "fork",
        "t2-r3",
        "--edit",
        "t2-r2-u",
        "--text",
        "What about tomorrow?",
        "--run-id",
        "e1",
        "--db",
        recorded.db,
        *agent,
    )
    assert done.code == 0, done.err
    assert done.err == (
        "forked run e1 from run t2-r2 at its start, into a new thread, thread-e1 (new-thread)\n"
    )
    branch = (await recorded.http.get("/threads/thread-e1/state")).json()
    said = [m.get("content") for m in branch["messages"]]
    assert "What about tomorrow?" in said and "delete report.txt please" not in said
    shown = (await run_main("show", "thread-e1", "--db", recorded.db)).out
    assert "forked from thread t2, run t2-r2 at its start\n" in shown

    # Regenerate the first answer, on the parent's thread this time.
    done = await run_main(
        "fork",
        "t2-r3",
        "--regenerate",
        "t2-r1-a2",
        "--same-thread",
        "--run-id",
        "g1",
        "--db",
        recorded.db,
        *agent,
    )
    assert done.code == 0, done.err
    assert done.err == (
        "forked run g1 from run t2-r1 at its start, on its thread, t2 (same-thread)\n"
    )
    run = (await recorded.http.get("/runs/g1")).json()
    first = (await recorded.http.get("/runs/t2-r1")).json()["input"]
    assert (run["threadId"], run["parentRunId"], run["parentSeq"]) == ("t2", "t2-r1", -1)
    assert run["input"]["messages"] == first["messages"] and run["input"]["parentRunId"] == "t2-r1"
    shown = (await run_main("show", "t2", "--db", recorded.db)).out
    assert "  - g1  finished  36 events  forked at its start\n" in shown

    done = await run_main("fork", "t2-r3", "--edit", "t2-r2-u", "--dry-run", "--db", recorded.db)
    assert (done.code, done.err) == (2, "recorder: --edit MESSAGE_ID and --text TEXT go together\n")


@pytest.mark.parametrize("how", ["flag", "environment"])
async def test_a_fork_through_the_database_needs_the_agents_url(
    recorded: Recorded, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = await run_main("fork", "t1-r1", "--message", "Hi", "--db", recorded.db)
    assert done.code == 2
    assert done.err == (
        "recorder: run 't1-r1' was recorded through agent 'demo', whose URL this command does "
        "not know: give --agent demo=URL (or RECORDER_AGENTS=demo=URL, or a config file), or "
        "fork through the server with --url\n"
    )
    given: tuple[str, ...] = ()
    if how == "flag":
        given = ("--agent", f"demo={recorded.upstream}")
    else:
        monkeypatch.setenv("RECORDER_AGENTS", f"demo={recorded.upstream}")
    done = await run_main(
        "fork", "t1-r1", "--message", "Hi", "--run-id", f"via-{how}", "--db", recorded.db, *given
    )
    assert done.code == 0, done.err
    assert (await recorded.http.get(f"/threads/thread-via-{how}")).json()["runCount"] == 1


async def test_bad_options_are_one_line(recorded: Recorded) -> None:
    done = await run_main("fork", "t1-r1", "--at", "-5", "--dry-run", "--db", recorded.db)
    # Named by its flag, not by the API field behind it.
    assert done.err == "recorder: --at: Input should be greater than or equal to -1\n"
    assert done.err.count("\n") == 1
    # An empty id is refused, as the API refuses it, never replaced by a made-up one.
    for flag, problem in (
        ("--thread", "must be a non-empty string"),
        ("--run-id", "must be a non-empty string"),
    ):
        done = await run_main("fork", "t1-r1", flag, "", "--dry-run", "--db", recorded.db)
        assert (done.code, done.out, done.err) == (2, "", f"recorder: {flag} {problem}\n")
    done = await run_main("fork", "t1-r1", "--thread", "--dry-run", "--db", recorded.db)
    assert done.code == 0 and json.loads(done.out)["threadId"].startswith("thread-")
