"""Mirrors table on SQL: PostgreSQL (also CockroachDB) and SQLite, via SQLAlchemy 2.

Compare-and-swap is ``UPDATE ... WHERE version = :expected``; zero rows means the
race was lost. Uniqueness of live mirror names and storage namespaces is two
partial unique indexes (``WHERE state <> 'deleted'``), so a mirror reaching
``deleted`` frees both in the same write.

Change feed: PostgreSQL sends ``NOTIFY`` in the writing transaction (delivered on
commit; the row rides in the payload); SQLite appends to a change log table in
the writing transaction and watchers poll it.
"""

from __future__ import annotations

import contextlib
import logging
import os
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, NoReturn

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError, OperationalError

from lakefs_core.database import WRITE_OPTION, create_engine
from mirrors_db.codec import (
    branch_from_dict,
    branch_to_dict,
    cut_from_dict,
    cut_to_dict,
    event_from_json,
    event_to_json,
    group_from_dict,
    group_progress_from_dict,
    group_progress_to_dict,
    group_to_dict,
    lease_from_dict,
    mirror_from_dict,
    mirror_to_dict,
    reading_from_dict,
    reading_to_dict,
    to_micros,
)
from mirrors_db.config import PostgresMirrorsConfig, SQLiteMirrorsConfig
from mirrors_db.errors import (
    BranchProgressNotFoundError,
    GroupExistsError,
    GroupNotFoundError,
    InvalidStateTransitionError,
    LeaseHeldError,
    LeaseLostError,
    MirrorExistsError,
    MirrorNotFoundError,
    MirrorsDatabaseConfigError,
    MirrorsDatabaseError,
    MirrorsDatabaseUnavailableError,
    VersionConflictError,
)
from mirrors_db.models import (
    CUTS_KEPT,
    ChangeEvent,
    Clock,
    GroupCut,
    GroupProgress,
    Lease,
    Mirror,
    MirrorBranch,
    MirrorGroup,
    MirrorState,
    RowKind,
    SensorReading,
    check_branch_key,
    check_key_part,
    check_text,
)
from mirrors_db.table import ALL_KINDS, ChangeFeed, MirrorFilter, MirrorsTable

log = logging.getLogger(__name__)

metadata = sa.MetaData()

_LIVE = sa.text("state <> 'deleted'")

mirrors_t = sa.Table(
    "mirrors_db_mirrors",
    metadata,
    sa.Column("organization_id", sa.String(256), primary_key=True),
    sa.Column("id", sa.String(256), primary_key=True),
    sa.Column("name", sa.String(256), nullable=False),
    sa.Column("source_region", sa.String(256), nullable=False),
    sa.Column("source_repository", sa.String(256), nullable=False),
    sa.Column("destination_region", sa.String(256), nullable=False),
    sa.Column("storage_namespace", sa.String(1024), nullable=False),
    sa.Column("storage_id", sa.String(256), nullable=False, server_default=""),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Index("mirrors_db_live_name", "organization_id", "destination_region", "name",
             unique=True, sqlite_where=_LIVE, postgresql_where=_LIVE),
    sa.Index("mirrors_db_live_namespace", "organization_id", "storage_namespace",
             unique=True, sqlite_where=_LIVE, postgresql_where=_LIVE),
    sa.Index("mirrors_db_by_source", "organization_id", "source_region", "source_repository",
             "id"),
    sa.Index("mirrors_db_by_destination", "organization_id", "destination_region", "id"),
)

