"""Durable auth state on SQLAlchemy Core: users, access keys, groups and policies
(the SQL implementation of :class:`lakefs_core.auth.base.BaseAuthStore`).

One implementation serves SQLite (``sqlite:///path``, ``sqlite://`` in memory) and
PostgreSQL (``postgresql+psycopg://...``). The store owns its tables (``auth_*``) and
creates them when missing, so it can share a database with the refstore. Secret
access keys are kept encrypted (see :mod:`lakefs_core.auth.crypto`).

Deleting a user, group or policy also deletes its access keys, memberships and
attachments (foreign keys with ``ON DELETE CASCADE``). Adding a member or attaching a
policy that is already there is a no-op; removing or detaching one that is not there
raises :class:`NotFoundError`.
"""

from __future__ import annotations

import hmac
import json
import sqlite3
import uuid
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.schema import CreateIndex, CreateTable
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from lakefs_core.auth import builtin
from lakefs_core.auth.base import BaseAuthStore
from lakefs_core.auth.crypto import (
    SecretBox,
    generate_access_key_id,
    generate_secret,
    validate_access_key_id,
    validate_secret,
)
from lakefs_core.auth.model import (
    CommPrefs,
    Credential,
    CredentialSummary,
    Group,
    Policy,
    Statement,
    User,
    validate_entity_id,
)
from lakefs_core.auth.tables import (
    CHANGES_ROW,
    COUNT_CHANGE,
    READ_CHANGES,
    auth_changes,
    auth_metadata,
    credentials,
    group_members,
    group_policies,
    groups,
    metadata,
    policies,
    revoked_sessions,
    user_policies,
    users,
)
from lakefs_core.change_hint import ChangeHint, HintedCount
from lakefs_core.database import WRITE_OPTION, ThreadConnections, create_engine
from lakefs_core.errors import (
    AlreadyExistsError,
    AuthenticationError,
    DatabaseError,
    NotFoundError,
    SecretDecryptionError,
    ValidationError,
)

_SETUP_TIMESTAMP = "setup_timestamp"
_INSTALLATION_ID = "installation_id"
_COMM_PREFS = "comm_prefs"

# one key for every process creating the tables at once (PostgreSQL advisory lock)
_DDL_LOCK_KEY = zlib.crc32(b"lakefs_core.auth.store")

# Every API request authenticates and reads its user's policies: these statements are
# built once with bind parameters, since building one costs more than running it.
_USER_EXISTS = sa.select(users.c.username).where(users.c.username == sa.bindparam("username"))
_CREDENTIAL_AND_USER = (
    sa.select(credentials, users.c.email, users.c.friendly_name,
              users.c.creation_date.label("user_creation_date"))
    .join(users, users.c.username == credentials.c.username)
    .where(credentials.c.access_key_id == sa.bindparam("access_key_id")))


def _now() -> datetime:
    return datetime.now(UTC)


