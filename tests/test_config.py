"""Settings from the environment, a TOML file and flags; agents as NAME=URL."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from recorder.config import Settings, load_settings, parse_agents
from recorder.errors import ConfigError
from tests.servers import free_port, serving


def test_agents_from_specs() -> None:
    assert parse_agents(["a=http://x/1", " b = https://y/2 "]) == {
        "a": "http://x/1",
        "b": "https://y/2",
    }
    assert parse_agents("a=http://x,b=http://y") == {"a": "http://x", "b": "http://y"}
    for bad in (["nourl"], ["=http://x"], ["a=ftp://x"]):
        with pytest.raises(ConfigError):
            parse_agents(bad)


def test_environment_file_and_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RECORDER_AGENTS", "env=http://127.0.0.1:1/")
    monkeypatch.setenv("RECORDER_DURABILITY", "buffered")
    config = tmp_path / "recorder.toml"
    config.write_text('port = 9001\nagents = ["file=http://127.0.0.1:2/"]\n')
    settings = load_settings(str(config), db="sqlite+aiosqlite:///x.db")
    assert settings.port == 9001 and settings.durability == "buffered"
    assert settings.agents == {"env": "http://127.0.0.1:1/", "file": "http://127.0.0.1:2/"}
    assert settings.db == "sqlite+aiosqlite:///x.db"
    assert settings.host == "127.0.0.1"  # never all interfaces unless asked
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(str(tmp_path / "missing.toml"))
    monkeypatch.setenv("RECORDER_DURABILITY", "sometimes")
    with pytest.raises(ConfigError):
        load_settings()


async def test_serve_mounts_the_demo_agent(sqlite_url: str) -> None:
    from recorder.api import create_app

    port = free_port()
    app = create_app(Settings(db=sqlite_url, port=port, demo_agent=True))
    async with (
        serving(app, port) as url,
        httpx.AsyncClient(base_url=url, trust_env=False) as client,
    ):
        assert (await client.get("/agents")).json() == {"agents": [{"name": "demo"}]}
        body = {
            "threadId": "t",
            "runId": "r",
            "messages": [{"id": "u", "role": "user", "content": "hi"}],
        }
        answer = await client.post("/agents/demo", json=body, timeout=30)
        assert answer.status_code == 200 and "RUN_FINISHED" in answer.text
        assert (await client.get("/runs/r")).json()["status"] == "finished"
        assert (await client.get("/healthz")).json()["ok"] is True
        assert (await client.get("/openapi.json")).status_code == 200
