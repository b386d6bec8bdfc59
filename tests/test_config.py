"""Settings from the environment, a TOML file and flags; agents as NAME=URL."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from recorder.config import AgentConfig, Settings, hash_token, load_settings, parse_agents
from recorder.errors import ConfigError
from tests.servers import bound, serving


def test_agents_from_specs() -> None:
    settings = Settings(agents=["a=http://x/1", " b = https://y/2 "])
    assert settings.agents == {
        "a": AgentConfig(url="http://x/1"),
        "b": AgentConfig(url="https://y/2"),
    }
    assert Settings(agents="a=http://x,b=http://y").agents == {
        "a": AgentConfig(url="http://x"),
        "b": AgentConfig(url="http://y"),
    }
    as_json = '{"a": {"url": "http://x", "fork": "same-thread"}}'
    assert Settings(agents=as_json).agents["a"].fork == "same-thread"
    for bad in (["nourl"], ["=http://x"], "{not json", 42):
        with pytest.raises(ConfigError):
            parse_agents(bad)
    with pytest.raises(ValueError, match="must be http"):
        Settings(agents=["a=ftp://x"])
    with pytest.raises(ValueError, match="fork"):
        Settings(agents={"a": {"url": "http://x", "fork": "sideways"}})


def test_flags_over_environment_over_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "recorder.toml"
    config.write_text('port = 9001\nidle_timeout = 5\ndurability = "buffered"\n')
    monkeypatch.setenv("RECORDER_PORT", "9002")
    monkeypatch.setenv("RECORDER_IDLE_TIMEOUT", "6")
    settings = load_settings(str(config), port=9003)
    assert settings.port == 9003  # the flag, over the environment and the file
    assert settings.idle_timeout == 6  # the environment, over the file
    assert settings.durability == "buffered"  # the file, over the default
    assert settings.host == "127.0.0.1"  # never all interfaces unless asked


def test_agents_merge_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "recorder.toml"
    config.write_text('agents = ["file=http://127.0.0.1:2/", "both=http://127.0.0.1:3/file"]\n')
    monkeypatch.setenv("RECORDER_AGENTS", "env=http://127.0.0.1:1/,both=http://127.0.0.1:3/env")
    settings = load_settings(str(config), agents=["flag=http://127.0.0.1:4/"])
    assert {name: agent.url for name, agent in settings.agents.items()} == {
        "file": "http://127.0.0.1:2/",
        "env": "http://127.0.0.1:1/",
        "both": "http://127.0.0.1:3/env",
        "flag": "http://127.0.0.1:4/",
    }
    config.write_text(
        '[agents]\ntable = "http://127.0.0.1:5/"\n'
        '[agents.graph]\nurl = "http://127.0.0.1:6/"\nfork = "same-thread"\n'
    )
    monkeypatch.setenv("RECORDER_AGENTS", "graph=http://127.0.0.1:7/")
    agents = load_settings(str(config)).agents
    assert agents["table"] == AgentConfig(url="http://127.0.0.1:5/")
    # The environment's URL replaces the file's; the file's fork strategy stays.
    assert agents["graph"] == AgentConfig(url="http://127.0.0.1:7/", fork="same-thread")


def test_unknown_names_are_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "recorder.toml"
    config.write_text('port = 9001\ndurabilty = "buffered"\n')
    with pytest.raises(ConfigError, match=r"unknown setting 'durabilty' in config file"):
        load_settings(str(config))
    monkeypatch.setenv("RECORDER_DURABILTY", "buffered")
    with pytest.raises(ConfigError, match="unknown environment variable RECORDER_DURABILTY"):
        load_settings()


def test_bad_values_and_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(str(tmp_path / "missing.toml"))
    broken = tmp_path / "broken.toml"
    broken.write_text("port = = 1\n")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(str(broken))
    monkeypatch.setenv("RECORDER_DURABILITY", "sometimes")
    with pytest.raises(ConfigError, match="setting 'durability'"):
        load_settings()
    monkeypatch.delenv("RECORDER_DURABILITY")
    monkeypatch.setenv("RECORDER_AGENTS", "a=ftp://x")
    with pytest.raises(ConfigError, match="must be http"):
        load_settings()
    monkeypatch.delenv("RECORDER_AGENTS")
    for port in (65536, -1):  # (a port past the range failed at bind, with a traceback)
        with pytest.raises(ConfigError, match="setting 'port'"):
            load_settings(port=port)
    assert load_settings(port=65535).port == 65535
    # Intervals, timeouts and limits of 0 or less: a busy loop (a heartbeat of 0 also
    # reaped every other recorder's live runs at once), every run idle, every request
    # refused. Refused by name; 0 checkpoints (none) stays a choice.
    positive = [
        "idle_timeout",
        "connect_timeout",
        "max_body_bytes",
        "max_frame_bytes",
        "max_events_per_run",
        "max_concurrent_runs",
        "heartbeat_interval",
        "retention_interval",
        "search_index_interval",
    ]
    for name in positive:
        for value in (0, -1):
            with pytest.raises(ConfigError, match=f"setting '{name}'"):
                load_settings(**{name: value})
    with pytest.raises(ConfigError, match="setting 'checkpoint_every'"):
        load_settings(checkpoint_every=-1)
    assert load_settings(checkpoint_every=0).checkpoint_every == 0


@pytest.mark.parametrize(
    ("variable", "shape"),
    [
        ("RECORDER_TOKENS", "a JSON object"),
        ("RECORDER_REDACTION", "a JSON object"),
        ("RECORDER_RETENTION_AGENTS", "a JSON object"),
        ("RECORDER_CORS_ORIGINS", "a JSON list"),
    ],
)
def test_a_setting_taking_json_names_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, shape: str
) -> None:
    for given in ("", "{bad", "http://x secret"):
        monkeypatch.setenv(variable, given)
        with pytest.raises(ConfigError) as raised:
            load_settings()
        message = str(raised.value)
        assert message.startswith(f"environment variable {variable} is not {shape}"), message
        assert "secret" not in message and "EnvSettingsSource" not in message


async def test_serve_mounts_the_demo_agent(sqlite_url: str) -> None:
    from recorder.api import create_app

    sock = bound()
    app = create_app(Settings(db=sqlite_url, port=sock.getsockname()[1], demo_agent=True))
    async with (
        serving(app, sock) as url,
        httpx.AsyncClient(base_url=url, trust_env=False) as client,
    ):
        assert (await client.get("/agents")).json() == {
            "agents": [{"name": "demo", "fork": "new-thread"}]
        }
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
        # Options it cannot take: a 422 naming them, before any stream (it was a 500, in
        # plain text, from inside the agent), relayed by the proxy with its status.
        for props in ("x", {"demo": 3}, {"demo": {"delay": "slow"}}, {"demo": {"extra": -1}}):
            odd = {**body, "runId": f"r-{len(str(props))}", "forwardedProps": props}
            for path in ("/demo-agent/", "/agents/demo"):
                answer = await client.post(path, json=odd, timeout=30)
                assert answer.status_code == 422, (path, props, answer.text)
                assert "forwardedProps" in answer.json()["detail"], answer.text


def test_tokens_are_kept_hashed_and_scoped(monkeypatch: pytest.MonkeyPatch) -> None:
    digest = hash_token("a-long-random-token")
    settings = Settings(tokens={"ci": {"hash": digest, "scopes": ["read", "fork"]}})
    assert settings.tokens["ci"].scopes == ("read", "fork") and settings.tokens["ci"].agents is None
    # A token in clear, a hash of another form, an unknown scope, no scope: refused.
    for bad in (
        {"hash": "a-long-random-token"},
        {"hash": "sha256:abc"},
        {"hash": "sha256:" + "zz" * 32},
        {"hash": digest, "scopes": ["write"]},
        {"hash": digest, "scopes": []},
        {"hash": digest, "extra": 1},
    ):
        with pytest.raises(ValueError):
            Settings(tokens={"ci": bad})
    monkeypatch.setenv("RECORDER_TOKENS", f'{{"ops": {{"hash": "{digest}", "scopes": ["admin"]}}}}')
    assert load_settings().tokens["ops"].scopes == ("admin",)


def test_an_agent_that_requires_a_token_needs_one_configured() -> None:
    agents = {"a": {"url": "http://x", "require_token": True}}
    with pytest.raises(ValueError, match="requires a token"):
        Settings(agents=agents)
    assert Settings(agents=agents, api_token="t").agents["a"].require_token


def test_a_database_given_as_a_path_is_a_sqlite_file() -> None:
    for path in ("recorder.db", "sqlite.db", "sqlite-data/r.db", "/var/lib/r.db"):
        assert load_settings(db=path).db == f"sqlite+aiosqlite:///{path}"
    for url in ("sqlite+aiosqlite:///x.db", "postgresql+asyncpg://u@h/d", "mysql://x/y"):
        assert load_settings(db=url).db == url  # (a URL stays one, refused later if unknown)


def test_an_agent_named_demo_beside_the_built_in_demo_is_refused() -> None:
    """Both would be 'demo': runs went to the configured one, the banner named both."""
    with pytest.raises(ConfigError) as refused:
        load_settings(demo_agent=True, agents={"demo": "http://127.0.0.1:1/"})
    assert str(refused.value) == (
        "settings: demo_agent serves the built-in agent as 'demo', and an agent named 'demo' "
        "is configured: rename that one, or leave demo_agent off"
    )
    assert load_settings(demo_agent=True, agents={"mine": "http://127.0.0.1:1/"}).demo_agent