branches_t = sa.Table(
    "mirrors_db_branches",
    metadata,
    sa.Column("organization_id", sa.String(256), primary_key=True),
    sa.Column("mirror_id", sa.String(256), primary_key=True),
    sa.Column("branch", sa.String(256), primary_key=True),
    sa.Column("source_head", sa.String(256)),
    sa.Column("source_head_seen_at", sa.BigInteger),
    sa.Column("pending_commit", sa.String(256)),
    sa.Column("promoted_commit", sa.String(256)),
    sa.Column("promoted_at", sa.BigInteger),
    sa.Column("missing_ranges", sa.BigInteger, nullable=False),
    sa.Column("missing_objects", sa.BigInteger, nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("source_seen_at", sa.BigInteger),
    sa.Column("source_confirmed_at", sa.BigInteger),
)

leases_t = sa.Table(
    "mirrors_db_leases",
    metadata,
    sa.Column("organization_id", sa.String(256), primary_key=True),
    sa.Column("name", sa.String(256), primary_key=True),
    sa.Column("owner", sa.String(256), nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
)

groups_t = sa.Table(
    "mirrors_db_groups",
    metadata,
    sa.Column("organization_id", sa.String(256), primary_key=True),
    sa.Column("id", sa.String(256), primary_key=True),
    sa.Column("name", sa.String(256), nullable=False),
    sa.Column("source_region", sa.String(256), nullable=False),
    sa.Column("destination_region", sa.String(256), nullable=False),
    sa.Column("members", sa.Text, nullable=False),
    sa.Column("last_cut", sa.BigInteger, nullable=False),
    sa.Column("heads_read_at", sa.BigInteger),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Index("mirrors_db_group_name", "organization_id", "name", unique=True),
)

cuts_t = sa.Table(
    "mirrors_db_group_cuts",
    metadata,
    sa.Column("organization_id", sa.String(256), primary_key=True),
    sa.Column("group_id", sa.String(256), primary_key=True),
    sa.Column("sequence", sa.BigInteger, primary_key=True),
    sa.Column("heads", sa.Text, nullable=False),
    sa.Column("taken_at", sa.BigInteger, nullable=False),
    sa.Column("reason", sa.String(64), nullable=False),
)

group_progress_t = sa.Table(
    "mirrors_db_group_progress",
    metadata,
    sa.Column("organization_id", sa.String(256), primary_key=True),
    sa.Column("group_id", sa.String(256), primary_key=True),
    sa.Column("served_cut", sa.BigInteger, nullable=False),
    sa.Column("served_taken_at", sa.BigInteger),
    sa.Column("served_at", sa.BigInteger),
    sa.Column("waiting_cut", sa.BigInteger, nullable=False),
    sa.Column("waiting_for", sa.Text, nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("updated_at", sa.BigInteger, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
)

readings_t = sa.Table(
    "mirrors_db_sensor_readings",
    metadata,
    sa.Column("organization_id", sa.String(256), primary_key=True),
    sa.Column("destination_region", sa.String(256), primary_key=True),
    sa.Column("source_region", sa.String(256), primary_key=True),
    sa.Column("page", sa.Integer, primary_key=True),
    sa.Column("read_at", sa.BigInteger, nullable=False),
    sa.Column("confirmed", sa.Text, nullable=False),
)

#: columns added after a table's first version, by table: a table without them gets
#: them when it is opened (each has a server default, or is nullable, that fits the
#: existing rows)
ADDED_COLUMNS = {"mirrors_db_mirrors": {"storage_id"},
                 "mirrors_db_branches": {"source_seen_at", "source_confirmed_at"}}

#: SQLite only: the change log that watchers poll.
changes_t = sa.Table(
    "mirrors_db_changes",
    metadata,
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("payload", sa.Text, nullable=False),
    sqlite_autoincrement=True,
)

#: Change log entries kept behind the newest (watchers poll every few ms).
CHANGE_LOG_KEEP = 10_000
#: NOTIFY payloads must stay under 8000 bytes; larger rows are fetched by the watcher.
NOTIFY_PAYLOAD_LIMIT = 7900
NOTIFY_CHANNEL = "mirrors_db_changes"


class _Missing(Exception):
    """Internal: a conditional statement matched no row (rolls back the transaction)."""


def _key(org: str, *parts: str) -> str:
    return "/".join((org, *parts))


class SqlMirrorsTable(MirrorsTable):
    """The shared SQL implementation; use PostgresMirrorsTable or SQLiteMirrorsTable."""

    _tables: tuple[sa.Table, ...] = (mirrors_t, branches_t, leases_t, groups_t, cuts_t,
                                     group_progress_t, readings_t)

    def __init__(
        self, engine: Engine, *, page_size: int, clock: Clock | None, where: str
    ) -> None:
        super().__init__(page_size=page_size, clock=clock)
        self._engine = engine
        self._where = where  # for messages, without credentials
        try:
            self._create_schema()
        except Exception:
            engine.dispose()
            raise

    # --- dialect hooks ----------------------------------------------------------------
    def _lock_schema(self, conn: Connection) -> None:
        """Serialize concurrent schema creation (several replicas start at once)."""

    @abstractmethod
    def _publish(self, conn: Connection, events: Sequence[ChangeEvent]) -> None:
        """Announce ``events`` to watchers, inside the writing transaction."""

    @abstractmethod
    def _upsert(self) -> Any:
        """The dialect's ``insert`` construct (it has ``on_conflict_do_update``)."""

    @contextlib.contextmanager
    def _write(self) -> Iterator[Connection]:
        with self._unavailable_as_error(), self._engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def _read(self) -> Iterator[Connection]:
        with self._unavailable_as_error(), self._engine.connect() as conn:
            yield conn

    @contextlib.contextmanager
    def _unavailable_as_error(self) -> Iterator[None]:
        try:
            yield
        except OperationalError as exc:
            raise MirrorsDatabaseUnavailableError(
                f"the mirrors database at {self._where} failed: {exc.orig}"
            ) from None

    # --- schema --------------------------------------------------------------------------
    def _create_schema(self) -> None:
        with self._write() as conn:
            self._lock_schema(conn)
            metadata.create_all(conn, tables=list(self._tables))
            inspector = sa.inspect(conn)
            for table in self._tables:
                have = {c["name"] for c in inspector.get_columns(table.name)}
                for name in sorted(ADDED_COLUMNS.get(table.name, set()) - have):
                    self._add_column(conn, table.c[name])
                    have.add(name)
                missing = sorted(set(table.c.keys()) - have)
                if missing:
                    raise MirrorsDatabaseConfigError(
                        f"table {table.name} at {self._where} exists but lacks columns "
                        f"{missing}; it was not created by this version of mirrors_db"
                    )

    @staticmethod
    def _add_column(conn: Connection, column: sa.Column[Any]) -> None:
        """Add a column that a later version introduced (it has a server default)."""
        ddl = sa.schema.CreateColumn(column).compile(dialect=conn.dialect)
        conn.execute(sa.text(f"ALTER TABLE {column.table.name} ADD COLUMN {ddl}"))

    # --- mirrors --------------------------------------------------------------------------
    def _insert_mirror(self, mirror: Mirror) -> None:
        try:
            with self._write() as conn:
                conn.execute(mirrors_t.insert().values(mirror_to_dict(mirror)))
                self._publish(conn, [_mirror_event(mirror)])
        except IntegrityError:
            raise self._explain_clash(mirror) from None

    def _import_mirrors(self, mirrors: Sequence[Mirror]) -> None:
        try:
            with self._write() as conn:
                conn.execute(mirrors_t.insert(), [mirror_to_dict(m) for m in mirrors])
                self._publish(conn, [_mirror_event(m) for m in mirrors])
        except IntegrityError as exc:
            raise MirrorExistsError(
                f"import clashes with a stored mirror (id, live name or storage namespace): "
                f"{exc.orig}"
            ) from None

    def _explain_clash(self, mirror: Mirror) -> MirrorExistsError:
        c = mirrors_t.c
        with self._read() as conn:
            if conn.execute(sa.select(c.id).where(
                    c.organization_id == mirror.organization_id, c.id == mirror.id)).first():
                return MirrorExistsError(f"mirror id {mirror.id!r} already exists")
            live = c.state != MirrorState.DELETED.value
            other = conn.execute(sa.select(c.id).where(
                c.organization_id == mirror.organization_id,
                c.destination_region == mirror.destination_region, c.name == mirror.name,
                live)).scalar()
            if other is not None:
                return MirrorExistsError(
                    f"mirror {other!r} already mirrors into {mirror.name!r} in region "
                    f"{mirror.destination_region!r}"
                )
            other = conn.execute(sa.select(c.id).where(
                c.organization_id == mirror.organization_id,
                c.storage_namespace == mirror.storage_namespace, live)).scalar()
        if other is not None:
            return MirrorExistsError(
                f"storage namespace {mirror.storage_namespace!r} is used by mirror {other!r}"
            )
        return MirrorExistsError(f"mirror {mirror.id!r} clashes with a concurrent creation")

    def get_mirror(self, organization_id: str, mirror_id: str) -> Mirror:
        check_key_part(organization_id, "organization_id")
        check_key_part(mirror_id, "mirror id")
        c = mirrors_t.c
        with self._read() as conn:
            row = conn.execute(sa.select(mirrors_t).where(
                c.organization_id == organization_id, c.id == mirror_id)).first()
        if row is None:
            raise MirrorNotFoundError(organization_id, mirror_id)
        return mirror_from_dict(row._mapping, _key(organization_id, mirror_id))

    def _list_mirrors(self, where: MirrorFilter, after_id: str | None, limit: int) -> list[Mirror]:
        c = mirrors_t.c
        conds = [c.organization_id == where.organization_id]
        if where.source_region is not None:
            conds += [c.source_region == where.source_region,
                      c.source_repository == where.source_repository]
        if where.destination_region is not None:
            conds.append(c.destination_region == where.destination_region)
        if after_id is not None:
            conds.append(c.id > after_id)
        stmt = sa.select(mirrors_t).where(*conds).order_by(c.id).limit(limit)
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return [mirror_from_dict(r._mapping, _key(where.organization_id, r.id)) for r in rows]

    def _update_mirror(
        self, new: Mirror, expected_version: int, from_states: frozenset[MirrorState]
    ) -> Mirror:
        c = mirrors_t.c
        stmt = (
            mirrors_t.update()
            .where(c.organization_id == new.organization_id, c.id == new.id,
                   c.version == expected_version, c.state.in_(sorted(s.value for s in from_states)))
            .values(state=new.state.value, error=new.error,
                    updated_at=to_micros(new.updated_at), version=new.version)
            .returning(*mirrors_t.c)
        )
        with self._write() as conn:
            row = conn.execute(stmt).first()
            if row is not None:
                stored = mirror_from_dict(row._mapping, _key(new.organization_id, new.id))
                self._publish(conn, [_mirror_event(stored)])
                return stored
        current = self.get_mirror(new.organization_id, new.id)
        if current.version != expected_version:
            raise VersionConflictError(
                f"mirror {new.id!r} is at version {current.version}, not {expected_version}"
            )
        raise InvalidStateTransitionError(current.state.value, new.state.value, new.id)

    def delete_mirror(
        self, organization_id: str, mirror_id: str, expected_version: int | None = None
    ) -> None:
        check_key_part(organization_id, "organization_id")
        check_key_part(mirror_id, "mirror id")
        c, b = mirrors_t.c, branches_t.c
        conds = [c.organization_id == organization_id, c.id == mirror_id]
        if expected_version is not None:
            conds.append(c.version == expected_version)
        try:
            with self._write() as conn:
                if conn.execute(mirrors_t.delete().where(*conds)).rowcount == 0:
                    raise _Missing
                gone = conn.execute(
                    branches_t.delete()
                    .where(b.organization_id == organization_id, b.mirror_id == mirror_id)
                    .returning(b.branch)
                ).scalars().all()
                events = [ChangeEvent(RowKind.BRANCH, organization_id, (mirror_id, br), True, None)
                          for br in gone]
                events.append(
                    ChangeEvent(RowKind.MIRROR, organization_id, (mirror_id,), True, None))
                self._publish(conn, events)
        except _Missing:
            current = self.get_mirror(organization_id, mirror_id)  # raises if missing
            raise VersionConflictError(
                f"mirror {mirror_id!r} is at version {current.version}, not {expected_version}"
            ) from None

    # --- branch progress --------------------------------------------------------------------
    def get_branch_progress(
        self, organization_id: str, mirror_id: str, branch: str
    ) -> MirrorBranch:
        check_branch_key(organization_id, mirror_id, branch)
        b = branches_t.c
        with self._read() as conn:
            row = conn.execute(sa.select(branches_t).where(
                b.organization_id == organization_id, b.mirror_id == mirror_id,
                b.branch == branch)).first()
        if row is None:
            raise BranchProgressNotFoundError(organization_id, mirror_id, branch)
        return branch_from_dict(row._mapping, _key(organization_id, mirror_id, branch))

    def list_branch_progress(self, organization_id: str, mirror_id: str) -> list[MirrorBranch]:
        check_key_part(organization_id, "organization_id")
        check_key_part(mirror_id, "mirror id")
        b = branches_t.c
        with self._read() as conn:
            rows = conn.execute(sa.select(branches_t).where(
                b.organization_id == organization_id, b.mirror_id == mirror_id,
            ).order_by(b.branch)).all()
        return [branch_from_dict(r._mapping, _key(organization_id, mirror_id, r.branch))
                for r in rows]

    def _list_all_branches(self, organization_id: str, after: tuple[str, str] | None,
                           limit: int) -> list[MirrorBranch]:
        b = branches_t.c
        conds = [b.organization_id == organization_id]
        if after is not None:
            conds.append(sa.tuple_(b.mirror_id, b.branch) > sa.tuple_(*after))
        stmt = (sa.select(branches_t).where(*conds).order_by(b.mirror_id, b.branch)
                .limit(limit))
        with self._read() as conn:
            rows = conn.execute(stmt).all()
        return [branch_from_dict(r._mapping, _key(organization_id, r.mirror_id, r.branch))
                for r in rows]

    def _insert_branch(self, progress: MirrorBranch) -> None:
        c = mirrors_t.c
        try:
            with self._write() as conn:
                state = conn.execute(
                    sa.select(c.state)
                    .where(c.organization_id == progress.organization_id,
                           c.id == progress.mirror_id)
                    .with_for_update(read=True)  # hold off a concurrent delete_mirror
                ).scalar()
                if state is None or state == MirrorState.DELETED.value:
                    raise _Missing
                conn.execute(branches_t.insert().values(branch_to_dict(progress)))
                self._publish(conn, [_branch_event(progress)])
        except _Missing:
            raise MirrorNotFoundError(progress.organization_id, progress.mirror_id,
                                      "no live mirror to record branch progress for") from None
        except IntegrityError:
            raise VersionConflictError(
                f"progress of branch {progress.branch!r} of mirror {progress.mirror_id!r} "
                "already exists"
            ) from None

    def _update_branch(self, progress: MirrorBranch, expected_version: int) -> None:
        b = branches_t.c
        cond = self._branch_cond(progress.organization_id, progress.mirror_id, progress.branch)
        values = branch_to_dict(progress)
        try:
            with self._write() as conn:
                stmt = branches_t.update().where(*cond, b.version == expected_version)
                if conn.execute(stmt.values(values)).rowcount == 0:
                    raise _Missing
                self._publish(conn, [_branch_event(progress)])
        except _Missing:
            self._raise_branch_conflict(progress.organization_id, progress.mirror_id,
                                        progress.branch, expected_version)

    def delete_branch_progress(
        self, organization_id: str, mirror_id: str, branch: str, expected_version: int
    ) -> None:
        check_branch_key(organization_id, mirror_id, branch)
        b = branches_t.c
        cond = self._branch_cond(organization_id, mirror_id, branch)
        try:
            with self._write() as conn:
                stmt = branches_t.delete().where(*cond, b.version == expected_version)
                if conn.execute(stmt).rowcount == 0:
                    raise _Missing
                self._publish(conn, [ChangeEvent(RowKind.BRANCH, organization_id,
                                                 (mirror_id, branch), True, None)])
        except _Missing:
            self._raise_branch_conflict(organization_id, mirror_id, branch, expected_version)

    @staticmethod
    def _branch_cond(org: str, mirror_id: str, branch: str) -> list[Any]:
        b = branches_t.c
        return [b.organization_id == org, b.mirror_id == mirror_id, b.branch == branch]

    def _raise_branch_conflict(
        self, org: str, mirror_id: str, branch: str, expected_version: int
    ) -> NoReturn:
        current = self.get_branch_progress(org, mirror_id, branch)  # raises if missing
        raise VersionConflictError(
            f"progress of branch {branch!r} of mirror {mirror_id!r} is at version "
            f"{current.version}, not {expected_version}"
        )

    # --- mirror groups ----------------------------------------------------------------------
    def _insert_group(self, group: MirrorGroup) -> None:
        try:
            with self._write() as conn:
                conn.execute(groups_t.insert().values(group_to_dict(group)))
                self._publish(conn, [_group_event(group)])
        except IntegrityError:
            raise GroupExistsError(f"a group with id {group.id!r} or name {group.name!r} "
                                   "exists already") from None

    def get_group(self, organization_id: str, group_id: str) -> MirrorGroup:
        check_key_part(organization_id, "organization_id")
        check_key_part(group_id, "group id")
        g = groups_t.c
        with self._read() as conn:
            row = conn.execute(sa.select(groups_t).where(
                g.organization_id == organization_id, g.id == group_id)).first()
        if row is None:
            raise GroupNotFoundError(organization_id, group_id)
        return group_from_dict(row._mapping, _key(organization_id, "group", group_id))

    def list_groups(self, organization_id: str) -> list[MirrorGroup]:
        check_key_part(organization_id, "organization_id")
        g = groups_t.c
        with self._read() as conn:
            rows = conn.execute(sa.select(groups_t).where(
                g.organization_id == organization_id).order_by(g.id)).all()
        return [group_from_dict(r._mapping, _key(organization_id, "group", r.id)) for r in rows]

    def _update_group(self, new: MirrorGroup, expected_version: int) -> MirrorGroup:
        g = groups_t.c
        data = group_to_dict(new)
        with self._write() as conn:
            done = conn.execute(groups_t.update().where(
                g.organization_id == new.organization_id, g.id == new.id,
                g.version == expected_version).values(
                    members=data["members"], heads_read_at=data["heads_read_at"],
                    updated_at=data["updated_at"], version=new.version)).rowcount
            if done:
                self._publish(conn, [_group_event(new)])
                return new
        current = self.get_group(new.organization_id, new.id)  # raises if missing
        raise VersionConflictError(
            f"group {new.id!r} is at version {current.version}, not {expected_version}")

    def delete_group(self, organization_id: str, group_id: str,
                     expected_version: int | None = None) -> None:
        check_key_part(organization_id, "organization_id")
        check_key_part(group_id, "group id")
        g, c = groups_t.c, cuts_t.c
        conds = [g.organization_id == organization_id, g.id == group_id]
        if expected_version is not None:
            conds.append(g.version == expected_version)
        try:
            with self._write() as conn:
                if conn.execute(groups_t.delete().where(*conds)).rowcount == 0:
                    raise _Missing
                conn.execute(cuts_t.delete().where(c.organization_id == organization_id,
                                                   c.group_id == group_id))
                self._publish(conn, [ChangeEvent(RowKind.GROUP, organization_id, (group_id,),
                                                 True, None)])
        except _Missing:
            current = self.get_group(organization_id, group_id)  # raises if missing
            raise VersionConflictError(
                f"group {group_id!r} is at version {current.version}, not {expected_version}"
            ) from None

    def _insert_cut(self, group: MirrorGroup, expected_version: int, cut: GroupCut) -> None:
        g, c = groups_t.c, cuts_t.c
        data = group_to_dict(group)
        try:
            with self._write() as conn:
                done = conn.execute(groups_t.update().where(
                    g.organization_id == group.organization_id, g.id == group.id,
                    g.version == expected_version).values(
                        last_cut=group.last_cut, heads_read_at=data["heads_read_at"],
                        updated_at=data["updated_at"], version=group.version)).rowcount
                if not done:
                    raise _Missing
                conn.execute(cuts_t.insert().values(cut_to_dict(cut)))
                conn.execute(cuts_t.delete().where(
                    c.organization_id == cut.organization_id, c.group_id == cut.group_id,
                    c.sequence <= cut.sequence - CUTS_KEPT))
                self._publish(conn, [_group_event(group), _cut_event(cut)])
        except _Missing:
            current = self.get_group(group.organization_id, group.id)  # raises if missing
            raise VersionConflictError(
                f"group {group.id!r} is at version {current.version}, not {expected_version}"
            ) from None

    def list_cuts(self, organization_id: str, group_id: str, after: int = 0) -> list[GroupCut]:
        check_key_part(organization_id, "organization_id")
        check_key_part(group_id, "group id")
        c = cuts_t.c
        with self._read() as conn:
            rows = conn.execute(sa.select(cuts_t).where(
                c.organization_id == organization_id, c.group_id == group_id,
                c.sequence > after).order_by(c.sequence)).all()
        return [cut_from_dict(r._mapping, _key(organization_id, "cut", group_id,
                                               str(r.sequence))) for r in rows]

    def get_group_progress(self, organization_id: str, group_id: str) -> GroupProgress | None:
        check_key_part(organization_id, "organization_id")
        check_key_part(group_id, "group id")
        p = group_progress_t.c
        with self._read() as conn:
            row = conn.execute(sa.select(group_progress_t).where(
                p.organization_id == organization_id, p.group_id == group_id)).first()
        return None if row is None else group_progress_from_dict(
            row._mapping, _key(organization_id, "group-progress", group_id))

    def _put_group_progress(self, progress: GroupProgress, expected_version: int) -> None:
        p, g = group_progress_t.c, groups_t.c
        values = group_progress_to_dict(progress)
        try:
            with self._write() as conn:
                if expected_version == 0:
                    if conn.execute(sa.select(g.id).where(
                            g.organization_id == progress.organization_id,
                            g.id == progress.group_id)).first() is None:
                        raise GroupNotFoundError(progress.organization_id, progress.group_id)
                    conn.execute(group_progress_t.insert().values(values))
                elif not conn.execute(group_progress_t.update().where(
                        p.organization_id == progress.organization_id,
                        p.group_id == progress.group_id,
                        p.version == expected_version).values(values)).rowcount:
                    raise _Missing
                self._publish(conn, [_group_progress_event(progress)])
        except (_Missing, IntegrityError):
            raise VersionConflictError(
                f"progress of group {progress.group_id!r} is not at version "
                f"{expected_version}") from None

    def delete_group_progress(self, organization_id: str, group_id: str,
                              expected_version: int) -> None:
        p = group_progress_t.c
        with self._write() as conn:
            if not conn.execute(group_progress_t.delete().where(
                    p.organization_id == organization_id, p.group_id == group_id,
                    p.version == expected_version)).rowcount:
                raise VersionConflictError(
                    f"progress of group {group_id!r} is not at version {expected_version}")
            self._publish(conn, [ChangeEvent(RowKind.GROUP_PROGRESS, organization_id,
                                             (group_id,), True, None)])

    # --- sensor readings ---------------------------------------------------------------------
    def _put_sensor_reading(self, reading: SensorReading) -> bool:
        rc = readings_t.c
        ins = self._upsert()(readings_t).values(reading_to_dict(reading))
        stmt = ins.on_conflict_do_update(
            index_elements=[rc.organization_id, rc.destination_region, rc.source_region,
                            rc.page],
            set_={"read_at": ins.excluded.read_at, "confirmed": ins.excluded.confirmed},
            where=rc.read_at < ins.excluded.read_at).returning(rc.page)
        with self._write() as conn:
            return conn.execute(stmt).first() is not None

    def list_sensor_readings(self, organization_id: str,
                             destination_region: str | None = None) -> list[SensorReading]:
        check_key_part(organization_id, "organization_id")
        rc = readings_t.c
        query = sa.select(readings_t).where(rc.organization_id == organization_id)
        if destination_region is not None:
            query = query.where(rc.destination_region == destination_region)
        with self._read() as conn:
            rows = conn.execute(query).all()
        return [reading_from_dict(r._mapping, _key(organization_id, "reading",
                                                   r.destination_region, r.source_region,
                                                   str(r.page))) for r in rows]

    # --- leases --------------------------------------------------------------------------------
    def _acquire_lease(
        self, organization_id: str, name: str, owner: str, now: datetime, expires_at: datetime
    ) -> Lease:
        lc = leases_t.c
        ins = self._upsert()(leases_t).values(
            organization_id=organization_id, name=name, owner=owner,
            expires_at=to_micros(expires_at), version=1,
        )
        stmt = ins.on_conflict_do_update(
            index_elements=[lc.organization_id, lc.name],
            set_={"owner": ins.excluded.owner, "expires_at": ins.excluded.expires_at,
                  "version": lc.version + 1},
            where=sa.or_(lc.expires_at <= to_micros(now), lc.owner == owner),
        ).returning(*leases_t.c)
        with self._write() as conn:
            row = conn.execute(stmt).first()
            if row is not None:
                lease = lease_from_dict(row._mapping, _key(organization_id, name))
                self._publish(conn, [_lease_event(lease)])
                return lease
            held = conn.execute(sa.select(leases_t).where(
                lc.organization_id == organization_id, lc.name == name)).first()
        if held is None:  # cannot happen inside one transaction; be explicit anyway
            raise MirrorsDatabaseError(f"lease {name!r} vanished while being acquired")
        current = lease_from_dict(held._mapping, _key(organization_id, name))
        raise LeaseHeldError(name, current.owner, current.expires_at)

    def _renew_lease(self, lease: Lease, expires_at: datetime) -> Lease:
        lc = leases_t.c
        stmt = (
            leases_t.update()
            .where(lc.organization_id == lease.organization_id, lc.name == lease.name,
                   lc.owner == lease.owner, lc.version == lease.version)
            .values(expires_at=to_micros(expires_at), version=lc.version + 1)
            .returning(*leases_t.c)
        )
        with self._write() as conn:
            row = conn.execute(stmt).first()
            if row is not None:
                renewed = lease_from_dict(row._mapping, _key(lease.organization_id, lease.name))
                self._publish(conn, [_lease_event(renewed)])
                return renewed
        raise LeaseLostError(f"lease {lease.name!r} is no longer held by {lease.owner!r}")

    def release_lease(self, lease: Lease) -> bool:
        lc = leases_t.c
        with self._write() as conn:
            deleted = conn.execute(leases_t.delete().where(
                lc.organization_id == lease.organization_id, lc.name == lease.name,
                lc.owner == lease.owner, lc.version == lease.version)).rowcount
            if deleted:
                self._publish(conn, [ChangeEvent(RowKind.LEASE, lease.organization_id,
                                                 (lease.name,), True, None)])
        return bool(deleted)

    def get_lease(self, organization_id: str, name: str) -> Lease | None:
        check_key_part(organization_id, "organization_id")
        check_text(name, "lease name", 256)
        lc = leases_t.c
        with self._read() as conn:
            row = conn.execute(sa.select(leases_t).where(
                lc.organization_id == organization_id, lc.name == name)).first()
        return None if row is None else lease_from_dict(row._mapping, _key(organization_id, name))

    def close(self) -> None:
        self._engine.dispose()

    # --- used by the PostgreSQL feed when a payload carried no row ------------------------
    def _fetch_row(self, event: ChangeEvent) -> ChangeEvent:
        org = event.organization_id
        row: Any
        try:
            if event.kind is RowKind.MIRROR:
                row = self.get_mirror(org, event.key[0])
            elif event.kind is RowKind.BRANCH:
                row = self.get_branch_progress(org, event.key[0], event.key[1])
            elif event.kind is RowKind.GROUP:
                row = self.get_group(org, event.key[0])
            elif event.kind is RowKind.GROUP_PROGRESS:
                row = self.get_group_progress(org, event.key[0])
            elif event.kind is RowKind.CUT:
                seq = int(event.key[1])
                row = next((c for c in self.list_cuts(org, event.key[0], seq - 1)
                            if c.sequence == seq), None)
            else:
                row = self.get_lease(org, event.key[0])
        except (MirrorNotFoundError, BranchProgressNotFoundError, GroupNotFoundError):
            row = None
        return ChangeEvent(event.kind, org, event.key, row is None, row)


def _mirror_event(m: Mirror) -> ChangeEvent:
    return ChangeEvent(RowKind.MIRROR, m.organization_id, (m.id,), False, m)


def _branch_event(p: MirrorBranch) -> ChangeEvent:
    return ChangeEvent(RowKind.BRANCH, p.organization_id, (p.mirror_id, p.branch), False, p)


def _group_event(g: MirrorGroup) -> ChangeEvent:
    return ChangeEvent(RowKind.GROUP, g.organization_id, (g.id,), False, g)


def _cut_event(c: GroupCut) -> ChangeEvent:
    return ChangeEvent(RowKind.CUT, c.organization_id, (c.group_id, str(c.sequence)), False, c)


def _group_progress_event(p: GroupProgress) -> ChangeEvent:
    return ChangeEvent(RowKind.GROUP_PROGRESS, p.organization_id, (p.group_id,), False, p)


def _lease_event(lease: Lease) -> ChangeEvent:
    return ChangeEvent(RowKind.LEASE, lease.organization_id, (lease.name,), False, lease)


# ==== PostgreSQL ========================================================================
def postgres_url(connection_string: str) -> sa.URL:
    """A SQLAlchemy URL (psycopg 3 driver) from a lakeFS-style or SQLAlchemy string.

    Raises:
        MirrorsDatabaseConfigError: Not a PostgreSQL URL.
    """
    try:
        url = sa.make_url(connection_string)
    except sa.exc.ArgumentError:
        raise MirrorsDatabaseConfigError(
            "mirrors_database.postgres.connection_string is not a URL like "
            "postgres://user:password@host:5432/database"
        ) from None
    if url.get_backend_name() not in ("postgres", "postgresql", "cockroachdb"):
        raise MirrorsDatabaseConfigError(
            f"mirrors_database.postgres.connection_string has scheme {url.drivername!r}; "
            "expected postgres:// or postgresql://"
        )
    return url.set(drivername="postgresql+psycopg")


class PostgresMirrorsTable(SqlMirrorsTable):
    """Mirrors table on PostgreSQL; the schema is created on startup if missing."""

    def __init__(
        self, config: PostgresMirrorsConfig, *, page_size: int, clock: Clock | None = None
    ) -> None:
        url = postgres_url(config.connection_string.get_secret_value())
        self._dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self._connect_timeout = config.connect_timeout
        pool_size = min(5, config.max_open_connections)
        engine = create_engine(url, what="mirrors database", pool_size=pool_size,
                               max_overflow=config.max_open_connections - pool_size,
                               connect_timeout=config.connect_timeout)
        where = url.render_as_string(hide_password=True).replace("+psycopg", "")
        super().__init__(engine, page_size=page_size, clock=clock, where=where)

    def _lock_schema(self, conn: Connection) -> None:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(7236051943104656)"))

    def _upsert(self) -> Any:
        return pg_dialect.insert

    def _publish(self, conn: Connection, events: Sequence[ChangeEvent]) -> None:
        payloads = []
        for event in events:
            payload = event_to_json(event)
            if len(payload.encode()) > NOTIFY_PAYLOAD_LIMIT:
                payload = event_to_json(event, include_row=False)
            payloads.append(payload)
        conn.execute(
            sa.text("SELECT pg_notify(:channel, p) FROM unnest(CAST(:payloads AS text[])) AS p"),
            {"channel": NOTIFY_CHANNEL, "payloads": payloads},
        )

    def watch(
        self,
        organization_id: str | None = None,
        kinds: frozenset[RowKind] = ALL_KINDS,
        poll_interval: float | None = None,
    ) -> ChangeFeed:
        return _NotifyFeed(self, organization_id, kinds, poll_interval or 0.25)


class _NotifyFeed(ChangeFeed):
    """LISTEN on a dedicated autocommit connection."""

    def __init__(
        self,
        table: PostgresMirrorsTable,
        organization_id: str | None,
        kinds: frozenset[RowKind],
        wait: float,
    ) -> None:
        super().__init__(organization_id, kinds)
        self._table = table
        self._wait = wait
        self._conn = self._listen()
        self._start("mirrors-db-pg-feed")

    def _listen(self) -> Any:
        import psycopg

        try:
            conn = psycopg.connect(self._table._dsn, autocommit=True,
                                   connect_timeout=self._table._connect_timeout)
        except psycopg.OperationalError as exc:
            raise MirrorsDatabaseUnavailableError(
                f"cannot open a LISTEN connection to {self._table._where}: {exc}"
            ) from None
        conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        return conn

    def _poll(self) -> None:
        for notify in self._conn.notifies(timeout=self._wait, stop_after=1000):
            event, partial = event_from_json(notify.payload)
            self._emit(self._table._fetch_row(event) if partial else event)
            if self._stop.is_set():
                return

    def _recover(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()
        self._conn = self._listen()

    def _shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()


# ==== SQLite ================================================================================
class SQLiteMirrorsTable(SqlMirrorsTable):
    """Mirrors table in one SQLite file (WAL mode), for a single machine.

    Several processes may share the file; writes take the write lock up front
    (``BEGIN IMMEDIATE``) so that concurrent writers queue instead of failing.
    """

    _tables = (*SqlMirrorsTable._tables, changes_t)

    def __init__(
        self, config: SQLiteMirrorsConfig, *, page_size: int, clock: Clock | None = None
    ) -> None:
        path = os.path.abspath(os.path.expanduser(config.path))
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError as exc:
            raise MirrorsDatabaseConfigError(
                f"mirrors_database.sqlite.path {config.path!r}: cannot create its directory: "
                f"{exc}"
            ) from None
        engine = create_engine(sa.URL.create("sqlite+pysqlite", database=path),
                               what="mirrors database")
        super().__init__(engine, page_size=page_size, clock=clock, where=f"sqlite:{path}")

    def _upsert(self) -> Any:
        return sqlite_dialect.insert

    def _publish(self, conn: Connection, events: Sequence[ChangeEvent]) -> None:
        if not events:
            return
        conn.execute(changes_t.insert(), [{"payload": event_to_json(e)} for e in events])
        last = conn.execute(sa.select(sa.func.max(changes_t.c.seq))).scalar() or 0
        if last % 1000 < len(events):  # crossed a multiple of 1000: trim now and then
            conn.execute(changes_t.delete().where(changes_t.c.seq <= last - CHANGE_LOG_KEEP))

    def watch(
        self,
        organization_id: str | None = None,
        kinds: frozenset[RowKind] = ALL_KINDS,
        poll_interval: float | None = None,
    ) -> ChangeFeed:
        return _ChangeLogFeed(self._engine, organization_id, kinds, poll_interval or 0.05)


class _ChangeLogFeed(ChangeFeed):
    """Polls the change log table for entries after the last one seen."""

    def __init__(
        self,
        engine: Engine,
        organization_id: str | None,
        kinds: frozenset[RowKind],
        interval: float,
    ) -> None:
        super().__init__(organization_id, kinds)
        self._engine = engine
        self._interval = interval
        with engine.connect() as conn:
            self._last = conn.execute(sa.select(sa.func.max(changes_t.c.seq))).scalar() or 0
        self._start("mirrors-db-sqlite-feed")

    def _poll(self) -> None:
        if self._stop.wait(self._interval):
            return
        stmt = (sa.select(changes_t.c.seq, changes_t.c.payload)
                .where(changes_t.c.seq > self._last).order_by(changes_t.c.seq).limit(1000))
        with self._engine.connect() as conn:
            rows = conn.execute(stmt).all()
        for seq, payload in rows:
            self._last = seq
            event, _ = event_from_json(payload)
            self._emit(event)

