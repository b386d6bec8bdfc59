"""``recorder token``: a new token and its hash, a token's hash from stdin; the settings take
the hash (never the token in clear) and the server accepts the token it stands for."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import httpx

from recorder.config import hash_token, load_settings
from tests.cli.conftest import recorder
from tests.servers import recorder_at


async def test_token_new_prints_a_table_the_settings_take(tmp_path: Path, sqlite_url: str) -> None:
    done = await recorder("token", "new", "--name", "ci", "--scope", "read", "--agent", "a")
    assert done.code == 0, done.err
    first, *table = done.out.splitlines()
    token = first.split()[1]
    config = tmp_path / "recorder.toml"
    config.write_text("\n".join(table) + "\n")
    settings = load_settings(str(config))
    assert settings.tokens["ci"].hash == hash_token(token)
    assert settings.tokens["ci"].scopes == ("read",) and settings.tokens["ci"].agents == ("a",)
    assert token not in config.read_text()
    async with (
        recorder_at(sqlite_url, {}, tokens=settings.tokens) as base,
        httpx.AsyncClient(base_url=base, trust_env=False) as client,
    ):
        ok = await client.get("/threads", headers={"authorization": f"Bearer {token}"})
        assert ok.status_code == 200
        assert (await client.get("/threads")).status_code == 401
    again = await recorder("token", "new")
    assert again.out.split()[1] != token  # random each time


async def test_token_hash_reads_the_token_from_stdin() -> None:
    done = await recorder("token", "hash", "--json", stdin=b"s3cret-token\n")
    assert done.code == 0, done.err
    shown = json.loads(done.out)
    assert shown["hash"] == hash_token("s3cret-token") and "token" not in shown
    assert "s3cret-token" not in done.out
    empty = await recorder("token", "hash", stdin=b"")
    assert empty.code != 0 and "stdin" in empty.err
    table = await recorder("token", "hash", "--name", "ops", "--scope", "admin", stdin=b"x\n")
    assert tomllib.loads(table.out)["tokens"]["ops"]["scopes"] == ["admin"]


async def test_a_token_a_header_cannot_carry_is_refused_without_being_shown() -> None:
    """An empty token (an unset variable, expanded) would turn authentication off without
    a word; one with a newline or an accent fails every request, quoted in the error."""
    for given, said in [
        ("", "empty: give a token, or leave it unset for no authentication"),
        ("zzqtoken\n", "a token is printable ASCII"),
        ("zzqsécret", "a token is printable ASCII"),
    ]:
        served = await recorder("serve", "--port", "0", "--api-token", given)
        asked = await recorder("threads", "--url", "http://127.0.0.1:9", "--token", given)
        for done in (served, asked):
            assert done.code == 2 and said in done.err, done.err
            assert "Traceback" not in done.err
            assert "zzq" not in done.err
    hashed = await recorder("token", "hash", stdin=b"\xff\n")
    assert hashed.code == 2 and "token hash: a token is printable ASCII" in hashed.err
    assert "Traceback" not in hashed.err


async def test_a_recorders_password_is_never_shown() -> None:
    done = await recorder("threads", "--url", "http://ops:hunter2@127.0.0.1:9", "-v")
    assert done.code == 2 and "cannot reach the recorder at http://ops:***@127.0.0.1:9" in done.err
    assert "hunter2" not in done.out + done.err
