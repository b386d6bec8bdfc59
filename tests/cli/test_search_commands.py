"""``search``, ``reindex``, ``tag``, ``note``, ``score``, ``annotations`` and ``diff``: the same
output against the database and against a running server."""

from __future__ import annotations

import json

import pytest

from tests.cli.conftest import TOKEN, Recorded, run_main

QUESTIONS = [
    ("search", "Deleted report"),
    ("search", "Deleted report", "--json"),
    ("search", "--kind", "input", "--limit", "2", "--all", "--json"),
    ("search", "--kind", "message", "--thread", "t1"),
    ("search", "report", "--tag", "team:billing"),
    ("search", '"Deleted', "--syntax"),
    ("search", " -x", "--syntax"),
    ("search", "report -nothing", "--syntax"),
    ("search", "x", "--since", "yesterday"),
    ("search", "x", "--status", "weird"),
    ("threads", "--tag", "team:billing"),
    ("threads", "--tag", "nocolon"),
    ("annotations", "t1"),
    ("annotations", "t1", "--json"),
    ("annotations", "nope"),
    ("diff", "t1-r1"),
    ("diff", "t1-r1", "--from", "3", "--to", "5", "--json"),
    ("diff", "t1-r1", "--to-run", "t1-f"),
    ("diff", "t1-r1", "--from", "9999"),
    ("diff", "nope"),
]


async def test_search_indexes_the_closed_runs_the_index_lacks_first(
    recorded: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server indexed nothing (its indexing is off, as when a recorder stopped right
    after its runs closed): with indexing off here too, search finds nothing; on (the
    default), it indexes them first, and the server's search finds the same after it."""
    db = ("--db", recorded.db)
    remote = ("--url", recorded.url, "--token", TOKEN)
    monkeypatch.setenv("RECORDER_SEARCH_INDEX", "false")
    assert json.loads((await run_main("search", "Deleted report", "--json", *db)).out) == {
        "hits": [],
        "nextCursor": None,
    }
    monkeypatch.delenv("RECORDER_SEARCH_INDEX")
    found = json.loads((await run_main("search", "Deleted report", "--json", *db)).out)
    assert {hit["threadId"] for hit in found["hits"]} >= {"t1", "t2"}
    served = json.loads((await run_main("search", "Deleted report", "--json", *remote)).out)
    assert served == found
    assert (await run_main("reindex", *db)).out == "indexed 9 runs\n"


async def test_the_same_answers_both_ways(recorded: Recorded) -> None:
    db = ("--db", recorded.db)
    assert (await run_main("reindex", *db)).out == "indexed 9 runs\n"
    done = await run_main("tag", "t1", "team=billing", "env=prod", *db)
    assert done.code == 0 and "team=billing" in done.out
    assert (await run_main("tag", "t1", "--remove", "env", *db)).code == 0
    assert (await run_main("tag", "t1", "x=y", "--run", "t2-r1", *db)).code == 2
    note = await run_main("note", "t1", "checked", "--run", "t1-r2", "--author", "ana", *db)
    assert note.code == 0 and note.out.startswith("added note-")
    assert (await run_main("score", "t1", "3.5", "--author", "ana", *db)).code == 0
    assert (await run_main("score", "t1", *db)).code == 2
    for question in QUESTIONS:
        local = await run_main(*question, *db)
        remote = await run_main(*question, "--url", recorded.url, "--token", TOKEN)
        assert (remote.code, remote.out, remote.err) == (local.code, local.out, local.err), question
        assert "Traceback" not in local.err, question
        if local.code:
            assert local.err.startswith("recorder: ") and local.err.count("\n") == 1, question
    found = json.loads((await run_main("search", "Deleted report", "--json", *db)).out)
    assert found["hits"] and all(h["threadId"] for h in found["hits"])
    text = (await run_main("search", "Deleted report", *db)).out
    assert "[Deleted]" in text or "[deleted]" in text
    saved = json.loads((await run_main("annotations", "t1", "--json", *db)).out)
    assert saved["tags"] == {"team": "billing"} and saved["score"]["value"] == 3.5
    assert saved["runs"]["t1-r2"]["notes"][0]["text"] == "checked"
    listed = (await run_main("threads", "--tag", "team:billing", *db)).out
    assert "t1" in listed and "t2" not in listed
    # A note is removed as it was added, by the CLI, both ways.
    note_id = saved["runs"]["t1-r2"]["notes"][0]["noteId"]
    done = await run_main("note", "t2", "--remove", note_id, *db)
    assert done.code == 2 and "has no note" in done.err  # (another thread's)
    remote = ("--url", recorded.url, "--token", TOKEN)
    done = await run_main("note", "t1", "--remove", note_id, *remote)
    assert done.code == 0, done.err
    saved = json.loads((await run_main("annotations", "t1", "--json", *db)).out)
    assert "t1-r2" not in saved["runs"] or not saved["runs"]["t1-r2"]["notes"]
    done = await run_main("tag", "t1", "a=1", "--remove", "a", *db)
    assert done.code == 2 and "both set and removed" in done.err
