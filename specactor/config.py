"""Settings: flags, then environment, then a YAML or TOML file, then defaults.

Everything is decoded once at start-up into frozen msgspec Structs. An unknown key, a bad
value, an empty toolset list, a root that is not an existing folder or a `${…}` no client
expanded is a `ConfigError` naming the key and where it came from (`Sources`). Actors raise
the same error for what only starting can find (a port in use, a log folder they cannot
write); no restart fixes it. `docs/configuration.md` lists every setting.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

LogLevel = Literal["debug", "info", "warning", "error", "critical"]
TOOLSETS = ("openspec", "airsspec", "memory", "graph")
DEFAULT_TOOLSETS = ["openspec", "airsspec", "memory"]

Positive = Annotated[int, Meta(ge=1)]
Seconds = Annotated[float, Meta(gt=0)]


class ConfigError(Exception):
    """A setting no restart can fix: the server stops with exit status 2 and prints this line.

    Args:
        message: what is wrong, and what to do about it.
        setting: the dotted key at fault, when one is.
        source: where that key's value came from (`Sources.of`); filled in by the command line
            when an actor, which cannot know it, raised the error.
    """

    def __init__(self, message: str, *, setting: str | None = None, source: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.setting = setting
        self.source = source

    def __str__(self) -> str:
        if self.setting is None:
            return self.message
        where = f" (from {self.source})" if self.source else ""
        return f"invalid setting '{self.setting}': {self.message}{where}"


class _Base(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    pass


class SessionLogConfig(_Base, frozen=True):
    enabled: bool = True
    dir: str | None = None  # default: <root>/.specactor/logs
    max_entry_bytes: Positive = 256 * 1024
    max_age_days: Annotated[float, Meta(ge=0)] = 7.0  # older files are deleted; 0: no age limit
    max_total_bytes: Annotated[int, Meta(ge=0)] = 50 * 1024 * 1024  # oldest deleted past this; 0: no limit
    redact_memory: bool = True  # the memory toolset's arguments and results are not logged


class EmergentConfig(_Base, frozen=True):
    """The Emergent server graph sync mirrors into (the specmcp seed's variables)."""

    url: str = "http://localhost:3002"
    api_key: str | None = None  # EMERGENT_API_KEY or EMERGENT_TOKEN; `emt_…` goes as a Bearer token
    project_id: str | None = None
    timeout: Seconds = 30.0  # one request, each phase (connect, write, read)
    max_retries: Annotated[int, Meta(ge=0)] = 1  # a failed idempotent request is retried this often in a round
    long_outage_threshold: Positive = 20  # consecutive failed rounds before probing at the long interval
    long_outage_interval_mins: Seconds = 5.0


class GraphConfig(_Base, frozen=True):
    enabled: bool = False  # also on when the `graph` toolset is chosen
    workspace_id: str | None = None  # default: from the git remote (owner/name), else the folder's name
    db: str | None = None  # the outbox and state map; default <root>/.specactor/graph.db
    batch_size: Annotated[int, Meta(ge=1, le=100)] = 100  # items per bulk request (Emergent takes 1-100)
    concurrency: Annotated[int, Meta(ge=1, le=64)] = 16  # requests in flight while draining
    retry_max_seconds: Seconds = 30.0  # the drain's backoff cap while Emergent fails
    sync_timeout: Seconds = 60.0  # how long `graph_sync` waits for the outbox to drain


class EmbeddingsConfig(_Base, frozen=True):
    url: str | None = None  # an OpenAI-compatible API base; we POST <url>/embeddings
    model: str = "text-embedding-3-small"
    api_key: str | None = None
    timeout: Seconds = 30.0
    # How vectors are asked for: base64 float32 (what the OpenAI SDKs ask for) or JSON numbers.
    encoding: Literal["base64", "float"] = "base64"


class MemoryConfig(_Base, frozen=True):
    db: str | None = None  # default: $XDG_DATA_HOME/specactor/memory.db
    mode: Literal["lexical", "semantic", "hybrid"] | None = None  # default: hybrid with embeddings, else lexical
    user_id: str | None = None  # default: the login name
    project_id: str | None = None  # default: the workspace folder's name
    team_id: str | None = None
    org_id: str | None = None
    company_id: str = "default"
    embeddings: EmbeddingsConfig = EmbeddingsConfig()


class KnowledgeConfig(_Base, frozen=True):
    repo: str | None = None  # default: <root>/knowledge


class ContextConfig(_Base, frozen=True):
    budget: Annotated[int, Meta(ge=200, le=100_000)] = 5000  # characters of session context


class OpenSpecConfig(_Base, frozen=True):
    """Where the OpenSpec workspace is, by the OpenSpec CLI's own variables (`openspec_project`)."""

    root: str | None = None  # OPENSPEC_ROOT: the folder holding the project's openspec/ instead of `root`
    auto_project_root: bool = False  # OPENSPEC_AUTO_PROJECT_ROOT: under that, at the project's path from home


class HttpConfig(_Base, frozen=True):
    host: str = "127.0.0.1"
    port: Annotated[int, Meta(ge=0, le=65535)] = 8765
    token: str | None = None
    allowed_origins: list[str] = []
    allowed_hosts: list[str] = []
    max_body_bytes: Positive = 4 * 1024 * 1024
    max_sessions: Positive = 1000
    session_idle_timeout: Seconds = 600.0
    workers: Positive | None = None  # server processes on one port; default: the cores this process may use

    @property
    def worker_count(self) -> int:
        """`workers`, or the number of cores this process may run on."""
        return self.workers if self.workers is not None else available_cores()


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class PoolConfig(_Base, frozen=True):
    """The worker processes CPU-heavy tool work runs in (`actors/worker_pool.py`)."""

    workers: Annotated[int, Meta(ge=0)] | None = None  # default: the cores this process may use; 0: none
    idle_timeout: Seconds = 120.0  # an idle worker exits after this long
    queue: Positive = 1024  # jobs that may wait for a worker; past that they run in-process

    @property
    def worker_count(self) -> int:
        return self.workers if self.workers is not None else available_cores()


class Config(_Base, frozen=True):
    root: str = "."
    log_level: LogLevel = "info"
    debug: bool = False
    toolsets: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_TOOLSETS))
    max_concurrency: Positive = 128
    worker_threads: Positive = 8
    request_timeout: Seconds = 120.0
    grace_period: Seconds = 5.0
    page_size: Positive = 100
    max_line_bytes: Annotated[int, Meta(ge=1024)] = 64 * 1024 * 1024
    storage_log: bool = True  # commit through the write-ahead log (Linux); false: fsync every file
    session_log: SessionLogConfig = SessionLogConfig()
    emergent: EmergentConfig = EmergentConfig()
    graph: GraphConfig = GraphConfig()
    http: HttpConfig = HttpConfig()
    pool: PoolConfig = PoolConfig()
    memory: MemoryConfig = MemoryConfig()
    knowledge: KnowledgeConfig = KnowledgeConfig()
    context: ContextConfig = ContextConfig()
    openspec: OpenSpecConfig = OpenSpecConfig()

    @property
    def root_path(self) -> Path:
        return Path(self.root).expanduser().resolve()

    @property
    def openspec_project(self) -> tuple[Path, bool]:
        """The folder holding the OpenSpec workspace (`openspec/`), and whether to create it."""
        return openspec_project(self.root_path, self.openspec.root, self.openspec.auto_project_root, Path.home())

    @property
    def graph_db_path(self) -> Path:
        if self.graph.db:
            return Path(self.graph.db).expanduser().resolve()
        return self.root_path / ".specactor" / "graph.db"

    @property
    def session_log_dir(self) -> Path | None:
        if not self.session_log.enabled:
            return None
        if self.session_log.dir:
            return Path(self.session_log.dir).expanduser().resolve()
        return self.root_path / ".specactor" / "logs"

    @property
    def graph_enabled(self) -> bool:
        return self.graph.enabled or "graph" in self.toolsets

    @property
    def memory_db_path(self) -> Path:
        """The memory store's SQLite file: `memory.db`, by default `$XDG_DATA_HOME/specactor/memory.db`
        (filled in by `load`; a Config built in code reads XDG_DATA_HOME here)."""
        return Path(self.memory.db or default_memory_db(os.environ)).expanduser()

    @property
    def knowledge_repo_path(self) -> Path:
        """The knowledge repository: `knowledge.repo`, by default `<root>/knowledge`."""
        return Path(self.knowledge.repo or self.root_path / "knowledge").expanduser()

    def redacted(self) -> dict[str, Any]:
        """The resolved settings with secrets masked, for `--debug`."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        for section, key in (("emergent", "api_key"), ("http", "token")):
            if data[section].get(key):
                data[section][key] = "***"
        if data["memory"]["embeddings"].get("api_key"):
            data["memory"]["embeddings"]["api_key"] = "***"
        return data


# Environment variable -> dotted setting. Lists are comma-separated.
ENV: dict[str, str] = {
    "SPECACTOR_ROOT": "root",
    "SPECACTOR_LOG_LEVEL": "log_level",
    "SPECACTOR_DEBUG": "debug",
    "SPECACTOR_TOOLSETS": "toolsets",
    "SPECACTOR_MAX_CONCURRENCY": "max_concurrency",
    "SPECACTOR_WORKER_THREADS": "worker_threads",
    "SPECACTOR_REQUEST_TIMEOUT": "request_timeout",
    "SPECACTOR_GRACE_PERIOD": "grace_period",
    "SPECACTOR_PAGE_SIZE": "page_size",
    "SPECACTOR_MAX_LINE_BYTES": "max_line_bytes",
    "SPECACTOR_STORAGE_LOG": "storage_log",
    "SPECACTOR_SESSION_LOG": "session_log.enabled",
    "SPECACTOR_SESSION_LOG_DIR": "session_log.dir",
    "SPECACTOR_SESSION_LOG_MAX_AGE_DAYS": "session_log.max_age_days",
    "SPECACTOR_SESSION_LOG_MAX_TOTAL_BYTES": "session_log.max_total_bytes",
    "SPECACTOR_SESSION_LOG_REDACT_MEMORY": "session_log.redact_memory",
    "SPECACTOR_GRAPH_SYNC": "graph.enabled",
    "SPECACTOR_HTTP_HOST": "http.host",
    "SPECACTOR_HTTP_PORT": "http.port",
    "SPECACTOR_HTTP_TOKEN": "http.token",
    "SPECACTOR_HTTP_WORKERS": "http.workers",
    "SPECACTOR_CONTEXT_BUDGET": "context.budget",
    "SPECACTOR_POOL_WORKERS": "pool.workers",
    "SPECACTOR_POOL_IDLE_TIMEOUT": "pool.idle_timeout",
    "SPECACTOR_POOL_QUEUE": "pool.queue",
    "SPECACTOR_MEMORY_DB": "memory.db",
    "SPECACTOR_MEMORY_MODE": "memory.mode",
    "SPECACTOR_MEMORY_USER_ID": "memory.user_id",
    "SPECACTOR_MEMORY_PROJECT_ID": "memory.project_id",
    "SPECACTOR_MEMORY_TEAM_ID": "memory.team_id",
    "SPECACTOR_MEMORY_ORG_ID": "memory.org_id",
    "SPECACTOR_MEMORY_COMPANY_ID": "memory.company_id",
    "SPECACTOR_EMBEDDINGS_URL": "memory.embeddings.url",
    "SPECACTOR_EMBEDDINGS_MODEL": "memory.embeddings.model",
    "SPECACTOR_EMBEDDINGS_API_KEY": "memory.embeddings.api_key",
    "SPECACTOR_EMBEDDINGS_ENCODING": "memory.embeddings.encoding",
    "SPECACTOR_KNOWLEDGE_REPO": "knowledge.repo",
    "SPECACTOR_GRAPH_WORKSPACE_ID": "graph.workspace_id",
    "SPECACTOR_GRAPH_DB": "graph.db",
    "SPECACTOR_GRAPH_BATCH_SIZE": "graph.batch_size",
    "SPECACTOR_GRAPH_CONCURRENCY": "graph.concurrency",
    "SPECACTOR_GRAPH_RETRY_MAX_SECONDS": "graph.retry_max_seconds",
    "SPECACTOR_GRAPH_SYNC_TIMEOUT": "graph.sync_timeout",
    "EMERGENT_URL": "emergent.url",
    "EMERGENT_API_KEY": "emergent.api_key",
    "EMERGENT_TOKEN": "emergent.api_key",  # specmcp's name; wins over EMERGENT_API_KEY, its legacy alias
    "EMERGENT_PROJECT_ID": "emergent.project_id",
    "EMERGENT_TIMEOUT": "emergent.timeout",
    "EMERGENT_MAX_RETRIES": "emergent.max_retries",
    "EMERGENT_LONG_OUTAGE_THRESHOLD": "emergent.long_outage_threshold",
    "EMERGENT_LONG_OUTAGE_INTERVAL_MINS": "emergent.long_outage_interval_mins",
    "OPENSPEC_ROOT": "openspec.root",
    "OPENSPEC_AUTO_PROJECT_ROOT": "openspec.auto_project_root",
}
# Dotted setting -> the `specactor serve` flag that sets it (cli.py's parser defines them).
FLAGS: dict[str, str] = {
    "root": "--root",
    "log_level": "--log-level",
    "debug": "--debug",
    "toolsets": "--toolsets",
    "session_log.enabled": "--no-session-log",
    "session_log.dir": "--session-log-dir",
    "http.host": "--host",
    "http.port": "--port",
    "http.workers": "--workers",
}
# Read by other parts of specactor (or by tools it starts), not settings of this Struct.
ENV_ELSEWHERE = frozenset({"SPECACTOR_CONFIG", "SPECACTOR_FUZZ", "SPECACTOR_FAST", "SPECACTOR_REPEAT"})
LIST_KEYS = frozenset({"toolsets", "http.allowed_origins", "http.allowed_hosts"})


def _put(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[leaf] = value


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    # EMERGENT_TOKEN is read after its legacy alias, so it wins whatever the environment's order
    for name, value in sorted(environ.items(), key=lambda item: item[0] == "EMERGENT_TOKEN"):
        if name in ENV:
            if name.startswith("OPENSPEC_") and not value.strip():
                continue  # the OpenSpec CLI reads an empty variable as unset
            key = ENV[name]
            _put(tree, key, [v.strip() for v in value.split(",") if v.strip()] if key in LIST_KEYS else value)
        elif name.startswith("SPECACTOR_") and name not in ENV_ELSEWHERE:
            raise ConfigError(f"unknown environment variable {name}; "
                              f"known ones are {', '.join(sorted([*ENV, *ENV_ELSEWHERE]))}")
    return tree


def read_file(path: Path) -> dict[str, Any]:
    """A TOML (`.toml`) or YAML (anything else) settings file as a dict."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror}") from None
    import tomllib  # both only when a settings file is read: they cost ~14 ms at start-up

    import yaml

    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as err:
        raise ConfigError(f"config file {path} is not valid {'TOML' if path.suffix == '.toml' else 'YAML'}: "
                          f"{err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of settings")
    return data


