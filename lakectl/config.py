"""lakectl's configuration: ``~/.lakectl.yaml`` and ``LAKECTL_*`` variables.

Keys are lakectl's (``credentials.access_key_id``, ``credentials.secret_access_key``,
``server.endpoint_url``, ``server.retries.enabled``, ``server.retries.max_attempts``,
``base_uri``). Each can be set by a variable named ``LAKECTL_`` and the key in upper
case with dots as underscores (``LAKECTL_SERVER_ENDPOINT_URL``); a variable wins over
the file, a command-line flag over both. The file is ``--config``/``-c``, else
``LAKECTL_CONFIG_FILE``, else ``~/.lakectl.yaml`` (which may be missing).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_ENDPOINT = "http://127.0.0.1:8000"
DEFAULT_FILE = "~/.lakectl.yaml"
ENV_PREFIX = "LAKECTL_"


class ConfigError(ValueError):
    """The configuration file cannot be read, or a value is not of its type."""


@dataclass(frozen=True)
class MetastoreConfig:
    """lakeFS's ``metastore.*`` keys that the Glue metastore uses."""

    type: str = "hive"
    hive_uri: str = ""
    glue_catalog_id: str = ""
    glue_region: str = ""
    glue_profile: str = ""
    glue_access_key_id: str = ""
    glue_secret_access_key: str = ""
    glue_session_token: str = ""
    glue_db_location_uri: str = ""
    fix_spark_placeholder: bool = False


@dataclass(frozen=True)
class LakectlConfig:
    endpoint_url: str = DEFAULT_ENDPOINT
    access_key_id: str = ""
    secret_access_key: str = ""
    retries_enabled: bool = True
    max_attempts: int = 4
    base_uri: str = ""
    #: the file read, None when there was none
    file: Path | None = None
    #: ``metastore.*``: the metastore commands' settings (lakeFS's keys)
    metastore: MetastoreConfig = field(default_factory=lambda: MetastoreConfig())

    @property
    def server(self) -> str:
        """The server's root URL (lakectl accepts the endpoint with or without /api/v1)."""
        url = self.endpoint_url.rstrip("/")
        return url.removesuffix("/api/v1").rstrip("/")


def _lookup(doc: Mapping[str, Any], key: str) -> Any:
    node: Any = doc
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "t", "true", "yes", "on"):
        return True
    if text in ("0", "f", "false", "no", "off"):
        return False
    raise ConfigError(f"{key}: {value!r} is not a boolean")


def _int(key: str, value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: {value!r} is not an integer") from None


def _expand_home(path: str, env: Mapping[str, str]) -> Path:
    if path.startswith("~/") and env.get("HOME"):
        return Path(env["HOME"]) / path[2:]
    return Path(path).expanduser()


def load_config(path: str | None = None, env: Mapping[str, str] | None = None,
                base_uri: str | None = None) -> LakectlConfig:
    """Read the configuration as lakectl does.

    Args:
        path: ``--config``; a file given this way (or by ``LAKECTL_CONFIG_FILE``) must exist.
        env: the environment (``os.environ`` by default).
        base_uri: ``--base-uri``, over ``LAKECTL_BASE_URI`` and the file's ``base_uri``.

    Raises:
        ConfigError: the file is missing (when named), unreadable or not a YAML mapping.
    """
    env = os.environ if env is None else env
    explicit = path or env.get(f"{ENV_PREFIX}CONFIG_FILE")
    file = _expand_home(explicit or DEFAULT_FILE, env)
    doc: Mapping[str, Any] = {}
    if file.is_file():
        try:
            loaded = yaml.safe_load(file.read_text())
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"Error reading config file {file}: {e}") from None
        if loaded is not None and not isinstance(loaded, Mapping):
            raise ConfigError(f"Error reading config file {file}: not a YAML mapping")
        doc = loaded or {}
    elif explicit:
        raise ConfigError(f"Error reading config file: open {file}: no such file or directory")

    def value(key: str) -> Any:
        name = ENV_PREFIX + key.upper().replace(".", "_")
        if name in env:
            return env[name]
        return _lookup(doc, key)

    def text(key: str, default: str) -> str:
        v = value(key)
        return default if v is None else str(v)

    retries = value("server.retries.enabled")
    attempts = value("server.retries.max_attempts")
    return LakectlConfig(
        endpoint_url=text("server.endpoint_url", DEFAULT_ENDPOINT) or DEFAULT_ENDPOINT,
        access_key_id=text("credentials.access_key_id", ""),
        secret_access_key=text("credentials.secret_access_key", ""),
        retries_enabled=True if retries is None else _bool("server.retries.enabled", retries),
        max_attempts=4 if attempts is None else _int("server.retries.max_attempts", attempts),
        base_uri=base_uri if base_uri is not None else text("base_uri", ""),
        file=file if file.is_file() else None,
        metastore=MetastoreConfig(
            type=text("metastore.type", "hive"),
            hive_uri=text("metastore.hive.uri", ""),
            glue_catalog_id=text("metastore.glue.catalog_id", ""),
            glue_region=text("metastore.glue.region", ""),
            glue_profile=text("metastore.glue.profile", ""),
            glue_access_key_id=text("metastore.glue.credentials.access_key_id", ""),
            glue_secret_access_key=text("metastore.glue.credentials.access_secret_key", "")
            or text("metastore.glue.credentials.secret_access_key", ""),
            glue_session_token=text("metastore.glue.credentials.session_token", ""),
            glue_db_location_uri=text("metastore.glue.db_location_uri", ""),
            fix_spark_placeholder=_bool("metastore.fix_spark_placeholder",
                                        value("metastore.fix_spark_placeholder") or False)),
    )


__all__ = ["DEFAULT_ENDPOINT", "ConfigError", "LakectlConfig", "MetastoreConfig", "load_config"]
