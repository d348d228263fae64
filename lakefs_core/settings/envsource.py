"""Environment variables named like lakeFS's: ``<PREFIX><FIELD_PATH>``, matched by path.

Because field names contain underscores themselves, a variable is matched against the
list of every known field path, never split on ``_``. Fields that hold a list, a map or
a whole section take a JSON value.
"""

from __future__ import annotations

import contextlib
import json
import os
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from lakefs_core.settings.fields import (
    plain_dict,
)


# --- environment mapping --------------------------------------------------------------
def _section_model(annotation: Any) -> type[BaseModel] | None:
    """The model class behind ``Model`` or ``Model | None``, else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(models) == 1:
            return _section_model(models[0])
    return None


def _takes_json(annotation: Any) -> bool:
    """Whether an environment value for this field must be parsed as JSON."""
    if _section_model(annotation) is not None:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_takes_json(a) for a in typing.get_args(annotation) if a is not type(None))
    return origin in (list, dict, tuple, set) or annotation in (list, dict)


def field_paths(
    model: type[BaseModel], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], FieldInfo]]:
    """Every field path of a settings model, sections and their fields, depth first."""
    for name, info in model.model_fields.items():
        if info.exclude:
            continue
        path = (*prefix, name)
        yield path, info
        sub = _section_model(info.annotation)
        if sub is not None:
            yield from field_paths(sub, path)


def env_var_paths(model: type[BaseModel], prefix: str) -> dict[str, tuple[tuple[str, ...], bool]]:
    """Every environment variable name a settings model accepts.

    Returns:
        Upper-case variable name -> (field path, whether the value is JSON). A name
        that two paths would share goes to the path whose leading segments are longest
        (``a_b.c`` beats ``a.b_c``), so the mapping is deterministic.
    """
    names: dict[str, tuple[tuple[str, ...], bool]] = {}
    for path, info in sorted(field_paths(model), key=lambda item: [-len(p) for p in item[0]]):
        name = (prefix + "_".join(path)).upper()
        names.setdefault(name, (path, _takes_json(info.annotation)))
    return names


def _set_path(data: dict[str, Any], path: Sequence[str], value: Any) -> None:
    node = data
    for key in path[:-1]:
        child = node.get(key)
        if not isinstance(child, dict):
            child = {}
            node[key] = child
        node = child
    node[path[-1]] = value


class FieldPathEnvSource(PydanticBaseSettingsSource):
    """Environment variables matched against a model's known field paths.

    Args:
        settings_cls: the settings model.
        prefix: variable prefix, e.g. ``LAKEFS_``.
        env: the environment to read (``os.environ`` or a plain mapping in tests).
        aliases: extra variable names (matched case-insensitively, no prefix) for
            chosen field paths, e.g. the keys of a Kubernetes secret.

    After the source is called, :attr:`origins` maps every field path it set to the
    variable it came from (used to name the variable in error messages).
    """

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        prefix: str,
        env: Mapping[str, str],
        aliases: Mapping[str, tuple[str, ...]] | None = None,
    ) -> None:
        super().__init__(settings_cls)
        self.prefix = prefix
        self.env = env
        self.aliases = {k.upper(): v for k, v in (aliases or {}).items()}
        self.origins: dict[tuple[str, ...], str] = {}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        # Values are resolved in __call__ by whole paths, never field by field.
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        known = env_var_paths(self.settings_cls, self.prefix)
        found: list[tuple[int, int, str, tuple[str, ...], bool, str]] = []
        for var in sorted(self.env):
            upper = var.upper()
            if upper in known:
                path, is_json = known[upper]
                rank = 1
            elif upper in self.aliases:
                path = self.aliases[upper]
                is_json, rank = False, 0
            else:
                continue
            found.append((len(path), rank, var, path, is_json, self.env[var]))
        data: dict[str, Any] = {}
        # Shallow paths first so that a deeper variable refines a JSON section;
        # prefixed names after aliases so that they win.
        for _, _, var, path, is_json, raw in sorted(found, key=lambda f: (f[0], f[1])):
            value: Any = raw
            if is_json:
                # Not JSON: hand the text on and let validation name the field.
                with contextlib.suppress(json.JSONDecodeError):
                    value = json.loads(raw)
            _set_path(data, path, value)
            self.origins[path] = var
        return data


class PrefixedSettings(BaseSettings):
    """Settings read from ``<ENV_PREFIX><FIELD_PATH>`` variables (and ``ENV_ALIASES``).

    ``Model()`` reads the process environment; the ``load_*`` functions also read a
    YAML file and report errors as :class:`ConfigError`.
    """

    model_config = SettingsConfigDict(extra="forbid")

    #: prefix of the environment variables, e.g. ``LAKEFS_``
    ENV_PREFIX: ClassVar[str] = ""
    #: extra un-prefixed variable names for chosen field paths
    ENV_ALIASES: ClassVar[Mapping[str, tuple[str, ...]]] = {}

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, FieldPathEnvSource(
            settings_cls, cls.ENV_PREFIX, os.environ, aliases=cls.ENV_ALIASES
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict of the settings (see :func:`plain_dict`)."""
        return plain_dict(self)
