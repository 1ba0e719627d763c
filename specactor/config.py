"""Settings: flags, then environment, then a YAML or TOML file, then defaults.

Everything is decoded once at start-up into frozen msgspec Structs. An unknown key or a bad
value is a `ConfigError` naming the key (and the environment variable or file it came from).
`docs/configuration.md` lists every setting.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
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
    pass


class _Base(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    pass


class SessionLogConfig(_Base, frozen=True):
    enabled: bool = True
    dir: str | None = None  # default: <root>/.specactor/logs
    max_entry_bytes: Positive = 256 * 1024


class EmergentConfig(_Base, frozen=True):
    url: str = "http://localhost:3002"
    api_key: str | None = None
    project_id: str | None = None


class GraphConfig(_Base, frozen=True):
    enabled: bool = False


class EmbeddingsConfig(_Base, frozen=True):
    url: str | None = None  # an OpenAI-compatible API base; we POST <url>/embeddings
    model: str = "text-embedding-3-small"
    api_key: str | None = None
    timeout: Seconds = 30.0


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


class HttpConfig(_Base, frozen=True):
    host: str = "127.0.0.1"
    port: Annotated[int, Meta(ge=0, le=65535)] = 8765
    token: str | None = None
    allowed_origins: list[str] = []
    allowed_hosts: list[str] = []
    max_body_bytes: Positive = 4 * 1024 * 1024
    max_sessions: Positive = 1000
    session_idle_timeout: Seconds = 600.0


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
    memory: MemoryConfig = MemoryConfig()
    knowledge: KnowledgeConfig = KnowledgeConfig()

    @property
    def root_path(self) -> Path:
        return Path(self.root).expanduser().resolve()

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
    "SPECACTOR_GRAPH_SYNC": "graph.enabled",
    "SPECACTOR_HTTP_HOST": "http.host",
    "SPECACTOR_HTTP_PORT": "http.port",
    "SPECACTOR_HTTP_TOKEN": "http.token",
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
    "SPECACTOR_KNOWLEDGE_REPO": "knowledge.repo",
    "EMERGENT_URL": "emergent.url",
    "EMERGENT_API_KEY": "emergent.api_key",
    "EMERGENT_PROJECT_ID": "emergent.project_id",
}
# Read by other parts of specactor (or by tools it starts), not settings of this Struct.
ENV_ELSEWHERE = frozenset({"SPECACTOR_CONFIG", "SPECACTOR_FUZZ"})
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
    for name, value in environ.items():
        if name in ENV:
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
    import yaml  # only when a settings file is read: it costs ~12 ms at start-up

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


def find_file(root: Path) -> Path | None:
    for name in ("config.toml", "config.yaml", "config.yml"):
        candidate = root / ".specactor" / name
        if candidate.is_file():
            return candidate
    return None


def load(flags: Mapping[str, Any], environ: Mapping[str, str] | None = None,
         config_file: str | None = None) -> Config:
    """Resolve the settings. `flags` holds dotted keys set on the command line.

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
    unknown = [t for t in config.toolsets if t not in TOOLSETS]
    if unknown:
        raise ConfigError(f"unknown toolset {unknown[0]!r} in 'toolsets'; valid toolsets are {', '.join(TOOLSETS)}")
    mem = config.memory
    if mem.mode in ("semantic", "hybrid") and not mem.embeddings.url:
        raise ConfigError(f"invalid setting 'memory.mode': {mem.mode} search needs an embeddings endpoint "
                          "(SPECACTOR_EMBEDDINGS_URL or memory.embeddings.url)")
    if config.graph_enabled and not config.emergent.api_key:
        raise ConfigError("graph sync is enabled but EMERGENT_API_KEY is not set "
                          "(set it, or the config key emergent.api_key, or disable the graph toolset)")
    return config


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