class AuthStore(BaseAuthStore):
    """Users, access keys, groups and policies in a SQL database (the auth store on
    ``database.type`` ``local`` and ``postgres``).

    Args:
        url: SQLAlchemy URL of the database (``sqlite:///...`` or
            ``postgresql+psycopg://...``).
        secret_key: ``auth.encrypt.secret_key``; secrets are encrypted with it and
            can only be read back with the same key.

    Raises:
        ValidationError: Unsupported database or empty ``secret_key``.
    """

    def __init__(self, url: str, secret_key: str | bytes) -> None:
        self._box = SecretBox(secret_key)
        self._engine = create_engine(url, what="auth database", pool_size=5,
                                     max_overflow=10, allow_memory=True)
        # writers take the write lock up front: a deferred transaction that reads and
        # then writes fails at once ("database is locked") when another writer got in
        # between, instead of waiting for it
        self._write_engine = self._engine.execution_options(**{WRITE_OPTION: True})
        # reads (every request authenticates and authorizes) need no snapshot spanning
        # statements; on PostgreSQL autocommit spares the BEGIN/ROLLBACK round trips
        self._read_engine = (self._engine.execution_options(isolation_level="AUTOCOMMIT")
                             if self._engine.dialect.name == "postgresql" else self._engine)
        username: sa.BindParameter[str] = sa.bindparam("username")
        direct = sa.select(user_policies.c.policy_name.label("name")).where(
            user_policies.c.username == username)
        via_groups = (sa.select(group_policies.c.policy_name.label("name"))
                      .join(group_members,
                            group_members.c.group_name == group_policies.c.group_name)
                      .where(group_members.c.username == username))
        names = sa.union(direct, via_groups).subquery()
        #: a user's policies, attached directly or through a group (``username``)
        self._effective_policies = (
            sa.select(policies).where(policies.c.name.in_(sa.select(names.c.name)))
            .order_by(self._bytewise(policies.c.name)))
        #: the driver's own connections, for the change count every request reads
        self._readers = ThreadConnections.of(self._engine)
        #: on a SQLite file, the count is read again only when a writer changed the hint
        self._count: HintedCount | None = None
        try:
            self._create_tables()
        except BaseException:
            self._engine.dispose()
            raise
        if self._readers is not None:
            try:
                hint = ChangeHint(f"{self._engine.url.database}-auth-changes")
            except OSError:
                pass  # a file that cannot be made (a read-only directory): read each time
            else:
                self._count = HintedCount(hint, self._read_changes)

    # --- lifecycle ---------------------------------------------------------------
    @property
    def engine(self) -> Engine:
        """The store's SQLAlchemy engine."""
        return self._engine

    def close(self) -> None:
        """Release the store's database connections."""
        if self._readers is not None:
            self._readers.close()
        if self._count is not None:
            self._count.hint.close()
        self._engine.dispose()

    def __enter__(self) -> AuthStore:
        return self

    def _create_tables(self) -> None:
        with self._write_engine.begin() as conn:  # BEGIN IMMEDIATE in SQLite
            if conn.dialect.name == "postgresql":
                # concurrent CREATE ... IF NOT EXISTS can still collide in PostgreSQL
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _DDL_LOCK_KEY})
            for table in metadata.sorted_tables:
                conn.execute(CreateTable(table, if_not_exists=True))
                for index in table.indexes:
                    conn.execute(CreateIndex(index, if_not_exists=True))
            conn.execute(self._insert_ignore(auth_changes).values(id=CHANGES_ROW, changes=0))

    def _insert_ignore(self, table: sa.Table) -> Any:
        """INSERT ... ON CONFLICT DO NOTHING for the store's dialect."""
        if self._engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(table).on_conflict_do_nothing()
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert(table).on_conflict_do_nothing()

    @contextmanager
    def _tx(self, write: bool = False) -> Iterator[Connection]:
        """A transaction; a value the database cannot hold (PostgreSQL takes no NUL in
        text) is a ValidationError."""
        try:
            with (self._write_engine if write else self._read_engine).begin() as conn:
                yield conn
                if write:
                    conn.execute(COUNT_CHANGE)
        except sa.exc.DataError as exc:
            raise ValidationError(f"value refused by the auth database: {exc.orig}") from exc
        finally:
            if write and self._count is not None:
                self._count.hint.change()  # after the commit (or its failure)

    def changes(self) -> int:
        """How many write transactions the auth tables have seen (one indexed read).

        Read on the driver's connection, outside SQLAlchemy's statement machinery: every
        request makes this read, and there it costs a tenth as much. On a SQLite file
        the thread keeps its connection (:class:`ThreadConnections`), and the read is
        skipped while the file's change hint stays the same (:mod:`lakefs_core.change_hint`).
        """
        if self._count is not None:
            return self._count.get()
        return self._read_changes()

    def _read_changes(self) -> int:
        readers = self._readers
        if readers is not None:
            try:
                row = readers.connection().execute(READ_CHANGES).fetchone()
            except sqlite3.Error as exc:
                raise DatabaseError(f"auth database: {exc}") from exc
            return int(row[0]) if row is not None else 0
        try:
            conn = self._engine.raw_connection()
        except sa.exc.SQLAlchemyError as exc:
            raise DatabaseError(f"auth database: {exc}") from exc
        try:
            cursor = conn.cursor()
            try:
                cursor.execute(READ_CHANGES)
                row = cursor.fetchone()
            finally:
                cursor.close()
        except Exception as exc:  # the driver's own errors (sqlite3, psycopg)
            conn.invalidate()  # the pool would otherwise roll back PostgreSQL's read
            raise DatabaseError(f"auth database: {exc}") from exc
        finally:
            conn.close()
        return int(row[0]) if row is not None else 0

    # --- helpers -------------------------------------------------------------------
    @staticmethod
    def _exists(conn: Connection, table: sa.Table, column: str, value: str) -> bool:
        col = table.c[column]
        return conn.execute(sa.select(col).where(col == value)).first() is not None

    def _require_user(self, conn: Connection, username: str) -> None:
        if conn.execute(_USER_EXISTS, {"username": username}).first() is None:
            raise NotFoundError(f"user not found: {username}")

    def _require_group(self, conn: Connection, name: str) -> None:
        if not self._exists(conn, groups, "name", name):
            raise NotFoundError(f"group not found: {name}")

    def _bytewise(self, column: sa.ColumnElement[str]) -> sa.ColumnElement[str]:
        """``column`` compared by bytes, as SQLite does (PostgreSQL follows a locale)."""
        return column.collate("C") if self._engine.dialect.name == "postgresql" else column

    def _page(self, query: sa.Select[Any], column: sa.ColumnElement[str], prefix: str,
              after: str, amount: int) -> sa.Select[Any]:
        """Order by ``column`` in byte order on every backend, filter and limit."""
        if amount < 0:
            raise ValidationError("amount must not be negative")
        column = self._bytewise(column)
        if prefix:
            # not LIKE: SQLite's LIKE ignores case and '%'/'_' would need escaping
            query = query.where(sa.func.substr(column, 1, len(prefix)) == prefix)
        if after:
            query = query.where(column > after)
        return query.order_by(column).limit(amount)

    @staticmethod
    def _user(row: sa.Row[Any]) -> User:
        return User(username=row.username, creation_date=row.creation_date, email=row.email,
                    friendly_name=row.friendly_name)

    @staticmethod
    def _group(row: sa.Row[Any]) -> Group:
        return Group(name=row.name, creation_date=row.creation_date,
                     description=row.description)

    @staticmethod
    def _policy(row: sa.Row[Any]) -> Policy:
        return Policy(name=row.name, creation_date=row.creation_date,
                      statements=[Statement.from_dict(s) for s in row.statements])

    def _credential(self, row: sa.Row[Any]) -> Credential:
        return Credential(access_key_id=row.access_key_id, user=row.username,
                          creation_date=row.creation_date,
                          secret=self._box.decrypt(row.secret_encrypted, row.access_key_id))

    # --- users ---------------------------------------------------------------------
    def create_user(self, username: str, *, email: str | None = None,
                    friendly_name: str | None = None) -> User:
        """Create a user.

        Raises:
            ValidationError: Invalid username.
            AlreadyExistsError: A user with this name exists.
        """
        validate_entity_id("user", username)
        user = User(username=username, email=email, friendly_name=friendly_name)
        try:
            with self._tx(write=True) as conn:
                if self._exists(conn, users, "username", username):
                    raise AlreadyExistsError(f"user already exists: {username}")
                self._insert_user(conn, user)
        except sa.exc.IntegrityError as exc:
            raise AlreadyExistsError(f"user already exists: {username}") from exc
        return user

    @staticmethod
    def _insert_user(conn: Connection, user: User) -> None:
        conn.execute(users.insert().values(
            username=user.username, email=user.email, friendly_name=user.friendly_name,
            creation_date=user.creation_date))

    def get_user(self, username: str) -> User:
        """Raises NotFoundError."""
        with self._tx() as conn:
            row = conn.execute(users.select().where(users.c.username == username)).first()
        if row is None:
            raise NotFoundError(f"user not found: {username}")
        return self._user(row)

    def list_users(self, prefix: str = "", after: str = "", amount: int = 1000) -> list[User]:
        """Users whose name starts with ``prefix`` and sorts after ``after``, by name."""
        query = self._page(users.select(), users.c.username, prefix, after, amount)
        with self._tx() as conn:
            return [self._user(r) for r in conn.execute(query)]

    def delete_user(self, username: str) -> None:
        """Delete a user with its access keys, memberships and policy attachments.

        Raises:
            NotFoundError: No such user.
        """
        with self._tx(write=True) as conn:
            if conn.execute(users.delete().where(users.c.username == username)).rowcount == 0:
                raise NotFoundError(f"user not found: {username}")

    # --- credentials -----------------------------------------------------------------
    def create_credentials(self, username: str, access_key_id: str | None = None,
                           secret: str | None = None) -> Credential:
        """Add an access key to a user; generate the id and/or secret when not given.

        Raises:
            ValidationError: An invalid given id or secret.
            NotFoundError: No such user.
            AlreadyExistsError: The access key id is taken.
        """
        cred = Credential(
            access_key_id=validate_access_key_id(access_key_id)
            if access_key_id is not None else generate_access_key_id(),
            secret=validate_secret(secret) if secret is not None else generate_secret(),
            user=username,
        )
        try:
            with self._tx(write=True) as conn:
                self._insert_credential(conn, cred)
        except sa.exc.IntegrityError as exc:
            # lost a race with a concurrent delete of the user or insert of the key
            with self._tx() as conn:
                self._require_user(conn, username)
            raise AlreadyExistsError(
                f"access key id already exists: {cred.access_key_id}") from exc
        return cred

    def _insert_credential(self, conn: Connection, cred: Credential) -> None:
        self._require_user(conn, cred.user)
        if self._exists(conn, credentials, "access_key_id", cred.access_key_id):
            raise AlreadyExistsError(f"access key id already exists: {cred.access_key_id}")
        conn.execute(credentials.insert().values(
            access_key_id=cred.access_key_id, username=cred.user,
            secret_encrypted=self._box.encrypt(cred.secret, cred.access_key_id),
            creation_date=cred.creation_date))

    def get_credentials(self, access_key_id: str) -> Credential:
        """An access key with its decrypted secret.

        Raises:
            NotFoundError: No such access key.
            SecretDecryptionError: The store's ``secret_key`` is not the one the secret
                was stored with.
        """
        with self._tx() as conn:
            row = conn.execute(credentials.select().where(
                credentials.c.access_key_id == access_key_id)).first()
        if row is None:
            raise NotFoundError(f"credentials not found: {access_key_id}")
        return self._credential(row)

    def list_credentials(self, username: str, after: str = "",
                         amount: int = 1000) -> list[CredentialSummary]:
        """A user's access keys (without secrets), by access key id.

        Raises:
            NotFoundError: No such user.
        """
        query = self._page(
            sa.select(credentials.c.access_key_id, credentials.c.username,
                      credentials.c.creation_date).where(credentials.c.username == username),
            credentials.c.access_key_id, "", after, amount)
        with self._tx() as conn:
            self._require_user(conn, username)
            return [CredentialSummary(r.access_key_id, r.username, r.creation_date)
                    for r in conn.execute(query)]

    def delete_credentials(self, username: str, access_key_id: str) -> None:
        """Delete one of a user's access keys.

        Raises:
            NotFoundError: No such user, or the key is not the user's.
        """
        with self._tx(write=True) as conn:
            self._require_user(conn, username)
            deleted = conn.execute(credentials.delete().where(
                credentials.c.access_key_id == access_key_id,
                credentials.c.username == username)).rowcount
            if deleted == 0:
                raise NotFoundError(f"credentials not found: {access_key_id}")

    def authenticate(self, access_key_id: str, secret: str) -> User:
        """The user owning ``access_key_id`` if ``secret`` is its secret (basic auth).

        Raises:
            AuthenticationError: Unknown access key or wrong secret (one message for
                both, so that callers cannot probe for key ids).
        """
        try:
            with self._tx() as conn:
                row = conn.execute(_CREDENTIAL_AND_USER,
                                   {"access_key_id": access_key_id}).first()
        except ValidationError:  # no key holds what the database cannot store
            row = None
        if row is None:
            raise AuthenticationError("invalid credentials")
        stored = self._box.decrypt(row.secret_encrypted, row.access_key_id)
        if not hmac.compare_digest(stored.encode(), secret.encode()):
            raise AuthenticationError("invalid credentials")
        return User(username=row.username, creation_date=row.user_creation_date,
                    email=row.email, friendly_name=row.friendly_name)

    # --- revoked UI sessions ----------------------------------------------------------
    def revoke_session(self, session_id: str, expires_at: datetime) -> None:
        """Record that a UI session was signed out, until it would have expired; rows
        of sessions expired by now are dropped at the same time."""
        if not session_id or len(session_id) > 64:
            raise ValidationError("a session id is 1 to 64 characters")
        with self._tx(write=True) as conn:
            conn.execute(revoked_sessions.delete().where(
                revoked_sessions.c.expires_at < _now()))
            conn.execute(self._insert_ignore(revoked_sessions).values(
                session_id=session_id, expires_at=expires_at))

    def session_revoked(self, session_id: str) -> bool:
        """Whether the UI session ``session_id`` was signed out."""
        with self._tx() as conn:
            return self._exists(conn, revoked_sessions, "session_id", session_id)

    def reencrypt_secrets(self, old_key: str) -> int:
        """Re-encrypt, with this store's key, every secret that ``old_key`` encrypted.

        Secrets ``old_key`` cannot decrypt (already re-encrypted, or another key's) are
        left as they are. One transaction: all or nothing.

        Returns:
            How many secrets were re-encrypted.
        """
        old = SecretBox(old_key)
        moved = 0
        with self._tx(write=True) as conn:
            rows = conn.execute(sa.select(credentials.c.access_key_id,
                                          credentials.c.secret_encrypted)).all()
            for key_id, blob in rows:
                try:
                    plain = old.decrypt(blob, key_id)
                except SecretDecryptionError:
                    continue
                conn.execute(credentials.update()
                             .where(credentials.c.access_key_id == key_id)
                             .values(secret_encrypted=self._box.encrypt(plain, key_id)))
                moved += 1
        return moved

    # --- groups --------------------------------------------------------------------
    def create_group(self, name: str, *, description: str | None = None) -> Group:
        """Create a group.

        Raises:
            ValidationError: Invalid name.
            AlreadyExistsError: A group with this name exists.
        """
        validate_entity_id("group", name)
        group = Group(name=name, description=description)
        try:
            with self._tx(write=True) as conn:
                if self._exists(conn, groups, "name", name):
                    raise AlreadyExistsError(f"group already exists: {name}")
                conn.execute(groups.insert().values(
                    name=name, description=description, creation_date=group.creation_date))
        except sa.exc.IntegrityError as exc:
            raise AlreadyExistsError(f"group already exists: {name}") from exc
        return group

    def get_group(self, name: str) -> Group:
        """Raises NotFoundError."""
        with self._tx() as conn:
            row = conn.execute(groups.select().where(groups.c.name == name)).first()
        if row is None:
            raise NotFoundError(f"group not found: {name}")
        return self._group(row)

    def list_groups(self, prefix: str = "", after: str = "", amount: int = 1000) -> list[Group]:
        """Groups whose name starts with ``prefix`` and sorts after ``after``, by name."""
        query = self._page(groups.select(), groups.c.name, prefix, after, amount)
        with self._tx() as conn:
            return [self._group(r) for r in conn.execute(query)]

    def delete_group(self, name: str) -> None:
        """Delete a group with its memberships and policy attachments.

        Raises:
            NotFoundError: No such group.
        """
        with self._tx(write=True) as conn:
            if conn.execute(groups.delete().where(groups.c.name == name)).rowcount == 0:
                raise NotFoundError(f"group not found: {name}")

    def add_user_to_group(self, username: str, group: str) -> None:
        """Make a user a member of a group (no-op when already a member).

        Raises:
            NotFoundError: No such user or group.
        """
        self._link(group_members, username=username, group_name=group)

    def remove_user_from_group(self, username: str, group: str) -> None:
        """Raises NotFoundError when the user is not a member of the group."""
        self._unlink(group_members, f"user {username} is not a member of group {group}",
                     username=username, group_name=group)

    def list_group_members(self, group: str, after: str = "",
                           amount: int = 1000) -> list[User]:
        """The group's members, by username. Raises NotFoundError (no such group)."""
        query = self._page(
            sa.select(users).join(group_members, group_members.c.username == users.c.username)
            .where(group_members.c.group_name == group), users.c.username, "", after, amount)
        with self._tx() as conn:
            self._require_group(conn, group)
            return [self._user(r) for r in conn.execute(query)]

    def list_user_groups(self, username: str, after: str = "",
                         amount: int = 1000) -> list[Group]:
        """The groups a user belongs to, by name. Raises NotFoundError (no such user)."""
        query = self._page(
            sa.select(groups).join(group_members, group_members.c.group_name == groups.c.name)
            .where(group_members.c.username == username), groups.c.name, "", after, amount)
        with self._tx() as conn:
            self._require_user(conn, username)
            return [self._group(r) for r in conn.execute(query)]

    # --- policies ------------------------------------------------------------------
    def create_policy(self, policy: Policy, *, system: bool = False) -> Policy:
        """Store a new policy.

        ``system``: a policy the server makes itself, under a name no user can choose
        (lakeFS's ``ACL(_-_)<group>`` for a group's ACL), so that it never takes over a
        user's policy of the same name.

        Raises:
            ValidationError: Invalid name.
            AlreadyExistsError: A policy with this name exists.
        """
        if not system:
            validate_entity_id("policy", policy.name)
        try:
            with self._tx(write=True) as conn:
                if self._exists(conn, policies, "name", policy.name):
                    raise AlreadyExistsError(f"policy already exists: {policy.name}")
                conn.execute(policies.insert().values(**self._policy_values(policy)))
        except sa.exc.IntegrityError as exc:
            raise AlreadyExistsError(f"policy already exists: {policy.name}") from exc
        return policy

    @staticmethod
    def _policy_values(policy: Policy) -> dict[str, Any]:
        return {"name": policy.name, "creation_date": policy.creation_date,
                "statements": [st.to_dict() for st in policy.statements]}

    def update_policy(self, policy: Policy) -> Policy:
        """Replace the statements of an existing policy (its creation date is kept).

        Returns:
            The stored policy.

        Raises:
            NotFoundError: No such policy.
        """
        with self._tx(write=True) as conn:
            updated = conn.execute(
                policies.update().where(policies.c.name == policy.name)
                .values(statements=[st.to_dict() for st in policy.statements])).rowcount
            if updated == 0:
                raise NotFoundError(f"policy not found: {policy.name}")
            row = conn.execute(policies.select().where(policies.c.name == policy.name)).one()
        return self._policy(row)

    def get_policy(self, name: str) -> Policy:
        """Raises NotFoundError."""
        with self._tx() as conn:
            row = conn.execute(policies.select().where(policies.c.name == name)).first()
        if row is None:
            raise NotFoundError(f"policy not found: {name}")
        return self._policy(row)

    def list_policies(self, prefix: str = "", after: str = "",
                      amount: int = 1000) -> list[Policy]:
        """Policies whose name starts with ``prefix`` and sorts after ``after``, by name."""
        query = self._page(policies.select(), policies.c.name, prefix, after, amount)
        with self._tx() as conn:
            return [self._policy(r) for r in conn.execute(query)]

    def delete_policy(self, name: str) -> None:
        """Delete a policy and detach it from every user and group.

        Raises:
            NotFoundError: No such policy.
        """
        with self._tx(write=True) as conn:
            if conn.execute(policies.delete().where(policies.c.name == name)).rowcount == 0:
                raise NotFoundError(f"policy not found: {name}")

    def attach_policy_to_user(self, username: str, policy: str) -> None:
        """Attach a policy to a user (no-op when attached). Raises NotFoundError."""
        self._link(user_policies, username=username, policy_name=policy)

    def detach_policy_from_user(self, username: str, policy: str) -> None:
        """Raises NotFoundError when the policy is not attached to the user."""
        self._unlink(user_policies, f"policy {policy} is not attached to user {username}",
                     username=username, policy_name=policy)

    def attach_policy_to_group(self, group: str, policy: str) -> None:
        """Attach a policy to a group (no-op when attached). Raises NotFoundError."""
        self._link(group_policies, group_name=group, policy_name=policy)

    def detach_policy_from_group(self, group: str, policy: str) -> None:
        """Raises NotFoundError when the policy is not attached to the group."""
        self._unlink(group_policies, f"policy {policy} is not attached to group {group}",
                     group_name=group, policy_name=policy)

    def list_user_policies(self, username: str) -> list[Policy]:
        """Policies attached directly to a user, by name. Raises NotFoundError."""
        query = (sa.select(policies)
                 .join(user_policies, user_policies.c.policy_name == policies.c.name)
                 .where(user_policies.c.username == username)
                 .order_by(self._bytewise(policies.c.name)))
        with self._tx() as conn:
            self._require_user(conn, username)
            return [self._policy(r) for r in conn.execute(query)]

    def list_group_policies(self, group: str) -> list[Policy]:
        """Policies attached to a group, by name. Raises NotFoundError."""
        query = (sa.select(policies)
                 .join(group_policies, group_policies.c.policy_name == policies.c.name)
                 .where(group_policies.c.group_name == group)
                 .order_by(self._bytewise(policies.c.name)))
        with self._tx() as conn:
            self._require_group(conn, group)
            return [self._policy(r) for r in conn.execute(query)]

    def effective_policies(self, username: str) -> list[Policy]:
        """Every policy that applies to a user: attached directly or through a group.

        Each policy appears once, sorted by name. Pass the result to
        :func:`lakefs_core.auth.rbac.check`.

        Raises:
            NotFoundError: No such user.
        """
        with self._tx() as conn:
            self._require_user(conn, username)
            rows = conn.execute(self._effective_policies, {"username": username})
            return [self._policy(r) for r in rows]

    # --- links -----------------------------------------------------------------------
    _PARENTS = {
        "username": (users, "username", "user"),
        "group_name": (groups, "name", "group"),
        "policy_name": (policies, "name", "policy"),
    }

    def _require_parents(self, conn: Connection, keys: dict[str, str]) -> None:
        for column, value in keys.items():
            table, parent_column, kind = self._PARENTS[column]
            if not self._exists(conn, table, parent_column, value):
                raise NotFoundError(f"{kind} not found: {value}")

    def _link(self, table: sa.Table, **keys: str) -> None:
        try:
            with self._tx(write=True) as conn:
                self._require_parents(conn, keys)
                conn.execute(self._insert_ignore(table).values(**keys))
        except sa.exc.IntegrityError:
            # a parent was deleted concurrently: report which one is gone
            with self._tx() as conn:
                self._require_parents(conn, keys)
            raise

    def _unlink(self, table: sa.Table, missing: str, **keys: str) -> None:
        with self._tx(write=True) as conn:
            self._require_parents(conn, keys)
            deleted = conn.execute(table.delete().where(
                *(table.c[k] == v for k, v in keys.items()))).rowcount
            if deleted == 0:
                raise NotFoundError(missing)

    # --- setup -----------------------------------------------------------------------
    def is_initialized(self) -> bool:
        """Whether :meth:`setup_admin` has completed once on this database."""
        with self._tx() as conn:
            return self._exists(conn, auth_metadata, "key", _SETUP_TIMESTAMP)

    def ensure_builtins(self) -> None:
        """Create the built-in policies and groups (and their attachments) if missing.

        Existing policies and groups of those names are left as they are, but for a
        built-in policy still as an earlier version defined it (never edited), which is
        brought up to the current definition.
        """
        with self._tx(write=True) as conn:
            self._ensure_builtins(conn)

    def _ensure_builtins(self, conn: Connection) -> None:
        now = _now()
        for policy in builtin.builtin_policies():
            conn.execute(self._insert_ignore(policies).values(
                **self._policy_values(policy) | {"creation_date": now}))
            earlier = [[st.to_dict() for st in version]
                       for version in builtin.SUPERSEDED.get(policy.name, ())]
            if not earlier:
                continue
            stored = conn.execute(sa.select(policies.c.statements).where(
                policies.c.name == policy.name)).scalar_one()
            if stored in earlier:
                conn.execute(policies.update().where(policies.c.name == policy.name).values(
                    statements=[st.to_dict() for st in policy.statements]))
        for group, attached in builtin.BUILTIN_GROUPS.items():
            conn.execute(self._insert_ignore(groups).values(
                name=group, description=None, creation_date=now))
            for policy_name in attached:
                conn.execute(self._insert_ignore(group_policies).values(
                    group_name=group, policy_name=policy_name))

    def installation_id(self) -> str:
        """This installation's id: a UUID made at the first call, the same ever after."""
        with self._tx(write=True) as conn:
            conn.execute(self._insert_ignore(auth_metadata).values(
                key=_INSTALLATION_ID, value=str(uuid.uuid4())))
            value: str = conn.execute(sa.select(auth_metadata.c.value).where(
                auth_metadata.c.key == _INSTALLATION_ID)).scalar_one()
            return value

    def set_comm_prefs(self, prefs: CommPrefs) -> None:
        """Record the communication preferences (replacing earlier ones)."""
        value = json.dumps({"email": prefs.email, "feature_updates": prefs.feature_updates})
        with self._tx(write=True) as conn:
            conn.execute(auth_metadata.delete().where(auth_metadata.c.key == _COMM_PREFS))
            conn.execute(auth_metadata.insert().values(key=_COMM_PREFS, value=value))

    def get_comm_prefs(self) -> CommPrefs | None:
        """The recorded communication preferences; None until some are set."""
        with self._tx() as conn:
            value = conn.execute(sa.select(auth_metadata.c.value).where(
                auth_metadata.c.key == _COMM_PREFS)).scalar_one_or_none()
        if value is None:
            return None
        data = json.loads(value)
        return CommPrefs(email=data.get("email"), feature_updates=bool(data.get("feature_updates")))

    def setup_admin(self, username: str, access_key_id: str | None = None,
                    secret: str | None = None) -> Credential:
        """Initialize the installation with an admin user; safe to call again.

        In one transaction: creates the built-in policies and groups that are missing,
        and then:

        - if ``username`` does not exist: creates it, adds it to ``Admins`` and gives it
          one access key (``access_key_id``/``secret`` when given, generated
          otherwise), which is returned;
        - if ``username`` exists: makes sure it is in ``Admins`` and creates **no**
          access key. When ``access_key_id`` is given, is that user's key, and
          ``secret`` is omitted or equal to the stored one, that key is returned
          (this makes a restart with the same configured credentials idempotent).
          Any other case raises :class:`AlreadyExistsError` and changes nothing.

        Finally the installation is marked initialized (:meth:`is_initialized`).

        Raises:
            ValidationError: Invalid username, access key id or secret.
            AlreadyExistsError: See above; also when ``access_key_id`` belongs to
                another user.
        """
        validate_entity_id("user", username)
        if access_key_id is not None:
            validate_access_key_id(access_key_id)
        if secret is not None:
            validate_secret(secret)
        # a concurrent setup may insert the same user between our check and insert
        for attempt in Retrying(retry=retry_if_exception_type(sa.exc.IntegrityError),
                                stop=stop_after_attempt(3), reraise=True):
            with attempt:
                return self._setup_admin_once(username, access_key_id, secret)
        raise AssertionError("unreachable")  # pragma: no cover

    def _setup_admin_once(self, username: str, access_key_id: str | None,
                          secret: str | None) -> Credential:
        with self._tx(write=True) as conn:
            self._ensure_builtins(conn)
            user_existed = self._exists(conn, users, "username", username)
            if not user_existed:
                self._insert_user(conn, User(username=username))
            conn.execute(self._insert_ignore(group_members).values(
                group_name=builtin.ADMINS, username=username))
            if user_existed:
                cred = self._existing_admin_key(conn, username, access_key_id, secret)
            else:
                cred = Credential(
                    access_key_id=access_key_id or generate_access_key_id(),
                    secret=secret or generate_secret(), user=username)
                self._insert_credential(conn, cred)
            conn.execute(self._insert_ignore(auth_metadata).values(
                key=_SETUP_TIMESTAMP, value=_now().isoformat()))
            return cred

    def _existing_admin_key(self, conn: Connection, username: str,
                            access_key_id: str | None, secret: str | None) -> Credential:
        if access_key_id is None:
            raise AlreadyExistsError(
                f"user {username} already exists; setup creates no new access key for it")
        row = conn.execute(credentials.select().where(
            credentials.c.access_key_id == access_key_id)).first()
        if row is None or row.username != username:
            raise AlreadyExistsError(
                f"user {username} already exists without access key {access_key_id}")
        cred = self._credential(row)
        if secret is not None and not hmac.compare_digest(cred.secret.encode(), secret.encode()):
            raise AlreadyExistsError(
                f"access key {access_key_id} of user {username} has a different secret")
        return cred
