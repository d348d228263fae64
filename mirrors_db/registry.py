"""Choose and open a mirrors table backend from its configuration.

Each backend is a lazy loader: its module (and its driver) is imported only when
the configuration selects it, and a missing driver names the package to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from mirrors_db.config import MirrorsDatabaseConfig, MirrorsDatabaseType
from mirrors_db.errors import MirrorsDatabaseConfigError
from mirrors_db.models import Clock
from mirrors_db.table import MirrorsTable

#: type -> (module, class, section attribute, packages the module needs)
_BACKENDS: dict[MirrorsDatabaseType, tuple[str, str, str, str]] = {
    MirrorsDatabaseType.DYNAMODB: ("mirrors_db.dynamodb", "DynamoDBMirrorsTable", "dynamodb",
                                   "boto3"),
    MirrorsDatabaseType.POSTGRES: ("mirrors_db.sql", "PostgresMirrorsTable", "postgres",
                                   "sqlalchemy 'psycopg[binary]'"),
    MirrorsDatabaseType.SQLITE: ("mirrors_db.sql", "SQLiteMirrorsTable", "sqlite", "sqlalchemy"),
}


def _load(kind: MirrorsDatabaseType) -> Callable[..., MirrorsTable]:
    module_name, class_name, _, packages = _BACKENDS[kind]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise MirrorsDatabaseConfigError(
            f"the {kind.value} mirrors database needs a driver that is not installed "
            f"({exc.name or exc}); install it with: pip install {packages}"
        ) from None
    factory: Callable[..., MirrorsTable] = getattr(module, class_name)
    return factory


def open_mirrors_table(
    config: MirrorsDatabaseConfig | Mapping[str, Any], *, clock: Clock | None = None
) -> MirrorsTable:
    """Open the configured mirrors table, creating its schema or table if missing.

    Args:
        config: The ``mirrors_database`` section, parsed or as a mapping.
        clock: Time source for ``updated_at`` and lease expiry (default: UTC now).

    Raises:
        MirrorsDatabaseConfigError: Invalid configuration, missing driver, or an
            existing table that does not fit.
        MirrorsDatabaseUnavailableError: The database cannot be reached.
    """
    if not isinstance(config, MirrorsDatabaseConfig):
        config = MirrorsDatabaseConfig.from_mapping(config)
    section = getattr(config, _BACKENDS[config.type][2])
    factory = _load(config.type)
    return factory(section, page_size=config.list_mirrors_page_size, clock=clock)
