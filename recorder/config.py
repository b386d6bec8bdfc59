"""One Settings object, from three sources: flags > environment (``RECORDER_*``) > a TOML file.

Each setting takes the value of the highest source that gives it. ``agents`` is the one
mapping: sources merge name by name, so ``--agent extra=URL`` adds to the file's agents and
an agent named in the environment replaces the file's agent of that name.

A name the recorder does not know is an error naming it, in the file and in the
environment alike (a misspelt ``RECORDER_DURABILTY`` silently ignored would leave the
recorder running with a guarantee its operator turned off).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from pydantic_settings.exceptions import SettingsError

from recorder.errors import ConfigError

DEFAULT_DB = "sqlite+aiosqlite:///recorder.db"
ENV_PREFIX = "RECORDER_"


ForkStrategy = Literal["new-thread", "same-thread"]
# Most AG-UI agents keep their own memory per thread (LangGraph's checkpointer, Mastra,
# Agno, CrewAI flows): only a new thread rewinds them. For an agent that rebuilds from the
# posted messages a new thread gives the same branch, so it is the safe default.
DEFAULT_FORK_STRATEGY: ForkStrategy = "new-thread"


class AgentConfig(BaseModel):
    """One agent behind the proxy, as the server's configuration names it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    # How a fork reaches this agent. "new-thread": the branch is a new thread, right for
    # agents that keep their own memory per thread (most do) and harmless for the rest;
    # "same-thread": the branch posts the history on the parent's thread with parentRunId,
    # right only for agents that rebuild everything from the posted messages.
    fork: ForkStrategy = DEFAULT_FORK_STRATEGY
    # The proxy endpoint POST /agents/NAME asks for a token with the "run" scope (or the
    # API token); the token is checked by the recorder and never forwarded to the agent.
    require_token: bool = False
    # Headers the recorder sends to this agent with every request, over the client's own
    # (an agent's API key, say). A fork sends these and none of its caller's headers: the
    # caller of the recorder's API holds the recorder's credentials, not the agent's.
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _http(cls, url: str) -> str:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"the upstream URL must be http(s), got {url!r}")
        return url


Scope = Literal["read", "run", "fork", "admin"]
SCOPES: tuple[Scope, ...] = ("read", "run", "fork", "admin")
# What each scope grants: a fork reads history and starts a run; admin grants everything.
GRANTS: dict[str, frozenset[str]] = {
    "read": frozenset({"read"}),
    "run": frozenset({"run"}),
    "fork": frozenset({"fork", "read", "run"}),
    "admin": frozenset(SCOPES),
}
TOKEN_HASH_PREFIX = "sha256:"


def hash_token(token: str) -> str:
    """The form a token is kept in the settings. Tokens are long random secrets (``recorder
    token new`` makes 32 bytes), so one SHA-256 is as hard to reverse as a slow password
    hash, and it costs a request microseconds."""
    return TOKEN_HASH_PREFIX + hashlib.sha256(token.encode()).hexdigest()


