"""The refstore on SQLAlchemy Core: one implementation for SQLite and PostgreSQL.

Every public method runs in its own short transaction on a pooled connection, so
the store is safe to share between threads. Branch moves are compare-and-swap
``UPDATE ... WHERE`` statements; transient lock errors are retried with bounds.

The engine comes from :func:`lakefs_core.database.create_engine` (SQLite in WAL mode
with a busy timeout and foreign keys on); on SQLite the store begins transactions
itself, writers with ``BEGIN IMMEDIATE``.

The tables are in :mod:`lakefs_core.refstore.schema`, the row conversions, the hot
statements and key-range helpers in :mod:`lakefs_core.refstore.rows`; the records of
repository operations (garbage collection rules, dump and restore tasks, imports, pull
requests) in :mod:`lakefs_core.refstore.sql_records`.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import sqlalchemy.exc as sa_exc
from sqlalchemy import (
    Connection,
    Engine,
    Row,
    Table,
    and_,
    func,
    or_,
    select,
)
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL
from tenacity import (
    Retrying,
    before_sleep_log,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from lakefs_core.database import (
    First,
    ThreadConnections,
    create_engine,
    first_on,
    first_on_driver,
    parse_url,
    sqlite_begin,
    sqlite_text,
)
from lakefs_core.errors import (
    BranchChangedError,
    BranchExistsError,
    BranchNotFoundError,
    CommitNotFoundError,
    DatabaseError,
    NonEmptyRepositoryError,
    ReadOnlyRepositoryError,
    RepositoryExistsError,
    RepositoryNotFoundError,
    TagExistsError,
    TagNotFoundError,
    ValidationError,
)
from lakefs_core.graveler.model import (
    Branch,
    BranchUpdate,
    Commit,
    CommitRecord,
    MirrorMarking,
    Repository,
    Tag,
)
from lakefs_core.refstore.base import RefStore, check_branch_refs, check_branch_updates
from lakefs_core.refstore.migrations import migrate_settings
from lakefs_core.refstore.rows import (
    BRANCH_COLUMNS,
    REPOSITORY_COLUMNS,
    REPOSITORY_EXISTS,
    SELECT_BRANCH,
    SELECT_HIDDEN,
    SELECT_MARKING,
    SELECT_PRESENT,
    SELECT_PROTECTION,
    SELECT_REPOSITORY,
    branch_of,
    branch_values,
    check_amount,
    dump_map,
    dump_tokens,
    fetch_all,
    key_range,
    marking_of,
    repository_of,
)
from lakefs_core.refstore.schema import (
    REPO_CHILDREN,
    branch_expiries,
    branch_protection,
    branches,
    commits,
    hidden_branches,
    mirror_markings,
    present_commits,
    repositories,
    repository_metadata,
    schema,
    tags,
)
from lakefs_core.refstore.sql_records import RepositoryRecords
from lakefs_core.refstore.sql_staging import StagedRecords

_log = logging.getLogger(__name__)

#: the tables under names that a dump's refs (parameters named like them) leave free
commits_table, branches_table, tags_table = commits, branches, tags

T = TypeVar("T")

#: rows fetched per query when streaming staged entries
DEFAULT_PAGE_SIZE = 1000

#: the repository row, locked until the transaction ends (PostgreSQL)
_REPOSITORY_LOCKED = {"share": REPOSITORY_EXISTS.with_for_update(read=True),
                      "update": REPOSITORY_EXISTS.with_for_update()}

#: key for pg_advisory_xact_lock, held while the schema is created
_SCHEMA_LOCK_KEY = 0x6C616B6566735F72  # "lakefs_r"


# --- helpers --------------------------------------------------------------------------
def _is_transient(exc: BaseException) -> bool:
    """A lock or serialization failure that a fresh attempt may not meet."""
    if not isinstance(exc, sa_exc.OperationalError):
        return False
    sqlstate = getattr(exc.orig, "sqlstate", None)
    if sqlstate is not None:  # PostgreSQL: serialization failure, deadlock detected
        return sqlstate in ("40001", "40P01")
    text = str(exc.orig)  # SQLite: SQLITE_BUSY, SQLITE_LOCKED
    return "database is locked" in text or "database table is locked" in text


#: attempts of a transaction that meets a lock (the last one's error is final)
_TRANSIENT_ATTEMPTS = 10


def _sleep(seconds: float) -> None:
    time.sleep(seconds)


#: the retries after a first attempt met a lock (copied per use: a Retrying keeps
#: state). Attempt k of the transaction waits up to min(0.5, 0.01 * 2 ** (k - 1)) s
#: before the next; this object numbers its attempts from the second one.
_TRANSIENT_RETRY = Retrying(
    retry=retry_if_exception(_is_transient),
    stop=stop_after_attempt(_TRANSIENT_ATTEMPTS - 1),
    wait=wait_random_exponential(multiplier=0.02, max=0.5),
    sleep=_sleep,
    before_sleep=before_sleep_log(_log, logging.DEBUG),
    reraise=True,
)


# --- the store ------------------------------------------------------------------------
def _commit_of(row: Row[Any]) -> Commit:
    return Commit(
        parents=tuple(json.loads(row.parents)),
        metarange_id=row.metarange_id,
        message=row.message,
        committer=row.committer,
        creation_date=row.creation_date,
        metadata=json.loads(row.metadata),
        generation=row.generation,
    )


class SQLRefStore(StagedRecords, RepositoryRecords, RefStore):
    """A :class:`RefStore` on SQLite or PostgreSQL through SQLAlchemy Core.

    The schema is created on construction if missing (idempotent, and safe when
    several processes open the same database at once).

    Args:
        url: a SQLAlchemy URL, ``sqlite:///path/to/file.db`` or
            ``postgresql+psycopg://user:password@host:port/dbname``.
        pool_size: connections kept open in the pool.
        max_overflow: extra connections allowed under load (the default pool serves
            about 50 threads at once).
        busy_timeout: SQLite only: seconds a writer waits for the write lock before
            the attempt counts as failed (and is retried, a bounded number of times).
        page_size: rows per query when :meth:`list_staged` streams entries.

    Raises:
        ValidationError: the URL names an unsupported database.
        DatabaseError: the database cannot be reached or the schema cannot be created.
    """

    def __init__(
        self,
        url: str | URL,
        *,
        pool_size: int = 10,
        max_overflow: int = 40,
        busy_timeout: float = 10.0,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> None:
        parsed = parse_url(url)
        if page_size < 1:
            raise ValidationError(f"page_size must be positive, got {page_size}")
        self._page_size = page_size
        self._upserts: dict[str, Any] = {}
        self._display_url = parsed.render_as_string(hide_password=True)
        backend = parsed.get_backend_name()
        #: starts a transaction on a connection, when the driver does not
        self._begin: Callable[[Connection, bool], None] | None = None
        if backend not in ("sqlite", "postgresql"):
            raise ValidationError(
                f"unsupported refstore database {backend!r}: use sqlite or postgresql")
        self._engine = create_engine(parsed, what="refstore", pool_size=pool_size,
                                     max_overflow=max_overflow, busy_timeout=busy_timeout,
                                     begin_listener=False)
        if backend == "sqlite":
            self._begin = sqlite_begin
        # a PostgreSQL read is one statement, or a few that need no common snapshot:
        # autocommit spares the BEGIN/ROLLBACK round trips
        self._read_engine = (self._engine.execution_options(isolation_level="AUTOCOMMIT")
                             if backend == "postgresql" else self._engine)
        #: the driver's own connections for the hottest reads (SQLite files)
        self._readers = ThreadConnections.of(self._engine, busy_timeout)
        self._writers = ThreadConnections.of(self._engine, busy_timeout, writable=True)
        self.stages_without_waiting = self._writers is not None
        #: this process's writers of the SQLite file, in turn (None: another database)
        self._gate = None if self._writers is None else self._writers.gate
        try:
            self._write(self._create_schema)
        except BaseException:
            self._engine.dispose()
            raise

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for diagnostics and instrumentation)."""
        return self._engine

    def close(self) -> None:
        """Close every pooled connection. The store must not be used afterwards."""
        for connections in (self._readers, self._writers):
            if connections is not None:
                connections.close()
        self._engine.dispose()

    def __repr__(self) -> str:
        return f"SQLRefStore({self._display_url!r})"

    # --- transactions -----------------------------------------------------------------
    def _create_schema(self, conn: Connection) -> None:
        if conn.dialect.name == "postgresql":
            # two first openers would both find no table and both CREATE it
            conn.execute(select(func.pg_advisory_xact_lock(_SCHEMA_LOCK_KEY)))
        schema.create_all(conn)
        migrate_settings(conn)

    def _read(self, work: Callable[[Connection], T]) -> T:
        return self._run(work, write=False)

    def _read_row(self, statement: Any, params: Mapping[str, Any]) -> Any:
        """The first row of one statement built once (None if none): on SQLite, on the
        thread's own driver connection, without a transaction around it."""
        readers = self._readers
        if readers is None:
            return self._read(lambda conn: conn.execute(statement, params).first())
        sql = sqlite_text(statement)
        return self._run(lambda _: readers.first(sql, params), write=False, driver=True)

    def _read_rows(self, work: Callable[[First], T]) -> T:
        """A read transaction whose ``work`` only runs statements built once and takes
        their first rows: on SQLite, on the thread's own driver connection
        (:class:`ThreadConnections`), which costs a fraction of SQLAlchemy's path."""
        readers = self._readers
        if readers is None:
            return self._read(lambda conn: work(first_on(conn)))
        return self._run(lambda _: readers.read(lambda conn: work(first_on_driver(conn))),
                         write=False, driver=True)

    def _write(self, work: Callable[[Connection], T], *, repo_fk: str | None = None) -> T:
        """Run ``work`` in a write transaction.

        ``repo_fk`` names the repository that the written rows reference by foreign
        key: the only constraint such a write can break is that the repository is gone.
        """
        return self._run(work, write=True, repo_fk=repo_fk)

    def _run(self, work: Callable[[Connection], T], *, write: bool,
             repo_fk: str | None = None, driver: bool = False) -> T:
        """``driver``: ``work`` opens its own transaction (and is given None)."""
        try:
            return self._attempts(work, write, driver)
        except sa_exc.IntegrityError as exc:
            if repo_fk is None:
                raise DatabaseError(f"refstore constraint violated: {exc.orig}") from exc
            raise RepositoryNotFoundError(f"repository {repo_fk!r} not found") from exc
        except sa_exc.DataError as exc:
            raise ValidationError(f"value refused by the database: {exc.orig}") from exc
        except sa_exc.DBAPIError as exc:
            raise DatabaseError(f"refstore database {self._display_url}: {exc.orig}") from exc
        except sa_exc.TimeoutError as exc:  # every pooled connection stayed busy
            raise DatabaseError(f"refstore database {self._display_url}: {exc}") from exc

    def _attempts(self, work: Callable[[Connection], T], write: bool,
                  driver: bool = False) -> T:
        """Run ``work`` in a transaction; again, a bounded number of times, after a lock.

        The first attempt runs outside tenacity: the common case pays nothing for the
        retries it does not need.
        """
        try:
            return self._attempt(work, write, driver)
        except sa_exc.OperationalError as exc:
            if not _is_transient(exc):
                raise
            _log.debug("refstore transaction met a lock, retrying: %s", exc.orig)
        _sleep(random.uniform(0, 0.01))
        return _TRANSIENT_RETRY.copy()(self._attempt, work, write, driver)

    def _attempt(self, work: Callable[[Connection], T], write: bool,
                 driver: bool = False) -> T:
        if driver:
            return work(None)  # type: ignore[arg-type]
        if write and self._gate is not None:
            with self._gate.held(), self._engine.begin() as conn:
                if self._begin is not None:
                    self._begin(conn, write)
                return work(conn)
        with (self._engine if write else self._read_engine).begin() as conn:
            if self._begin is not None:
                self._begin(conn, write)
            return work(conn)

    def _insert(self, table: Table) -> Any:
        """An INSERT that supports ``on_conflict_do_*`` on the engine's dialect."""
        if self._engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            return pg_insert(table)
        return sqlite.insert(table)

    def _insert_new(self, table: Table, **values: Any) -> Any:
        """INSERT unless the key exists; the result's rowcount says which happened."""
        return (self._insert(table).values(**values).on_conflict_do_nothing()
                .execution_options(preserve_rowcount=True))

    @staticmethod
    def _require_repository(conn: Connection, repo_id: str, *,
                            lock: Literal["", "share", "update"] = "") -> None:
        """Raise RepositoryNotFoundError unless the repository exists.

        ``lock`` (PostgreSQL; SQLite serializes writers) holds the repository row until
        the transaction ends: ``share`` for writing rows that have no foreign key to it
        (commits, staged entries), so that a deletion, which takes ``update`` first,
        either waits for the write and deletes its rows too, or has removed the
        repository before the write looks.
        """
        if lock and conn.dialect.name == "postgresql":
            stmt = _REPOSITORY_LOCKED[lock]
        else:
            stmt = REPOSITORY_EXISTS
        if conn.execute(stmt, {"repo": repo_id}).first() is None:
            raise RepositoryNotFoundError(f"repository {repo_id!r} not found")

    @staticmethod
    def _require_writable(conn: Connection, repo_id: str) -> None:
        """Raise unless the repository exists and is not read-only; on PostgreSQL its
        row is held (shared) until the transaction ends, so a freeze waits for it."""
        stmt = select(repositories.c.read_only).where(repositories.c.id == repo_id)
        if conn.dialect.name == "postgresql":
            stmt = stmt.with_for_update(read=True)
        row = conn.execute(stmt).first()
        if row is None:
            raise RepositoryNotFoundError(f"repository {repo_id!r} not found")
        if row[0]:
            raise ReadOnlyRepositoryError(f"repository {repo_id!r} is read-only")

    # --- repositories -----------------------------------------------------------------
    def create_repository(self, repo: Repository, default_branch: Branch,
                          mirror: MirrorMarking | None = None,
                          initial_commit: tuple[str, Commit] | None = None) -> None:
        """Create a repository with its default branch (and a mirror's marking, so that
        a mirror repository is never seen unmarked, and its first commit, so that a
        failed creation leaves no record behind) in one transaction.

        Raises:
            RepositoryExistsError: a repository with this id exists.
            ValidationError: the branch is not the repository's default branch.
        """
        if default_branch.name != repo.default_branch:
            raise ValidationError(
                f"branch {default_branch.name!r} is not the default branch "
                f"{repo.default_branch!r} of repository {repo.id!r}")

        def work(conn: Connection) -> None:
            created = conn.execute(self._insert_new(
                repositories, id=repo.id, storage_namespace=repo.storage_namespace,
                default_branch=repo.default_branch, storage_id=repo.storage_id,
                read_only=repo.read_only, creation_date=repo.creation_date))
            if created.rowcount == 0:
                raise RepositoryExistsError(f"repository {repo.id!r} already exists")
            conn.execute(branches.insert().values(
                repo=repo.id, name=default_branch.name, **branch_values(default_branch)))
            if initial_commit is not None:
                conn.execute(self._commit_insert(repo.id, *initial_commit))
            if mirror is not None:
                conn.execute(mirror_markings.insert().values(
                    repo=repo.id, mirror_id=mirror.mirror_id,
                    source_region=mirror.source_region,
                    source_repository=mirror.source_repository, detached=mirror.detached))

        self._write(work)

    def get_repository(self, repo_id: str) -> Repository:
        """Raises RepositoryNotFoundError."""
        params = {"repo": repo_id}
        row = self._read(lambda conn: conn.execute(SELECT_REPOSITORY, params).first())
        if row is None:
            raise RepositoryNotFoundError(f"repository {repo_id!r} not found")
        return repository_of(row)

    def list_repositories(self, prefix: str = "", after: str = "",
                          amount: int = 1000) -> list[Repository]:
        """Repositories with id starting with ``prefix`` and greater than ``after``, sorted."""
        check_amount(amount)
        stmt = (select(*REPOSITORY_COLUMNS)
                .where(*key_range(repositories.c.id, prefix, after))
                .order_by(repositories.c.id).limit(amount))
        return [repository_of(r) for r in self._read(lambda conn: conn.execute(stmt).all())]

    def delete_repository(self, repo_id: str) -> None:
        """Delete a repository and all its rows in one transaction.

        Raises RepositoryNotFoundError.
        """

        def work(conn: Connection) -> None:
            # first the row lock: writers of rows without a foreign key wait on it
            self._require_repository(conn, repo_id, lock="update")
            for table in REPO_CHILDREN:
                conn.execute(table.delete().where(table.c.repo == repo_id))
            conn.execute(repositories.delete().where(repositories.c.id == repo_id))

        self._write(work)

    def update_repository(self, repo: Repository) -> None:
        """Replace the mutable fields (read_only, default_branch).

        Raises RepositoryNotFoundError.
        """
        stmt = (repositories.update().where(repositories.c.id == repo.id)
                .values(read_only=repo.read_only, default_branch=repo.default_branch))
        if self._write(lambda conn: conn.execute(stmt).rowcount) == 0:
            raise RepositoryNotFoundError(f"repository {repo.id!r} not found")

    def get_repository_metadata(self, repo_id: str) -> dict[str, str]:
        """The repository's metadata. Raises RepositoryNotFoundError."""

        def work(conn: Connection) -> dict[str, str]:
            self._require_repository(conn, repo_id)
            rows = conn.execute(
                select(repository_metadata.c.key, repository_metadata.c.value)
                .where(repository_metadata.c.repo == repo_id)
                .order_by(repository_metadata.c.key)).all()
            return {r.key: r.value for r in rows}

        return self._read(work)

    def set_repository_metadata(self, repo_id: str, metadata: Mapping[str, str]) -> None:
        """Merge ``metadata`` into the repository's metadata. Raises RepositoryNotFoundError."""

        def work(conn: Connection) -> None:
            self._require_repository(conn, repo_id)
            if metadata:
                self._upsert(conn, repository_metadata, [
                    {"repo": repo_id, "key": k, "value": v} for k, v in metadata.items()])

        self._write(work, repo_fk=repo_id)

    def delete_repository_metadata(self, repo_id: str, keys: list[str]) -> None:
        """Remove these keys (missing ones are ignored). Raises RepositoryNotFoundError."""

        def work(conn: Connection) -> None:
            self._require_repository(conn, repo_id)
            if keys:
                conn.execute(repository_metadata.delete().where(
                    repository_metadata.c.repo == repo_id,
                    repository_metadata.c.key.in_(keys)))

        self._write(work)

    def _upsert(self, conn: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
        """INSERT rows, replacing those whose primary key exists."""
        stmt = self._upsert_statement(table)
        conn.execute(stmt, rows[0] if len(rows) == 1 else rows)  # one row: no executemany

    def _upsert_statement(self, table: Table) -> Any:
        """:meth:`_upsert`'s statement, built once per table: the ``excluded`` alias is
        costly to build."""
        stmt = self._upserts.get(table.name)
        if stmt is None:
            insert = self._insert(table)
            keys = [c.name for c in table.primary_key.columns]
            stmt = insert.on_conflict_do_update(index_elements=keys, set_={
                c.name: insert.excluded[c.name] for c in table.c if c.name not in keys})
            self._upserts[table.name] = stmt
        return stmt

    # --- branch protection, hidden branches ---------------------------------------------
    def get_branch_protection_rules(self, repo_id: str) -> tuple[str, ...]:
        """The repository's protection patterns; empty when none (or no repository)."""
        params = {"repo": repo_id}
        raw = self._read(lambda conn: conn.execute(SELECT_PROTECTION, params).scalar())
        return tuple(json.loads(raw)) if raw else ()

    def set_branch_protection_rules(self, repo_id: str, patterns: Sequence[str]) -> None:
        """Replace the repository's protection patterns. Raises RepositoryNotFoundError."""
        row = {"repo": repo_id, "patterns": json.dumps(list(patterns))}
        self._write(lambda conn: self._upsert(conn, branch_protection, [row]), repo_fk=repo_id)

    def is_branch_hidden(self, repo_id: str, name: str) -> bool:
        params = {"repo": repo_id, "name": name}
        return self._read(lambda conn: conn.execute(SELECT_HIDDEN, params).first()) is not None

    def set_branch_hidden(self, repo_id: str, name: str, hidden: bool) -> None:
        """Mark a branch hidden, or not. Raises RepositoryNotFoundError."""
        if hidden:
            stmt = self._insert_new(hidden_branches, repo=repo_id, name=name)
        else:
            stmt = hidden_branches.delete().where(hidden_branches.c.repo == repo_id,
                                                  hidden_branches.c.name == name)
        self._write(lambda conn: conn.execute(stmt), repo_fk=repo_id)

    # --- ephemeral branches -------------------------------------------------------------
    def get_branch_expiry(self, repo_id: str, name: str) -> int | None:
        stmt = select(branch_expiries.c.expires_at).where(
            branch_expiries.c.repo == repo_id, branch_expiries.c.name == name)
        value = self._read(lambda conn: conn.execute(stmt).scalar())
        return None if value is None else int(value)

    def set_branch_expiry(self, repo_id: str, name: str, expires_at: int | None) -> None:
        """Set or clear a branch's expiry. Raises RepositoryNotFoundError."""
        if expires_at is None:
            clear = branch_expiries.delete().where(branch_expiries.c.repo == repo_id,
                                                   branch_expiries.c.name == name)
            self._write(lambda conn: conn.execute(clear), repo_fk=repo_id)
            return
        row = {"repo": repo_id, "name": name, "expires_at": int(expires_at)}
        self._write(lambda conn: self._upsert(conn, branch_expiries, [row]), repo_fk=repo_id)

    def list_expired_branches(self, now: int, amount: int = 1000) -> list[tuple[str, str]]:
        check_amount(amount)
        stmt = (select(branch_expiries.c.repo, branch_expiries.c.name)
                .join(branches, (branches.c.repo == branch_expiries.c.repo)
                      & (branches.c.name == branch_expiries.c.name))
                .join(repositories, repositories.c.id == branch_expiries.c.repo)
                .where(branch_expiries.c.expires_at <= now,
                       repositories.c.read_only.is_(False),
                       repositories.c.default_branch != branch_expiries.c.name)
                .order_by(branch_expiries.c.expires_at, branch_expiries.c.repo,
                          branch_expiries.c.name)
                .limit(amount))
        rows = self._read(lambda conn: conn.execute(stmt).all())
        return [(str(repo), str(name)) for repo, name in rows]

    # --- mirrors ------------------------------------------------------------------------
    def get_mirror_marking(self, repo_id: str) -> MirrorMarking | None:
        """The repository's mirror marking; None for other repositories (or none)."""
        params = {"repo": repo_id}
        row = self._read(lambda conn: conn.execute(SELECT_MARKING, params).first())
        return None if row is None else marking_of(row)

    def set_mirror_marking(self, repo_id: str, marking: MirrorMarking) -> None:
        """Set (or replace) the repository's mirror marking. Raises RepositoryNotFoundError."""
        row = {"repo": repo_id, "mirror_id": marking.mirror_id,
               "source_region": marking.source_region,
               "source_repository": marking.source_repository, "detached": marking.detached}
        self._write(lambda conn: self._upsert(conn, mirror_markings, [row]), repo_fk=repo_id)

    def mark_commit_present(self, repo_id: str, commit_id: str) -> None:
        """Record a commit as proven present (idempotent). Raises RepositoryNotFoundError."""
        stmt = self._insert_new(present_commits, repo=repo_id, commit_id=commit_id)
        self._write(lambda conn: conn.execute(stmt), repo_fk=repo_id)

    def is_commit_present(self, repo_id: str, commit_id: str) -> bool:
        params = {"repo": repo_id, "commit_id": commit_id}
        return self._read(lambda conn: conn.execute(SELECT_PRESENT, params).first()) is not None

    # --- branches ---------------------------------------------------------------------
    def create_branch(self, repo_id: str, branch: Branch) -> None:
        """Raises BranchExistsError, RepositoryNotFoundError."""
        stmt = self._insert_new(branches, repo=repo_id, name=branch.name,
                                **branch_values(branch))
        if self._write(lambda conn: conn.execute(stmt).rowcount, repo_fk=repo_id) == 0:
            raise BranchExistsError("branch already exists: not unique")  # lakeFS's text

    def get_branch(self, repo_id: str, name: str) -> Branch:
        """Raises BranchNotFoundError."""
        params = {"repo": repo_id, "name": name}
        row = self._read(lambda conn: conn.execute(SELECT_BRANCH, params).first())
        if row is None:
            raise BranchNotFoundError(f"branch {name!r} not found")
        return branch_of(row)

    def list_branches(self, repo_id: str, prefix: str = "", after: str = "",
                      amount: int = 1000) -> list[Branch]:
        """Branches named with ``prefix``, after ``after``, sorted (empty if no repository)."""
        check_amount(amount)
        stmt = (select(*BRANCH_COLUMNS)
                .where(branches.c.repo == repo_id, *key_range(branches.c.name, prefix, after))
                .order_by(branches.c.name).limit(amount))
        return [branch_of(r) for r in self._read(lambda conn: conn.execute(stmt).all())]

    def delete_branch(self, repo_id: str, name: str) -> None:
        """Delete a branch (and its hidden mark and expiry). Raises BranchNotFoundError."""
        stmt = branches.delete().where(branches.c.repo == repo_id, branches.c.name == name)
        unhide = hidden_branches.delete().where(hidden_branches.c.repo == repo_id,
                                                hidden_branches.c.name == name)
        unexpire = branch_expiries.delete().where(branch_expiries.c.repo == repo_id,
                                                  branch_expiries.c.name == name)

        def work(conn: Connection) -> None:
            if conn.execute(stmt).rowcount == 0:
                raise BranchNotFoundError(f"branch {name!r} not found")
            conn.execute(unhide)
            conn.execute(unexpire)

        self._write(work)

    def update_branch(self, repo_id: str, expected: Branch, new: Branch, *,
                      writable: bool = False) -> None:
        """Compare-and-swap on (commit_id, staging_token, sealed_tokens); with
        ``writable``, in the transaction that reads the repository's read-only flag (on
        PostgreSQL holding its row, which a freeze updates, until the swap commits).

        Raises:
            BranchNotFoundError: the branch is gone.
            BranchChangedError: the branch moved since ``expected`` was read.
            ReadOnlyRepositoryError: ``writable`` and the repository is read-only.
            ValidationError: ``new`` names another branch.
        """
        if new.name != expected.name:
            raise ValidationError(f"cannot rename branch {expected.name!r} to {new.name!r}")
        where = (branches.c.repo == repo_id, branches.c.name == expected.name)
        stmt = branches.update().where(
            *where,
            branches.c.commit_id == expected.commit_id,
            branches.c.staging_token == expected.staging_token,
            branches.c.sealed_tokens == dump_tokens(expected.sealed_tokens),
        ).values(**branch_values(new))

        def work(conn: Connection) -> None:
            if writable:
                self._require_writable(conn, repo_id)
            if conn.execute(stmt).rowcount == 1:
                return
            if conn.execute(select(branches.c.name).where(*where)).first() is None:
                raise BranchNotFoundError(f"branch {expected.name!r} not found")
            raise BranchChangedError(f"branch {expected.name!r} changed concurrently")

        self._write(work)

    def get_branches(self, refs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Branch]:
        """Several repositories' branches in one statement (one snapshot on every
        database: a statement never sees a transaction half-committed)."""
        check_branch_refs(refs)
        pairs = sorted(set(refs))
        if not pairs:
            return {}
        stmt = select(branches.c.repo, *BRANCH_COLUMNS).where(
            or_(*(and_(branches.c.repo == repo, branches.c.name == name)
                  for repo, name in pairs)))
        rows = self._read(lambda conn: conn.execute(stmt).all())
        return {(row[0], row[1]): branch_of(row[1:]) for row in rows}

    def update_branches(self, updates: Sequence[BranchUpdate]) -> None:
        """Every compare-and-swap in one transaction; the first that fails rolls all back."""
        check_branch_updates(updates)

        def work(conn: Connection) -> None:
            for u in updates:
                if u.expected is None:
                    self._require_repository(conn, u.repo_id, lock="share")
                    created = conn.execute(self._insert_new(
                        branches, repo=u.repo_id, name=u.new.name,
                        **branch_values(u.new))).rowcount
                    if not created:
                        raise BranchChangedError(f"branch {u.new.name!r} of {u.repo_id!r} "
                                                 "appeared meanwhile")
                    continue
                e = u.expected
                moved = conn.execute(branches.update().where(
                    branches.c.repo == u.repo_id, branches.c.name == e.name,
                    branches.c.commit_id == e.commit_id,
                    branches.c.staging_token == e.staging_token,
                    branches.c.sealed_tokens == dump_tokens(e.sealed_tokens),
                ).values(**branch_values(u.new))).rowcount
                if moved != 1:
                    raise BranchChangedError(f"branch {e.name!r} of {u.repo_id!r} changed "
                                             "concurrently")

        if updates:
            self._write(work)

    # --- a dump's refs -----------------------------------------------------------------
    def restore_refs(self, repo_id: str, commits: Sequence[CommitRecord],
                     branches: Sequence[tuple[Branch, bool]], tags: Sequence[Tag], *,
                     present: bool = False) -> None:
        commit_stmts = [self._commit_insert(repo_id, r.id, r.commit) for r in commits]

        def work(conn: Connection) -> None:
            self._require_repository(conn, repo_id, lock="update")
            if (conn.execute(select(commits_table.c.commit_id)
                             .where(commits_table.c.repo == repo_id).limit(1)).first()
                    or conn.execute(select(tags_table.c.name)
                                    .where(tags_table.c.repo == repo_id).limit(1)).first()
                    or conn.execute(select(branches_table.c.name).where(
                        branches_table.c.repo == repo_id,
                        branches_table.c.commit_id != "").limit(1)).first()):
                raise NonEmptyRepositoryError("can only restore into a bare repository")
            for stmt in commit_stmts:
                conn.execute(stmt)
            if present:
                for rec in commits:
                    conn.execute(self._insert_new(present_commits, repo=repo_id,
                                                  commit_id=rec.id))
            for branch, hidden in branches:
                inserted = conn.execute(self._insert_new(
                    branches_table, repo=repo_id, name=branch.name,
                    **branch_values(branch))).rowcount
                if not inserted and not conn.execute(
                        branches_table.update().where(
                            branches_table.c.repo == repo_id,
                            branches_table.c.name == branch.name,
                            branches_table.c.commit_id == "")
                        .values(commit_id=branch.commit_id)
                        .execution_options(preserve_rowcount=True)).rowcount:
                    raise BranchExistsError("branch already exists: not unique")
                if hidden:
                    conn.execute(self._insert_new(hidden_branches, repo=repo_id,
                                                  name=branch.name))
            for tag in tags:
                if not conn.execute(self._insert_new(
                        tags_table, repo=repo_id, name=tag.name,
                        commit_id=tag.commit_id)).rowcount:
                    raise TagExistsError("tag already exists: not unique")

        self._write(work, repo_fk=repo_id)

    # --- tags -------------------------------------------------------------------------
    def create_tag(self, repo_id: str, tag: Tag) -> None:
        """Raises TagExistsError, RepositoryNotFoundError."""
        stmt = self._insert_new(tags, repo=repo_id, name=tag.name, commit_id=tag.commit_id)
        if self._write(lambda conn: conn.execute(stmt).rowcount, repo_fk=repo_id) == 0:
            raise TagExistsError("tag already exists: not unique")  # lakeFS's text

    def get_tag(self, repo_id: str, name: str) -> Tag:
        """Raises TagNotFoundError."""
        commit_id = self._read(lambda conn: conn.execute(
            select(tags.c.commit_id).where(tags.c.repo == repo_id, tags.c.name == name)
        ).scalar_one_or_none())
        if commit_id is None:
            raise TagNotFoundError(f"tag {name!r} not found")
        return Tag(name=name, commit_id=commit_id)

    def list_tags(self, repo_id: str, prefix: str = "", after: str = "",
                  amount: int = 1000) -> list[Tag]:
        """Tags named with ``prefix``, after ``after``, sorted (empty if no repository)."""
        check_amount(amount)
        stmt = (select(tags.c.name, tags.c.commit_id)
                .where(tags.c.repo == repo_id, *key_range(tags.c.name, prefix, after))
                .order_by(tags.c.name).limit(amount))
        rows = self._read(lambda conn: conn.execute(stmt).all())
        return [Tag(name=r.name, commit_id=r.commit_id) for r in rows]

    def delete_tag(self, repo_id: str, name: str) -> None:
        """Raises TagNotFoundError."""
        stmt = tags.delete().where(tags.c.repo == repo_id, tags.c.name == name)
        if self._write(lambda conn: conn.execute(stmt).rowcount) == 0:
            raise TagNotFoundError(f"tag {name!r} not found")

    # --- commits ----------------------------------------------------------------------
    def _commit_insert(self, repo_id: str, commit_id: str, commit: Commit) -> Any:
        return self._insert_new(
            commits, repo=repo_id, commit_id=commit_id, parents=json.dumps(list(commit.parents)),
            metarange_id=commit.metarange_id, message=commit.message,
            committer=commit.committer, creation_date=commit.creation_date,
            metadata=dump_map(commit.metadata), generation=commit.generation)

    def put_commit(self, repo_id: str, commit_id: str, commit: Commit) -> None:
        """Store a commit record; a record already stored under this id is kept.

        Raises RepositoryNotFoundError.
        """
        stmt = self._commit_insert(repo_id, commit_id, commit)

        def work(conn: Connection) -> None:
            self._require_repository(conn, repo_id, lock="share")
            conn.execute(stmt)

        self._write(work)

    def get_commit(self, repo_id: str, commit_id: str) -> Commit:
        """Raises CommitNotFoundError."""
        row = self._read(lambda conn: conn.execute(select(commits).where(
            commits.c.repo == repo_id, commits.c.commit_id == commit_id)).first())
        if row is None:
            raise CommitNotFoundError(f"commit {commit_id!r} not found")
        return _commit_of(row)

    def list_commits(self, repo_id: str, after: str = "",
                     amount: int = 1000) -> list[CommitRecord]:
        """Commit records with id > ``after``, sorted by id."""
        check_amount(amount)
        stmt = (select(commits)
                .where(commits.c.repo == repo_id, *key_range(commits.c.commit_id, "", after))
                .order_by(commits.c.commit_id).limit(amount))
        rows = self._read(lambda conn: fetch_all(conn, stmt))
        return [CommitRecord(row.commit_id, _commit_of(row)) for row in rows]

    def find_commit_ids(self, repo_id: str, prefix: str, limit: int = 2) -> list[str]:
        """Up to ``limit`` commit ids starting with ``prefix``, sorted."""
        check_amount(limit)
        stmt = (select(commits.c.commit_id)
                .where(commits.c.repo == repo_id, *key_range(commits.c.commit_id, prefix, ""))
                .order_by(commits.c.commit_id).limit(limit))
        return list(self._read(lambda conn: conn.execute(stmt).scalars().all()))
