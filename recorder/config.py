"""One Settings object: environment (``RECORDER_*``), an optional TOML file, then flags."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from recorder.errors import ConfigError

DEFAULT_DB = "sqlite+aiosqlite:///recorder.db"


def parse_agents(specs: list[str] | str | dict[str, str] | None) -> dict[str, str]:
    """``NAME=URL`` specs (a list, or one comma-separated string) as a mapping."""
    if specs is None:
        return {}
    if isinstance(specs, dict):
        items = list(specs.items())
    else:
        parts = specs.split(",") if isinstance(specs, str) else specs
        items = []
        for part in (p.strip() for p in parts):
            if not part:
                continue
            name, sep, url = part.partition("=")
            if not sep or not name.strip() or not url.strip():
                raise ConfigError(f"agent spec {part!r} is not NAME=URL")
            items.append((name.strip(), url.strip()))
    agents: dict[str, str] = {}
    for name, url in items:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"agent {name!r}: upstream URL must be http(s), got {url!r}")
        agents[name] = url
    return agents


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="RECORDER_", extra="ignore")

    db: str = DEFAULT_DB
    host: str = "127.0.0.1"
    port: int = 8000
    # NAME=URL pairs, comma-separated in the environment (not JSON): parsed by `_agents`.
    agents: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    demo_agent: bool = False
    api_token: str | None = None
    # "commit": a frame reaches the client only once it is in the log (group commit).
    # "buffered": forward first, record right after (lower latency, may lose the tail on a crash).
    durability: Literal["commit", "buffered"] = "commit"
    # What the client sees when the database fails mid-run: "error" ends its stream with a
    # RUN_ERROR; "continue" keeps streaming unrecorded frames (the run is flagged).
    on_store_failure: Literal["error", "continue"] = "error"
    keep_reading_on_disconnect: bool = True
    idle_timeout: float = 60.0
    connect_timeout: float = 10.0
    max_body_bytes: int = 10 * 1024 * 1024
    max_frame_bytes: int = 10 * 1024 * 1024
    max_events_per_run: int = 1_000_000
    max_concurrent_runs: int = 256
    checkpoint_every: int = 1000
    heartbeat_interval: float = 5.0
    forward_headers: list[str] = Field(
        default_factory=lambda: ["authorization", "cookie", "accept-language", "user-agent"]
    )
    forward_header_prefixes: list[str] = Field(default_factory=lambda: ["x-"])

    @field_validator("agents", mode="before")
    @classmethod
    def _agents(cls, value: Any) -> dict[str, str]:
        return parse_agents(value)


def load_settings(config_file: str | None = None, **overrides: Any) -> Settings:
    """Settings from the environment, a TOML file (its keys as in ``Settings``), and overrides."""
    values: dict[str, Any] = {}
    if config_file:
        path = Path(config_file)
        try:
            values.update(tomllib.loads(path.read_text()))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        env = Settings()
    except (SettingsError, ValueError) as exc:
        raise ConfigError(f"invalid RECORDER_* environment: {exc}") from exc
    merged = {**env.model_dump(exclude_unset=True), **values}
    if "agents" in values and env.agents:
        merged["agents"] = {**env.agents, **parse_agents(values["agents"])}
    try:
        return Settings(**merged)
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