class TokenConfig(BaseModel):
    """A named API token: its hash, what it may do and, optionally, the agents it sees."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hash: str
    scopes: tuple[Scope, ...] = ("read",)
    # None: every agent. A list: only threads and runs recorded through these agents.
    agents: tuple[str, ...] | None = None

    @field_validator("hash")
    @classmethod
    def _hashed(cls, value: str) -> str:
        digest = value.removeprefix(TOKEN_HASH_PREFIX)
        if not value.startswith(TOKEN_HASH_PREFIX) or len(digest) != 64:
            raise ValueError(
                "a token is kept as its hash, sha256:<64 hex digits> "
                "(make one with `recorder token hash`), never in clear"
            )
        try:
            bytes.fromhex(digest)
        except ValueError as exc:
            raise ValueError("the token hash is not hex") from exc
        return TOKEN_HASH_PREFIX + digest.lower()

    @field_validator("scopes")
    @classmethod
    def _some_scope(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("a token needs at least one scope (read, run, fork, admin)")
        return value


# Where a redaction rule applies. "messages": message text (streamed deltas, snapshots, the
# posted messages); "tool_args" and "tool_results": a tool call's arguments and its result;
# "state": state snapshots and deltas; "input": the whole posted RunAgentInput;
# "everywhere": every string of every payload but its ids and types.
Where = Literal["messages", "tool_args", "tool_results", "state", "input", "everywhere"]
Detector = Literal["email", "phone", "card", "token", "ip"]
# In the order "builtin" lists them: where two could match at one place, the first wins
# (an IPv4 address is not read as a phone number).
DETECTORS: tuple[Detector, ...] = ("email", "card", "token", "ip", "phone")
_RULE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")


_TOKEN = re.compile(r"[\x21-\x7e]+")  # what an HTTP header carries as it is
NOT_A_TOKEN = "a token is printable ASCII characters without spaces (as `recorder token new` makes)"


def is_token(value: str) -> bool:
    """Whether ``value`` can be a token: what a header carries as it is, nothing else."""
    return _TOKEN.fullmatch(value) is not None


class RedactionRule(BaseModel):
    """A built-in detector or a custom regular expression, and where it applies. A rule
    may be given as a detector's name alone (``"email"``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    detector: Detector | None = None
    pattern: str | None = None
    where: tuple[Where, ...] = ("everywhere",)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        if isinstance(value, str):
            return {"name": value, "detector": value}
        if isinstance(value, dict) and "name" not in value and value.get("detector"):
            return {**value, "name": value["detector"]}
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> RedactionRule:
        if not _RULE_NAME.fullmatch(self.name):
            raise ValueError(f"rule name {self.name!r}: 1 to 64 of A-Z a-z 0-9 _ . -")
        if (self.detector is None) == (self.pattern is None):
            raise ValueError(f"rule {self.name!r}: give a detector or a pattern (one of them)")
        if self.pattern is not None:
            try:
                compiled = re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"rule {self.name!r}: pattern is not a regex ({exc})") from exc
            if compiled.match(""):
                raise ValueError(f"rule {self.name!r}: pattern matches the empty string")
        if not self.where:
            raise ValueError(f"rule {self.name!r}: where is empty")
        return self


