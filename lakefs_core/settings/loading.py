"""Loading settings: defaults, then a YAML file, then environment variables; errors
translated into :class:`~lakefs_core.settings.errors.ConfigError` naming each field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import (
    BaseModel,
)
from pydantic import ValidationError as PydanticValidationError

from lakefs_core.settings.envsource import (
    FieldPathEnvSource,
    PrefixedSettings,
)
from lakefs_core.settings.errors import (
    ConfigError,
    ConfigFieldError,
    FieldValueError,
)


# --- loading --------------------------------------------------------------------------
def read_yaml_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a YAML config file whose top level is a mapping (an empty file is ``{}``).

    Raises:
        ConfigError: the file is missing, unreadable, not YAML, or not a mapping.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {os.fspath(path)}: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {os.fspath(path)} is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"config file {os.fspath(path)} must hold a mapping at the top level, "
            f"got {type(data).__name__}"
        )
    return data


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


M = TypeVar("M", bound=BaseModel)
P = TypeVar("P", bound=PrefixedSettings)


def _dotted(loc: Sequence[int | str]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part == "[key]":  # pydantic's marker: the map key itself is invalid
            text += " (key)"
        elif not re.fullmatch(r"[\w.-]+", part):
            text += f"[{part!r}]"
        else:
            text += ("." if text else "") + part
    return text


_SECRET_MARKERS = ("secret", "password", "connection_string", "token", "access_key")


def _is_secret(loc: Sequence[int | str]) -> bool:
    text = _dotted(loc)
    return any(marker in text for marker in _SECRET_MARKERS)


def _in_data(data: Any, loc: Sequence[int | str]) -> bool:
    for part in loc:
        in_dict = isinstance(data, dict) and part in data
        in_list = isinstance(data, list) and isinstance(part, int) and part < len(data)
        if not (in_dict or in_list):
            return False
        data = data[part]
    return True


def _where_to_set(
    loc: Sequence[int | str],
    env_prefix: str | None,
    aliases: Mapping[str, tuple[str, ...]] | None,
) -> str:
    path = tuple(str(p) for p in loc)
    names = [env_prefix + "_".join(path).upper()] if env_prefix else []
    names += [n for n, p in (aliases or {}).items() if p[: len(path)] == path]
    return " (set it in the config file or with " + ", ".join(names) + ")" if names else ""


def validate_settings(
    model: type[M],
    data: dict[str, Any],
    *,
    origins: Mapping[tuple[str, ...], str] | None = None,
    file: str | None = None,
    what: str = "configuration",
    env_prefix: str | None = None,
    aliases: Mapping[str, tuple[str, ...]] | None = None,
) -> M:
    """Validate merged settings, turning pydantic's error into a :class:`ConfigError`.

    Args:
        model: the settings model.
        data: merged settings (file overlaid with environment).
        origins: field path -> environment variable that set it.
        file: the YAML file the rest came from, if any.
        what: what to call the settings in the error message.
        env_prefix: environment prefix, to say which variable sets a missing field.
        aliases: extra variable names, likewise.
    """
    try:
        return model.model_validate(data)
    except PydanticValidationError as exc:
        errors: list[ConfigFieldError] = []
        for err in exc.errors(include_url=False):
            loc = tuple(p for p in err["loc"] if p not in ("function-after", "function-before"))
            message = err["msg"].removeprefix("Value error, ")
            cause = err.get("ctx", {}).get("error")
            if isinstance(cause, FieldValueError):
                loc = (*loc, *cause.field.split("."))
                message = cause.message
            # Our own value errors already quote the value; pydantic's do not.
            if "input" in err and err["type"] not in ("missing", "model_type", "value_error"):
                shown = err["input"]
                if not isinstance(shown, dict | list) and not _is_secret(loc):
                    message += f" (got {shown!r})"
            source = None
            for depth in range(len(loc), 0, -1):
                key = tuple(str(p) for p in loc[:depth])
                if origins and key in origins:
                    source = origins[key]
                    break
            if source is None and file is not None and loc and _in_data(data, loc):
                source = file
            if err["type"] == "missing":
                message += _where_to_set(loc, env_prefix, aliases)
            errors.append(ConfigFieldError(_dotted(loc) or "(top level)", message, source))
        raise ConfigError(f"invalid {what}", errors) from None


def load_settings(
    model: type[P],
    *,
    path: str | os.PathLike[str] | None,
    env: Mapping[str, str],
    file_env: str | None = None,
    defaults: Mapping[str, Any] | None = None,
    what: str = "configuration",
) -> P:
    """Load settings: ``defaults``, then the YAML file, then environment variables.

    Variables are named after ``model.ENV_PREFIX`` plus the field path, or one of
    ``model.ENV_ALIASES``.

    Args:
        model: the settings model.
        path: YAML file, or None for ``env[file_env]`` when that is set, else no file.
        env: the environment to read.
        file_env: variable that names the YAML file when ``path`` is None.
        defaults: values under the file (the file and the environment override them).
        what: what to call the settings in error messages.

    Raises:
        ConfigError: the file cannot be read or a setting is invalid.
    """
    if path is None and file_env and env.get(file_env):
        path = env[file_env]
    data = read_yaml_file(path) if path is not None else {}
    if defaults:
        data = _deep_merge(dict(defaults), data)
    source = FieldPathEnvSource(model, model.ENV_PREFIX, env, aliases=model.ENV_ALIASES)
    data = _deep_merge(data, source())
    return validate_settings(
        model,
        data,
        origins=source.origins,
        file=os.fspath(path) if path is not None else None,
        what=what,
        env_prefix=model.ENV_PREFIX,
        aliases=model.ENV_ALIASES,
    )
