"""The SQL tables of the auth store (:class:`lakefs_core.auth.store.AuthStore`): users,
access keys, groups, policies and their links, installation metadata, signed-out UI
sessions, and the row counting the writes to them all."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

_NAME = sa.String(256)


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A timestamp stored as naive UTC and read back as aware UTC on every backend."""

    impl = sa.DateTime()
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None,
                             dialect: sa.Dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


metadata = sa.MetaData()

users = sa.Table(
    "auth_users", metadata,
    sa.Column("username", _NAME, primary_key=True),
    sa.Column("email", sa.String(512), nullable=True),
    sa.Column("friendly_name", sa.String(512), nullable=True),
    sa.Column("creation_date", UTCDateTime(), nullable=False),
)

credentials = sa.Table(
    "auth_credentials", metadata,
    sa.Column("access_key_id", sa.String(128), primary_key=True),
    sa.Column("username", _NAME,
              sa.ForeignKey("auth_users.username", ondelete="CASCADE"), nullable=False),
    sa.Column("secret_encrypted", sa.LargeBinary(), nullable=False),
    sa.Column("creation_date", UTCDateTime(), nullable=False),
    sa.Index("auth_credentials_by_user", "username", "access_key_id"),
)

groups = sa.Table(
    "auth_groups", metadata,
    sa.Column("name", _NAME, primary_key=True),
    sa.Column("description", sa.Text(), nullable=True),
    sa.Column("creation_date", UTCDateTime(), nullable=False),
)

group_members = sa.Table(
    "auth_group_members", metadata,
    sa.Column("group_name", _NAME, sa.ForeignKey("auth_groups.name", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("username", _NAME, sa.ForeignKey("auth_users.username", ondelete="CASCADE"),
              primary_key=True),
    sa.Index("auth_group_members_by_user", "username", "group_name"),
)

policies = sa.Table(
    "auth_policies", metadata,
    sa.Column("name", _NAME, primary_key=True),
    sa.Column("statements", sa.JSON(), nullable=False),
    sa.Column("creation_date", UTCDateTime(), nullable=False),
)

user_policies = sa.Table(
    "auth_user_policies", metadata,
    sa.Column("username", _NAME, sa.ForeignKey("auth_users.username", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("policy_name", _NAME, sa.ForeignKey("auth_policies.name", ondelete="CASCADE"),
              primary_key=True),
)

group_policies = sa.Table(
    "auth_group_policies", metadata,
    sa.Column("group_name", _NAME, sa.ForeignKey("auth_groups.name", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("policy_name", _NAME, sa.ForeignKey("auth_policies.name", ondelete="CASCADE"),
              primary_key=True),
)

auth_metadata = sa.Table(
    "auth_metadata", metadata,
    sa.Column("key", sa.String(128), primary_key=True),
    sa.Column("value", sa.Text(), nullable=False),
)

#: web UI sessions signed out before they expired (ids are random; rows go at expiry)
revoked_sessions = sa.Table(
    "auth_revoked_sessions", metadata,
    sa.Column("session_id", sa.String(64), primary_key=True),
    sa.Column("expires_at", UTCDateTime(), nullable=False),
    sa.Index("auth_revoked_sessions_by_expiry", "expires_at"),
)

#: one row counting the writes to the auth tables (:meth:`AuthStore.changes`)
auth_changes = sa.Table(
    "auth_changes", metadata,
    sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
    sa.Column("changes", sa.BigInteger(), nullable=False),
)
CHANGES_ROW = 1
COUNT_CHANGE = (auth_changes.update().where(auth_changes.c.id == CHANGES_ROW)
                 .values(changes=auth_changes.c.changes + 1))
#: read on the driver's own connection: the read that every request makes
READ_CHANGES = f"SELECT changes FROM auth_changes WHERE id = {CHANGES_ROW}"
