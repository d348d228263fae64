"""Schema upgrades of refstores written by earlier versions of the server.

Earlier versions kept branch protection rules, hidden branches, mirror markings and
the commits proven present in a mirror as string values of one ``settings`` table.
:func:`migrate_settings` moves them into their own tables once, inside the
transaction that creates the schema, and drops the old table.
"""

from __future__ import annotations

import json

from sqlalchemy import Column, Connection, MetaData, Table, Text, inspect, select

from lakefs_core.refstore.schema import (
    branch_protection,
    hidden_branches,
    mirror_markings,
    present_commits,
)

#: the old table's name and the prefixes/keys of the values it held
LEGACY_SETTINGS = "settings"
_PROTECTION_KEY = "branch_protection_rules"
_MIRROR_KEY = "mirror"
_PRESENT_PREFIX = "mirror-present/"
_HIDDEN_PREFIX = "hidden_branch/"


def migrate_settings(conn: Connection) -> int:
    """Move the rows of a legacy ``settings`` table into the typed tables.

    Returns:
        How many rows were moved (0 when there is no legacy table).
    """
    if not inspect(conn).has_table(LEGACY_SETTINGS):
        return 0
    legacy = Table(LEGACY_SETTINGS, MetaData(), Column("repo", Text), Column("key", Text),
                   Column("value", Text))
    moved = 0
    for repo, key, value in conn.execute(select(legacy.c.repo, legacy.c.key, legacy.c.value)):
        if key == _PROTECTION_KEY:
            conn.execute(branch_protection.insert().values(repo=repo, patterns=value))
        elif key == _MIRROR_KEY:
            data = json.loads(value)
            conn.execute(mirror_markings.insert().values(
                repo=repo, mirror_id=data["mirror_id"], source_region=data["source_region"],
                source_repository=data["source_repository"],
                detached=bool(data.get("detached"))))
        elif key.startswith(_PRESENT_PREFIX):
            conn.execute(present_commits.insert().values(
                repo=repo, commit_id=key.removeprefix(_PRESENT_PREFIX)))
        elif key.startswith(_HIDDEN_PREFIX) and value == "true":
            conn.execute(hidden_branches.insert().values(
                repo=repo, name=key.removeprefix(_HIDDEN_PREFIX)))
        else:
            continue
        moved += 1
    legacy.drop(conn)
    return moved
