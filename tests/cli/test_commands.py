"""The ``recorder`` command as a user meets it: the real program, in a real shell pipe."""

from __future__ import annotations

import asyncio
import json
import shlex
import socket
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import RECORDER, TOKEN, Recorded, clean_env, recorder, run_main
from tests.servers import free_port

READS = [
    ("threads",),
    ("show", "t"),
    ("state", "t"),
    ("history", "t"),
    ("events", "r"),
    ("replay", "r"),
    ("export",),
    ("verify", "r"),
    ("fork", "r", "--dry-run"),
]


async def test_version() -> None:
    done = await recorder("--version")
    assert (done.code, done.out) == (0, "recorder 0.1.0\n")


async def test_read_commands_never_create_or_migrate_a_database(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    url = f"sqlite+aiosqlite:///{missing}"
    for question in READS:
        done = await run_main(*question, "--db", url)
        assert done.code == 2, question
        assert done.err == (
            f"recorder: no database at {missing}: `recorder migrate --db {url}` creates one "
            "(so does `recorder serve`)\n"
        ), question
    assert not missing.exists()
    done = await recorder("threads", "--db", url)  # the real program says the same
    assert done.code == 2 and f"no database at {missing}" in done.err and not missing.exists()
    # A database no recorder made: its tables are missing, and they stay missing.
    empty = tmp_path / "empty.db"
    empty.touch()
    done = await run_main("threads", "--db", f"sqlite+aiosqlite:///{empty}")
    assert done.code == 2 and "has no recorder tables: `recorder migrate" in done.err
    done = await run_main("migrate", "--db", url)
    assert (done.code, done.out) == (0, f"migrated sqlite+aiosqlite:///{missing}\n")
    assert (await run_main("threads", "--db", url)).out == "no threads recorded\n"


async def test_import_creates_a_database_and_is_idempotent_both_ways(
    recorded: Recorded, tmp_path: Path
) -> None:
    export = tmp_path / "t1.jsonl"
    done = await run_main("export", "t1", "--out", str(export), "--db", recorded.db)
    assert done.code == 0 and export.read_bytes().count(b"\n") > 10
    fresh = f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    first = await run_main("import", str(export), "--db", fresh)
    assert (first.code, first.out) == (
        0,
        f"imported 4 runs (0 already present), {_events(export)} events\n",
    )
    again = await run_main("import", str(export), "--db", fresh, "--json")
    assert json.loads(again.out) == {
        "runsCreated": 0,
        "runsSkipped": 4,
        "eventsAdded": 0,
        "annotationsRestored": 0,
        "runsPurged": 0,
    }
    # Through the server that recorded them: everything is there already.
    remote = await run_main(
        "import", str(export), "--url", recorded.url, "--token", TOKEN, "--json"
    )
    assert json.loads(remote.out) == {
        "runsCreated": 0,
        "runsSkipped": 4,
        "eventsAdded": 0,
        "annotationsRestored": 0,
        "runsPurged": 0,
    }
    copied = await run_main("show", "t1", "--json", "--db", fresh)
    original = await run_main("show", "t1", "--json", "--db", recorded.db)
    assert json.loads(copied.out)["state"] == json.loads(original.out)["state"]
    done = await run_main("import", str(tmp_path / "nothing.jsonl"), "--db", fresh)
    assert done.code == 2 and "cannot read" in done.err


def _events(export: Path) -> int:
    return sum(1 for line in export.read_bytes().splitlines() if b'"kind":"event"' in line)


@pytest.mark.parametrize("where", ["db", "url"])
async def test_a_closed_pipe_ends_quietly(recorded: Recorded, where: str) -> None:
    source = (
        f"--db {shlex.quote(recorded.db)}"
        if where == "db"
        else f"--url {recorded.url} --token {TOKEN}"
    )
    script = f"set -o pipefail; {RECORDER} replay long --no-follow {source} | head -n 2 >/dev/null"
    proc = await asyncio.create_subprocess_exec(
        "bash", "-c", script, stderr=asyncio.subprocess.PIPE, env=clean_env()
    )
    _out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert (proc.returncode, err.decode()) == (0, "")


async def test_verify_an_unknown_run_fails(recorded: Recorded) -> None:
    for source in (("--db", recorded.db), ("--url", recorded.url, "--token", TOKEN)):
        done = await recorder("verify", "no-such-run", *source)
        assert done.code == 2 and done.out == ""
        assert done.err == "recorder: no file 'no-such-run', and run 'no-such-run' not found\n"


async def test_fork_through_the_server_and_the_database(recorded: Recorded) -> None:
    remote = await run_main(
        "fork",
        "t2-r1",
        "--at",
        "12",
        "--message",
        "Rome?",
        "--run-id",
        "via-url",
        "--url",
        recorded.url,
        "--token",
        TOKEN,
    )
    assert remote.code == 0 and remote.err == (
        "forked run via-url from run t2-r1 after seq 12, into a new thread, thread-via-url "
        "(new-thread)\n"
    )
    assert remote.out.startswith("id: 0\ndata: {") and '"RUN_FINISHED"' in remote.out
    run = (await recorded.http.get("/runs/via-url")).json()
    assert (run["parentRunId"], run["parentSeq"], run["status"]) == ("t2-r1", 12, "finished")
    assert run["threadId"] == "thread-via-url"

    done = await run_main("fork", "t2-r1", "--at", "12", "--db", recorded.db)
    assert done.code == 2 and "give --agent demo=URL" in done.err and "--url" in done.err
    done = await run_main(
        "fork", "t2-r1", "--agent", "demo=http://x/", "--url", recorded.url, "--token", TOKEN
    )
    assert done.code == 2 and "--agent is for forks through the database" in done.err


async def test_serve_says_listening_once_bound_and_fails_in_one_line(tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'served.db'}"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = await recorder("serve", "--port", str(port), "--db", db)
        assert done.code == 2 and done.out == ""
        assert done.err.startswith(f"recorder: cannot listen on 127.0.0.1:{port}: ")
        assert done.err.count("\n") == 1 and "in use" in done.err
        # What stops the recorder's own start: one line too, exit 2 (was uvicorn's
        # traceback and its exit 3).
        a_file = tmp_path / "a-file"
        a_file.write_text("")
        for setting, said in [
            ({"RECORDER_METRICS_ADDRESS": "nope"}, "metrics_address must be HOST:PORT"),
            ({"RECORDER_METRICS_ADDRESS": f"127.0.0.1:{port}"}, f"127.0.0.1:{port}"),
            ({"RECORDER_JOURNAL_DIR": str(a_file)}, "cannot write the journal"),
        ]:
            env = clean_env(**setting)
            done = await recorder("serve", "--port", str(free_port()), "--db", db, env=env)
            assert done.code == 2 and done.out == "", (setting, done.err)
            assert done.err.startswith("recorder: ") and said in done.err, (setting, done.err)
            assert "Traceback" not in done.err, setting

    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        RECORDER,
        "serve",
        "--port",
        str(port),
        "--db",
        db,
        "--demo-agent",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(),
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert line.startswith(f"recorder listening on http://127.0.0.1:{port} ")
        # Said only once it is bound: the first request right after it is answered.
        async with httpx.AsyncClient(trust_env=False) as http:
            health = await http.get(f"http://127.0.0.1:{port}/healthz")
        assert health.status_code == 200 and health.json()["ok"] is True
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


async def test_the_demo_hints_work_as_printed(tmp_path: Path) -> None:
    done = await recorder("demo", cwd=tmp_path)
    assert done.code == 0, done.err
    text = done.out
    assert "interrupted" in text and "Deleted report.txt." in text
    assert (tmp_path / "recorder.db").exists()
    hints = text.split("look again (the same database):\n", 1)[1].splitlines()
    commands = [shlex.split(line) for line in hints if line.startswith(f"  {RECORDER} ")]
    assert [c[1] for c in commands] == ["threads", "show", "show", "history", "serve"]
    thread, branch = commands[1][2], commands[2][2]
    db = commands[0][commands[0].index("--db") + 1]
    # The fork is after the first answer, complete: run-1's RUN_FINISHED, its last event.
    events = await run_main("events", f"{thread}-run-1", "--all", "--json", "--db", db)
    recorded = json.loads(events.out)["events"]
    assert recorded[-1]["type"] == "RUN_FINISHED"
    point = recorded[-1]["seq"]
    assert f"> forked into thread {branch} after seq {point}  (1 run)\n" in text
    assert f"forked run-1 after seq {point} (its RUN_FINISHED" in text
    assert f"into a new thread, {branch} (new-thread)" in text
    # The branch next to the original: the same first turn, then each its own.
    columns = text.split("asking something else:\n", 1)[1]
    assert "| user: What's the weather like?" in columns
    assert "user: Please delete report.txt" in columns
    assert "* user: Actually, what about Rome?" in columns
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for command in commands[:4]:
        seen = await recorder(*command[1:], cwd=elsewhere)  # the same --db, from anywhere
        assert seen.code == 0 and thread in seen.out, (command, seen.err)
    shown = await recorder(*commands[2][1:], cwd=elsewhere)
    assert f"forked from thread {thread}, run {thread}-run-1 after seq {point}\n" in shown.out
    # The web timeline: serve as printed (on a free port instead of 8000), open the address.
    serve = commands[4]
    assert serve[serve.index("--port") + 1] == "8000"
    port = free_port()
    serve[serve.index("--port") + 1] = str(port)
    (address,) = [line.strip() for line in hints if line.strip().startswith("http://")]
    assert address == f"http://127.0.0.1:8000/#/threads/{thread}"
    proc = await asyncio.create_subprocess_exec(
        *serve,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=clean_env(),
        cwd=elsewhere,
    )
    try:
        assert proc.stdout is not None
        await asyncio.wait_for(proc.stdout.readline(), 60)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as http:
            page = await http.get(address.replace(":8000", f":{port}").split("#")[0])
            assert page.status_code == 200 and "<html" in page.text.lower()
            assert (await http.get(f"/threads/{thread}")).json()["runCount"] == 3
            assert (await http.get(f"/threads/{branch}")).json()["runCount"] == 1
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


async def test_errors_are_one_line(tmp_path: Path) -> None:
    done = await run_main("fold", str(tmp_path / "missing.json"))
    assert done.code == 2 and "cannot read" in done.err and "Traceback" not in done.err
    done = await recorder("threads", "--db", "postgresql+asyncpg://postgres:pw@127.0.0.1:1/x")
    assert done.code == 2 and "Traceback" not in done.err
    # What the database's trouble is, and which one (never its password).
    assert done.err == (
        "recorder: cannot connect to PostgreSQL database 'x' at 127.0.0.1:1 as 'postgres': "
        "Connection refused\n"
    )
    not_a_database = tmp_path / "notes.txt"
    not_a_database.write_text("hello")
    for path, why in [
        (not_a_database, "the file is not a SQLite database"),
        (tmp_path, "it cannot be opened"),
    ]:
        done = await run_main("threads", "--db", f"sqlite+aiosqlite:///{path}")
        assert done.code == 2 and done.err.startswith(
            f"recorder: cannot open SQLite database '{path}': {why}"
        ), done.err
    done = await run_main("threads", "--db", "mysql://root:pw1@db/x?password=pw2")
    assert done.code == 2 and "unsupported database URL" in done.err
    assert "pw1" not in done.err and "pw2" not in done.err
    done = await run_main("serve", "--agent", "no-equals-sign")
    assert done.code == 2 and "NAME=URL" in done.err
    done = await run_main("threads", "--url", f"http://127.0.0.1:{free_port()}")
    assert done.code == 2 and "cannot reach the recorder at" in done.err


async def test_rebuild_drops_and_builds_checkpoints_to_the_same_answers(tmp_path: Path) -> None:
    from recorder.store import NewEvent, NewRun, open_store
    from recorder.timetravel.history import History
    from tests.conftest import raw_sql

    url = f"sqlite+aiosqlite:///{tmp_path / 'r.db'}"
    store = await open_store(url, migrate=True)
    frames = [
        b'{"type":"RUN_STARTED","threadId":"t","runId":"r"}',
        *(
            json.dumps(
                {"type": "STATE_DELTA", "delta": [{"op": "add", "path": f"/k{i}", "value": i}]}
            ).encode()
            for i in range(30)
        ),
        b'{"type":"RUN_FINISHED","threadId":"t","runId":"r"}',
    ]
    try:
        await store.create_run(NewRun("r", "t", input=b'{"messages":[],"state":{}}'))
        await store.append("r", [NewEvent(f, None) for f in frames])
        await store.set_status("r", "finished")
        before = (
            await History(store, checkpoint_every=0).project(await store.get_run("r"))
        ).to_json()
        await raw_sql(
            store, "INSERT INTO checkpoints (run_id, seq, data) VALUES ('r', 31, ?)", b"{}"
        )
    finally:
        await store.close()
    done = await run_main("rebuild", "--db", url)
    assert (done.code, done.out) == (
        0,
        f"rebuilt the checkpoints of 1 runs and the summaries of 0 threads in {url}\n",
    )
    store = await open_store(url)
    try:
        seqs = [s for (s,) in await raw_sql(store, "SELECT seq FROM checkpoints ORDER BY seq")]
        assert seqs == [31]  # the forged one gone, the run's end built again
        after = (await History(store).project(await store.get_run("r", input=False))).to_json()
        assert after == before
    finally:
        await store.close()


async def test_a_command_names_its_own_unknown_arguments() -> None:
    """Said by the command's parser, with its usage, not the top level's."""
    done = await recorder("fork", "r1", "--bogus", "x")
    assert done.code == 2 and "Traceback" not in done.err
    assert done.err.startswith("usage: recorder fork ")
    assert done.err.splitlines()[-1] == "recorder fork: error: unrecognized arguments: --bogus x"
    done = await recorder("audit", "verify", "--bogus")
    assert done.code == 2 and done.err.startswith("usage: recorder audit verify ")
    assert done.err.splitlines()[-1] == (
        "recorder audit verify: error: unrecognized arguments: --bogus"
    )


async def test_fork_takes_the_point_as_state_does(recorded: Recorded) -> None:
    """``--seq`` (as ``state --seq``) and ``--at`` name the same point."""
    asked = ("t1-r1", "--thread", "elsewhere", "--run-id", "x1", "--dry-run", "--json")
    at = await run_main("fork", *asked, "--at", "5", "--db", recorded.db)
    seq = await run_main("fork", *asked, "--seq", "5", "--db", recorded.db)
    end = await run_main("fork", *asked, "--db", recorded.db)
    assert at.code == 0 and seq.out == at.out
    assert seq.out != end.out  # (the point is taken, not the run's end)


async def test_recorded_text_never_drives_the_terminal(tmp_path: Path) -> None:
    from recorder.store import NewEvent, NewRun, open_store

    url = f"sqlite+aiosqlite:///{tmp_path}/r.db"
    said = "paint \x1b[31mred\x1b[0m, \u202eevil\u202c\rover"
    store = await open_store(url, migrate=True)
    try:
        posted = json.dumps({"messages": [{"id": "u", "role": "user", "content": said}]})
        await store.create_run(NewRun("r", "t", "a", input=posted.encode()))
        frames = [
            {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": said},
            {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        ]
        await store.append("r", [NewEvent(json.dumps(f).encode(), f["type"]) for f in frames])
        await store.set_status("r", "finished", summary=said)
    finally:
        await store.close()
    for args in (("show", "t"), ("state", "t"), ("history", "t"), ("search", "paint")):
        done = await run_main(*args, "--db", url)
        assert done.code == 0, (args, done.err)
        for unseen in ("\x1b", "\u202e", "\u202c", "\r"):
            assert unseen not in done.out, (args, unseen)
        assert "\\x1b[31mred" in done.out and "\\u202eevil" in done.out, args
    # JSON stays JSON: a program reading it gets the text as recorded.
    done = await run_main("state", "t", "--db", url, "--json")
    assert json.loads(done.out)["messages"][0]["content"] == said


async def test_what_a_script_meets_does_not_surprise_it(recorded: Recorded, tmp_path: Path) -> None:
    db, url = recorded.db, recorded.url
    # A fork whose agent cannot be reached is recorded, and the command says it failed.
    gone = f"demo=http://127.0.0.1:{free_port()}/"
    done = await run_main("fork", "t2-r1", "--run-id", "f-gone", "--db", db, "--agent", gone)
    assert done.code == 2 and "upstream_unreachable" in done.out, done.err
    assert "the forked run ended in an error" in done.err
    assert (await recorded.http.get("/runs/f-gone")).json()["status"] == "error"
    # --thread naming the parent's thread is a fork on it, as threadId is for the API.
    done = await run_main("fork", "t2-r1", "--thread", "t2", "--dry-run", "--db", db, "--json")
    assert done.code == 0, done.err
    plan = json.loads(done.out)
    assert (plan["strategy"], plan["threadId"]) == ("same-thread", "t2")
    # A score JSON cannot carry is refused alike through the server and the database.
    for where in (("--url", url, "--token", TOKEN), ("--db", db)):
        for value in ("nan", "inf"):
            done = await run_main("score", "t1", value, *where)
            assert done.code == 2 and "finite number" in done.err, (where, done.err)
    # An export that fails leaves the file it was to write as it was.
    kept = tmp_path / "keep.jsonl"
    kept.write_text("precious\n")
    done = await run_main("export", "nope", "--out", str(kept), "--db", db)
    assert done.code == 2 and kept.read_text() == "precious\n"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")]
    done = await run_main("export", "t1", "--out", str(kept), "--db", db)
    assert done.code == 0 and kept.read_text().startswith('{"kind":"run"')
    # A database named by its path, as the README's examples name it.
    if db.startswith("sqlite+aiosqlite:///"):
        path = db.removeprefix("sqlite+aiosqlite:///")
        done = await run_main("threads", "--db", path, "--json")
        assert done.code == 0 and json.loads(done.out)["threads"], done.err


async def test_a_token_s_table_loads_whatever_its_name() -> None:
    import tomllib

    for name in ("support-ui", "bad name", 'a"b', "ü", "ok-name.v2"):
        done = await run_main("token", "new", "--name", name, "--agent", 'x"y')
        assert done.code == 0, done.err
        table = "\n".join(done.out.splitlines()[1:])
        loaded = tomllib.loads(table)["tokens"]
        assert list(loaded) == [name] and loaded[name]["agents"] == ['x"y']
    assert (await run_main("token", "new", "--name", "")).code == 2
    done = await recorder("token", "hash", stdin=b"one\ntwo\n")
    assert done.code == 2 and "2 lines were given" in done.err


async def test_what_the_cli_says_when_it_finds_less_than_there_is(recorded: Recorded) -> None:
    db = recorded.db
    done = await run_main("threads", "--agent", "nobody", "--db", db)
    assert (done.code, done.out) == (0, "no threads match\n")
    # A history cut by --limit says so (stderr: stdout stays the answer).
    done = await run_main("history", "t1", "--limit", "2", "--db", db)
    assert done.code == 0 and "more boundaries: the newest 2 shown" in done.err
    done = await run_main("history", "t1", "--limit", "1000", "--db", db)
    assert done.code == 0 and done.err == ""
    done = await run_main("audit", "verify", "nope", "--db", db)
    assert done.code == 2 and done.err == "recorder: no thread or run 'nope'\n"
    done = await run_main("audit", "verify", "t1", "--receipt", "r.json", "--db", db)
    assert done.code == 2 and "give no ids with it" in done.err


async def test_replay_refuses_an_option_its_id_cannot_take(recorded: Recorded) -> None:
    done = await run_main("replay", "t1", "--after", "3", "--db", recorded.db)
    assert done.code == 2 and "--after resumes a run's stream" in done.err
    done = await run_main("replay", "t1-r1", "--compact", "--db", recorded.db)
    assert done.code == 2 and "--compact is for a thread's stream" in done.err
    done = await run_main("replay", "t1-r1", "--after", "3", "--no-follow", "--db", recorded.db)
    assert done.code == 0 and done.out.startswith("id: 4\n")
    # An out-of-range --after is named by its flag, not by the API's parameter.
    for command in ("replay", "events"):
        done = await run_main(command, "t1-r1", "--after", "-5", "--db", recorded.db)
        assert (done.code, done.out) == (2, ""), command
        assert done.err == f"recorder: --after must be -1 to {(1 << 31) - 1}, got -5\n"


async def test_a_terminal_that_is_not_utf8_gets_escapes_not_a_traceback(
    recorded: Recorded,
) -> None:
    ascii_only = clean_env(LC_ALL="C", LANG="C", PYTHONUTF8="0", PYTHONIOENCODING="")
    done = await recorder("show", "t1", "--db", recorded.db, env=ascii_only)
    assert done.code == 0, done.err
    assert "\\xb0C" in done.out  # the demo's "°C", escaped
    assert "Traceback" not in done.err


async def test_a_group_without_its_command_shows_its_own_help_as_an_error() -> None:
    done = await recorder("audit")
    assert done.code == 2 and done.out == ""
    assert done.err.startswith("usage: recorder audit [-h] COMMAND ...")
    bare = await recorder()
    assert bare.code == 2 and bare.out == "" and bare.err.startswith("usage: recorder [-h]")


async def test_an_import_of_a_file_that_is_not_there_creates_no_database(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    done = await recorder(
        "import", str(tmp_path / "typo.jsonl"), "--db", f"sqlite+aiosqlite:///{db}"
    )
    assert done.code == 2 and "cannot read" in done.err and "typo.jsonl" in done.err
    assert not db.exists()


async def test_an_export_read_by_head_ends_quietly(recorded: Recorded) -> None:
    """The reader closes the pipe after one line: the export's stream is closed before the
    client is, not left to the collector (a traceback, a time in three at least)."""
    command = (
        f"{shlex.quote(RECORDER)} export --url {shlex.quote(recorded.url)} --token {TOKEN} "
        "| head -1 >/dev/null"
    )
    for _ in range(5):
        proc = await asyncio.create_subprocess_shell(
            command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=clean_env()
        )
        _, err = await proc.communicate()
        assert err == b"", err.decode()


async def test_options_between_positionals_are_taken(recorded: Recorded, tmp_path: Path) -> None:
    """The usage lists options first, so they come there; a positional of several values
    after them was refused as unrecognized."""
    db = ("--db", recorded.db)
    for words in [
        ("tag", "t1", "--run", "t1-r1", "k=v", "k2=v2"),
        ("note", "t1", "--author", "me", "some text"),
        ("score", "t1", "--author", "me", "3"),
        ("export", "t1", "--out", str(tmp_path / "both.jsonl"), "t2"),
    ]:
        done = await run_main(*words, *db)
        assert done.code == 0, (words, done.err)
    exported = (tmp_path / "both.jsonl").read_text()
    assert '"threadId":"t1"' in exported and '"threadId":"t2"' in exported
    saved = json.loads((await run_main("annotations", "t1", "--json", *db)).out)
    assert saved["runs"]["t1-r1"]["tags"] == {"k": "v", "k2": "v2"}
    assert [(n["author"], n["text"]) for n in saved["notes"]] == [("me", "some text")]
    wrong = await recorder("tag", "t1", "--bogus", "k=v", *db)
    assert wrong.code == 2 and "unrecognized arguments: --bogus" in wrong.err