def default_memory_db(environ: Mapping[str, str]) -> Path:
    """`$XDG_DATA_HOME/specactor/memory.db`, `~/.local/share` standing for XDG_DATA_HOME unset or empty."""
    return Path(environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "specactor" / "memory.db"


def find_file(root: Path) -> Path | None:
    for name in ("config.toml", "config.yaml", "config.yml"):
        candidate = root / ".specactor" / name
        if candidate.is_file():
            return candidate
    return None


class Sources(msgspec.Struct, frozen=True):
    """Where each setting came from, to name it in an error."""

    flags: frozenset[str] = frozenset()
    env: Mapping[str, str] = msgspec.field(default_factory=dict)  # dotted key -> its variable
    file: Path | None = None
    file_keys: frozenset[str] = frozenset()

    def of(self, key: str) -> str:
        """'flag --root', 'environment variable SPECACTOR_ROOT', 'config file …' or 'the default'."""
        if key in self.flags:
            return f"flag {FLAGS.get(key, key)}"
        if key in self.env:
            return f"environment variable {self.env[key]}"
        if key in self.file_keys:
            return f"config file {self.file}"
        return "the default"


class Settings(msgspec.Struct, frozen=True):
    """The resolved settings and where each came from (`load_settings`)."""

    config: Config
    sources: Sources


def load(flags: Mapping[str, Any], environ: Mapping[str, str] | None = None,
         config_file: str | None = None) -> Config:
    """Resolve the settings. `flags` holds dotted keys set on the command line.

    Raises:
        ConfigError: naming the bad key or value and where it came from.
    """
    return load_settings(flags, environ, config_file).config


def load_settings(flags: Mapping[str, Any], environ: Mapping[str, str] | None = None,
                  config_file: str | None = None) -> Settings:
    """`load`, and where each setting came from.

    Raises:
        ConfigError: naming the bad key or value and where it came from.
    """
    environ = os.environ if environ is None else environ
    env_tree = from_env(environ)
    flag_tree: dict[str, Any] = {}
    for key, value in flags.items():
        _put(flag_tree, key, value)
    root = Path(flag_tree.get("root") or env_tree.get("root") or ".").expanduser()
    file_name = config_file or environ.get("SPECACTOR_CONFIG")
    path = Path(file_name).expanduser() if file_name else find_file(root)
    file_tree = read_file(path) if path is not None else {}
    merged = _merge(_merge(file_tree, env_tree), flag_tree)
    try:
        config = msgspec.convert(merged, Config, strict=False)
    except msgspec.ValidationError as err:
        raise ConfigError(_explain(err, path, env_tree)) from None
    by_key = {dotted: name for name, dotted in ENV.items() if name in environ}
    sources = Sources(frozenset(flags), {k: v for k, v in by_key.items() if _has(env_tree, k)}, path,
                      frozenset(key for key, _ in _leaves(file_tree)))
    _check(config, merged, sources)
    if config.memory.db is None:  # the environment is read here, once; the rest asks Config.memory_db_path
        memory = msgspec.structs.replace(config.memory, db=str(default_memory_db(environ)))
        config = msgspec.structs.replace(config, memory=memory)
    return Settings(config, sources)


def _check(config: Config, merged: dict[str, Any], sources: Sources) -> None:
    """What decoding cannot see: values that only make sense together or against the disk."""
    for key, value in _leaves(merged):
        if isinstance(value, str) and "${" in value:
            shown = "the value" if key.endswith(("api_key", "token")) else repr(value)  # never echo a secret
            raise ConfigError(f"{shown} holds a ${{…}} that the program which started specactor did not "
                              "expand; write the value itself", setting=key, source=sources.of(key))
    if not config.toolsets:
        raise ConfigError(f"no toolset is enabled; name at least one of {', '.join(TOOLSETS)}",
                          setting="toolsets", source=sources.of("toolsets"))
    unknown = [t for t in config.toolsets if t not in TOOLSETS]
    if unknown:
        raise ConfigError(f"unknown toolset {unknown[0]!r}; valid toolsets are {', '.join(TOOLSETS)}",
                          setting="toolsets", source=sources.of("toolsets"))
    root = config.root_path
    if not root.is_dir():
        problem = "is not a folder" if root.exists() else "does not exist (specactor creates no workspace)"
        raise ConfigError(f"{root} {problem}; give the folder of the repository to serve",
                          setting="root", source=sources.of("root"))
    mem = config.memory
    if mem.mode in ("semantic", "hybrid") and not mem.embeddings.url:
        raise ConfigError(f"{mem.mode} search needs an embeddings endpoint "
                          "(SPECACTOR_EMBEDDINGS_URL or memory.embeddings.url)",
                          setting="memory.mode", source=sources.of("memory.mode"))
    if config.graph_enabled and importlib.util.find_spec("httpx") is None:
        why = "graph.enabled" if config.graph.enabled else "toolsets"
        raise ConfigError("graph sync talks to Emergent over HTTP and needs the http extra: "
                          "pip install 'specactor[http]'", setting=why, source=sources.of(why))
    if config.graph_enabled and not config.emergent.url.startswith(("http://", "https://")):
        raise ConfigError(f"{config.emergent.url!r} is not an http:// or https:// URL", setting="emergent.url",
                          source=sources.of("emergent.url"))
    if config.graph_enabled and not config.emergent.api_key:
        why = "graph.enabled" if config.graph.enabled else "toolsets"
        raise ConfigError("graph sync is on but EMERGENT_API_KEY is not set: set it (or EMERGENT_TOKEN, or the "
                          "config key emergent.api_key), or turn graph sync off (SPECACTOR_GRAPH_SYNC=false and no "
                          "graph toolset)", setting=why, source=sources.of(why))


def openspec_project(cwd: Path, root: str | None, auto: bool, home: Path) -> tuple[Path, bool]:
    """The project folder holding `openspec/`, and whether to create it, by the seed's three rules:
    `cwd` (the server root); with `root` (OPENSPEC_ROOT), `root`; with `auto` as well,
    `root/<cwd relative to home>` (or to its anchor, outside home), created on first use."""
    base = (root or "").strip()
    if not base:
        return cwd, False
    resolved = Path(base).expanduser().resolve()
    if not auto:
        return resolved, False
    try:
        relative = cwd.relative_to(home.resolve())
    except ValueError:
        relative = cwd.relative_to(cwd.anchor)
    return resolved / relative, True


def _leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Every dotted key of a settings tree with its value; a list's items share its key."""
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _leaves(value, f"{dotted}.")
        elif isinstance(value, list):
            yield dotted, value
            for item in value:
                yield dotted, item
        else:
            yield dotted, value


def _explain(err: msgspec.ValidationError, path: Path | None, env_tree: dict[str, Any]) -> str:
    text = str(err)
    section = ""
    if " - at `$." in text:
        text, _, where = text.partition(" - at `$.")
        section = where.rstrip("`")
    if text.startswith("Object contains unknown field `"):
        name = text.split("`")[1]
        key, text = (f"{section}.{name}" if section else name), "unknown setting"
    else:
        key = section
    env_names = [name for name, dotted in ENV.items() if dotted == key.split("[")[0]]
    sources = []
    if env_names and _has(env_tree, key):
        sources.append(f"environment variable {env_names[0]}")
    if path is not None:
        sources.append(f"or config file {path}" if sources else f"config file {path}")
    where = f" (from {' '.join(sources)})" if sources else ""
    return f"invalid setting '{key}': {text}{where}" if key else f"invalid configuration: {text}{where}"


def _has(tree: dict[str, Any], dotted: str) -> bool:
    node: Any = tree
    for part in dotted.split("[")[0].split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True