class RedactionConfig(BaseModel):
    """Redaction at record time: what is replaced by ``[REDACTED:<rule>]`` in the stored
    bytes, and the key of the keyed hash kept of each original."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: tuple[RedactionRule, ...] = ()
    # HMAC-SHA256 key: with one, each redacted payload keeps a keyed hash of its original
    # bytes, so that whoever holds an original can prove it is the one recorded.
    key: str | None = None

    @field_validator("rules", mode="before")
    @classmethod
    def _builtin(cls, value: Any) -> Any:
        """``"builtin"`` (alone or in the list): every built-in detector, everywhere."""
        if value == "builtin":
            value = ["builtin"]
        if isinstance(value, (list, tuple)) and "builtin" in value:
            value = [r for r in value if r != "builtin"] + [d for d in DETECTORS if d not in value]
        return value

    @field_validator("rules")
    @classmethod
    def _unique(cls, value: tuple[RedactionRule, ...]) -> tuple[RedactionRule, ...]:
        names = [rule.name for rule in value]
        if len(set(names)) != len(names):
            raise ValueError("rule names must be unique")
        return value


def parse_agents(specs: Any) -> dict[str, dict[str, Any]]:
    """Agents from ``NAME=URL`` specs (a list, or one comma-separated string), a JSON
    object, or a mapping of names to URLs or to tables; each as a plain table, so that
    sources merge per agent and per field."""
    if specs is None:
        return {}
    if isinstance(specs, str) and specs.lstrip().startswith("{"):
        try:
            specs = json.loads(specs)
        except ValueError as exc:
            raise ConfigError(f"agents: not a JSON object ({exc})") from exc
    if isinstance(specs, dict):
        items = list(specs.items())
    elif isinstance(specs, (str, list, tuple)):
        items = list(_name_url_pairs(specs.split(",") if isinstance(specs, str) else specs))
    else:
        raise ConfigError(f"agents must be NAME=URL specs or a table, got {specs!r}")
    agents: dict[str, dict[str, Any]] = {}
    for name, spec in items:
        if isinstance(spec, AgentConfig):
            agents[name] = spec.model_dump()
        elif isinstance(spec, str):
            agents[name] = {"url": spec}
        elif isinstance(spec, dict):
            agents[name] = dict(spec)
        else:
            raise ConfigError(f"agent {name!r}: expected a URL or a table, got {spec!r}")
    return agents


def _name_url_pairs(parts: Any) -> Any:
    for part in (str(p).strip() for p in parts):
        if not part:
            continue
        name, sep, url = part.partition("=")
        if not sep or not name.strip() or not url.strip():
            raise ConfigError(f"agent spec {part!r} is not NAME=URL")
        yield name.strip(), url.strip()


_AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """Seconds in an age such as ``90d``, ``12h``, ``30m``, ``45s`` or ``2w``."""
    value = text.strip().lower()
    unit = _AGE_UNITS.get(value[-1:]) if value else None
    try:
        number = float(value[:-1]) if unit else float("nan")
    except ValueError:
        number = float("nan")
    if unit is None or not number >= 0 or number == float("inf"):
        raise ConfigError(f"{text!r} is not an age: a number and s, m, h, d or w (e.g. 90d)")
    if number * unit > _MAX_AGE:
        raise ConfigError(f"{text!r} is past any age a record can have (at most 1000 years)")
    return number * unit


_MAX_AGE = 1000 * 365.25 * 86400  # (a cut-off before year 1 is no date)


def retention_age(text: str) -> float:
    """A retention's age: as ``parse_age``, and more than 0 (0 would purge every thread)."""
    age = parse_age(text)
    if age <= 0:
        raise ConfigError(f"a retention of {text!r} would purge every thread: give an age over 0")
    return age


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")

    db: str = DEFAULT_DB
    # A running recorder that the CLI's commands ask instead of opening the database.
    url: str | None = None
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 8000
    # NAME=URL pairs (comma-separated in the environment) or tables: parsed by `_agents`.
    agents: Annotated[dict[str, AgentConfig], NoDecode] = Field(default_factory=dict)
    demo_agent: bool = False
    # The full-access token (in clear, as before); ``tokens`` adds named, scoped ones.
    api_token: str | None = None
    tokens: dict[str, TokenConfig] = Field(default_factory=dict)
    redaction: RedactionConfig = Field(default_factory=RedactionConfig)
    # Names a request's Host header may give (DNS rebinding: a page of another site that
    # resolves its name to this address). None: the bind address and the localhost names,
    # or any name when bound to every interface. "*" in the list: any name.
    allowed_hosts: list[str] | None = None
    # Origins whose pages may call the proxy and the API from a browser (CORS); none by
    # default (same origin only). "*": any origin.
    cors_origins: list[str] = Field(default_factory=list)
    # Seconds a client may take to read what was sent to it before it is dropped (the run
    # goes on recorded, as when a client leaves); readers of replays and live attaches too.
    client_write_timeout: Annotated[float, Field(gt=0)] = 60.0
    # "commit": a frame reaches the client only once it is in the log (group commit).
    # "buffered": forward first, record right after (lower latency, may lose the tail on a crash).
    durability: Literal["commit", "buffered"] = "commit"
    # What the client sees when the database fails mid-run: "error" ends its stream with a
    # RUN_ERROR; "continue" keeps streaming unrecorded frames (the run is flagged).
    on_store_failure: Literal["error", "continue"] = "error"
    # Ride through database outages: writes the database cannot take within
    # ``store_deadline`` seconds go to a local journal (fsynced), drained once it is back.
    # Past ``journal_max_bytes`` or ``journal_max_outage`` seconds, ``on_store_failure``
    # applies to new frames. ``journal_dir``: default beside the SQLite file, else a
    # per-user state directory.
    journal: bool = True
    journal_dir: str | None = None
    store_deadline: float = Field(default=2.0, gt=0)
    # Seconds a read waits for PostgreSQL's answer: past it the request fails with 503
    # instead of hanging while the database is paused or cut off (SQLite's reads wait at
    # most for the file's lock, ``busy_timeout``).
    read_deadline: float = Field(default=30.0, gt=0)
    journal_max_bytes: int = Field(default=1 << 30, gt=0)
    journal_max_outage: float = Field(default=3600.0, gt=0)
    keep_reading_on_disconnect: bool = True
    idle_timeout: Annotated[float, Field(gt=0)] = 60.0
    connect_timeout: Annotated[float, Field(gt=0)] = 10.0
    max_body_bytes: Annotated[int, Field(gt=0)] = 10 * 1024 * 1024
    max_frame_bytes: Annotated[int, Field(gt=0)] = 10 * 1024 * 1024
    max_events_per_run: Annotated[int, Field(gt=0)] = 1_000_000
    max_concurrent_runs: Annotated[int, Field(gt=0)] = 256
    # Events between a run's checkpoints (built when it closes; 0: none, every query folds
    # from the run's start). Checkpoints share their chunks, so dense ones cost little.
    checkpoint_every: Annotated[int, Field(ge=0)] = 250
    # Megabytes of input and checkpoint chunks a process keeps in memory, read or written
    # lately (0: none; every read goes to the database). The resident memory grows by
    # about this much as it fills, and no further.
    chunk_cache_mb: int = Field(default=64, ge=0)
    heartbeat_interval: Annotated[float, Field(gt=0)] = 5.0
    forward_headers: list[str] = Field(
        default_factory=lambda: ["authorization", "cookie", "accept-language", "user-agent"]
    )
    forward_header_prefixes: list[str] = Field(default_factory=lambda: ["x-"])
    # Logs: one line per ended run, start and stop, errors with their id (stderr).
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = "text"
    access_log: bool = False
    # Prometheus metrics: at /metrics on the API (behind the API token), or at
    # HOST:PORT of their own with ``metrics_address``.
    metrics: bool = True
    metrics_address: str | None = None
    # OpenTelemetry: each run as a trace, to this OTLP/HTTP traces endpoint
    # (e.g. http://127.0.0.1:4318/v1/traces); needs the ``otel`` extra.
    otel_endpoint: str | None = None
    otel_headers: dict[str, str] = Field(default_factory=dict)
    otel_service_name: str = "agui-recorder"
    otel_capture_content: bool = False
    # Governance. The key that signs audit receipts (HMAC-SHA256); without it receipts
    # are unsigned. Retention: threads not updated for this long are purged automatically
    # (``serve``, every ``retention_interval`` seconds), globally and per agent (an agent
    # named here follows its own age, not the global one).
    audit_key: str | None = None
    retention: str | None = None
    retention_agents: dict[str, str] = Field(default_factory=dict)
    retention_interval: Annotated[float, Field(gt=0)] = 3600.0

    @field_validator("db")
    @classmethod
    def _db(cls, value: str) -> str:
        # A plain path (``recorder.db``, ``/data/recorder.db``) names a SQLite file.
        if value and "://" not in value:
            return f"sqlite+aiosqlite:///{value}"
        return value

    @field_validator("retention")
    @classmethod
    def _retention(cls, value: str | None) -> str | None:
        if value is not None:
            retention_age(value)
        return value

    @field_validator("retention_agents")
    @classmethod
    def _retention_agents(cls, value: dict[str, str]) -> dict[str, str]:
        for age in value.values():
            retention_age(age)
        return value

    # Search: closed runs are indexed by a background task, polling this often (seconds);
    # a run another recorder of the database recorded, once it has been closed this long.
    search_index: bool = True
    search_index_interval: Annotated[float, Field(gt=0)] = 1.0
    search_index_handover: Annotated[float, Field(ge=0)] = 60.0

    @property
    def chunk_cache_bytes(self) -> int:
        return self.chunk_cache_mb * 1024 * 1024

    @field_validator("agents", mode="before")
    @classmethod
    def _agents(cls, value: Any) -> dict[str, dict[str, Any]]:
        return parse_agents(value)

    @field_validator("api_token")
    @classmethod
    def _api_token(cls, value: str | None) -> str | None:
        # An empty one (a variable that was not set, expanded) would turn authentication
        # off without a word; one a header cannot carry fails every request, its text in
        # the driver's error.
        if value == "":
            raise ValueError("empty: give a token, or leave it unset for no authentication")
        if value is not None and not is_token(value):
            raise ValueError(NOT_A_TOKEN)
        return value

    @model_validator(mode="after")
    def _one_demo(self) -> Settings:
        if self.demo_agent and "demo" in self.agents:
            raise ValueError(
                "demo_agent serves the built-in agent as 'demo', and an agent named 'demo' "
                "is configured: rename that one, or leave demo_agent off"
            )
        return self

    @model_validator(mode="after")
    def _tokens_for_agents(self) -> Settings:
        guarded = sorted(name for name, agent in self.agents.items() if agent.require_token)
        if guarded and not (self.api_token or self.tokens):
            raise ValueError(
                f"agent {', '.join(guarded)} requires a token, and no token is configured "
                "(api_token or tokens)"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [
            _AgentsByName(init_settings),
            _AgentsByName(env_settings),
        ]
        if settings_cls.model_config.get("toml_file"):
            sources.append(_TomlFile(settings_cls))
        return tuple(sources)


def _agents_as_mapping(values: dict[str, Any]) -> dict[str, Any]:
    """``agents`` as a mapping, so that the sources' agents merge by name (pydantic-settings
    merges mappings key by key, and replaces every other value)."""
    if "agents" not in values:
        return values
    return {**values, "agents": parse_agents(values["agents"])}


class _AgentsByName(PydanticBaseSettingsSource):
    def __init__(self, source: PydanticBaseSettingsSource) -> None:
        super().__init__(source.settings_cls)
        self._source = source

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._source.get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        return _agents_as_mapping(self._source())


class _TomlFile(TomlConfigSettingsSource):
    def __call__(self) -> dict[str, Any]:
        return _agents_as_mapping(super().__call__())


LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def allowed_hosts(settings: Settings) -> frozenset[str] | None:
    """The Host names a request may give, lower case; None: any."""
    if settings.allowed_hosts is not None:
        names = {h.strip().lower().strip("[]") for h in settings.allowed_hosts}
        return None if "*" in names else frozenset(names)
    bind = settings.host.strip("[]").lower()
    if bind in ("", "0.0.0.0", "::"):
        return None
    return frozenset({bind, *LOCAL_HOSTS})


def load_settings(config_file: str | None = None, **flags: Any) -> Settings:
    """Settings from the flags given (None: not given), the environment and a TOML file."""
    check_environment(os.environ)
    settings_cls: type[Settings] = Settings
    if config_file:
        path = Path(config_file)
        try:
            tomllib.loads(path.read_text())
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc
        config = SettingsConfigDict(**{**Settings.model_config, "toml_file": path})
        settings_cls = type("Settings", (Settings,), {"model_config": config})
    try:
        return settings_cls(**{k: v for k, v in flags.items() if v is not None})
    except ValidationError as exc:
        raise ConfigError(_explain(exc, config_file)) from exc
    except SettingsError as exc:
        raise ConfigError(_unparsed(exc)) from exc


def _unparsed(exc: SettingsError) -> str:
    """What a setting given as JSON in the environment (a list or a table) got wrong."""
    found = re.search(r'field "(\w+)"', str(exc))
    if found is None or found.group(1) not in Settings.model_fields:
        return f"invalid settings: {exc}"
    name = found.group(1)
    variable = ENV_PREFIX + name.upper()
    shape = Settings.model_fields[name].annotation
    wanted = "a JSON object" if "dict" in str(shape) or "Config" in str(shape) else "a JSON list"
    example = '{"name": "value"}' if wanted == "a JSON object" else '["value"]'
    # (Not echoed: such a value may hold a key.)
    return f"environment variable {variable} is not {wanted} (e.g. {example})"


def check_environment(environ: dict[str, str] | os._Environ[str]) -> None:
    """Refuse a ``RECORDER_*`` variable that names no setting."""
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    unknown = sorted(
        k for k in environ if k.upper().startswith(ENV_PREFIX) and k.upper() not in known
    )
    if unknown:
        raise ConfigError(
            f"unknown environment variable {', '.join(unknown)}: "
            f"the settings are {', '.join(sorted(known))}"
        )


def _explain(exc: ValidationError, config_file: str | None) -> str:
    problems = []
    for error in exc.errors():
        name = ".".join(str(part) for part in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            where = f" in config file {config_file}" if config_file else ""
            problems.append(f"unknown setting {name!r}{where}")
        elif not name:  # the settings together
            problems.append(f"settings: {message}")
        else:
            problems.append(f"setting {name!r}: {message}")
    return "; ".join(problems)
