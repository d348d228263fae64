"""The settings framework: typed models read from YAML and lakeFS-style variables.

The server's settings (:mod:`lakefs_core.config`), the replication service's
(:mod:`replication.config`) and the mirrors table's (:mod:`mirrors_db.config`) are
models on this framework: durations like ``1m`` or ``20s``, environment variables
named after field paths, YAML loading, and errors that name each field and where its
value came from.
"""

from lakefs_core.settings.durations import Duration, format_duration, parse_duration
from lakefs_core.settings.envsource import (
    FieldPathEnvSource,
    PrefixedSettings,
    env_var_paths,
    field_paths,
)
from lakefs_core.settings.errors import ConfigError, ConfigFieldError, FieldValueError
from lakefs_core.settings.fields import (
    ConfigModel,
    HttpEndpoint,
    ListenAddress,
    check_blockstore_sections,
    check_http_url,
    check_listen_address,
    plain_dict,
)
from lakefs_core.settings.loading import load_settings, read_yaml_file, validate_settings

__all__ = [
    "ConfigError",
    "ConfigFieldError",
    "ConfigModel",
    "Duration",
    "FieldPathEnvSource",
    "FieldValueError",
    "HttpEndpoint",
    "ListenAddress",
    "PrefixedSettings",
    "check_blockstore_sections",
    "check_http_url",
    "check_listen_address",
    "env_var_paths",
    "field_paths",
    "format_duration",
    "load_settings",
    "parse_duration",
    "plain_dict",
    "read_yaml_file",
    "validate_settings",
]
