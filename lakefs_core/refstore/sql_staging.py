"""The refstore's staged records on SQLAlchemy Core, and the reads and writes of an
object request: an upload's write target and staged record, a stat's or read's
repository, branch and staged record.

A mixin of :class:`~lakefs_core.refstore.sql.SQLRefStore`, which provides the
transactions (``_read``, ``_write``, ``_run``, and on a SQLite file the driver's own
connections behind ``_read_row``, ``_read_rows`` and ``_writers``) and the statement
helpers these methods use.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from sqlalchemy import ColumnElement, Connection, Table, select

from lakefs_core.database import First, ThreadConnections, sqlite_text
from lakefs_core.errors import BranchNotFoundError, RepositoryNotFoundError
from lakefs_core.graveler.model import Branch, EntryRecord, Repository
from lakefs_core.refstore.rows import (
    BRANCH_COLUMNS,
    ENTRY_COLUMNS,
    REPOSITORY_COLUMNS,
    REPOSITORY_EXISTS,
    SELECT_BRANCH,
    SELECT_BRANCH_SHARED,
    SELECT_BRANCH_STAGED,
    SELECT_REPOSITORY,
    SELECT_REPOSITORY_BRANCH_STAGED,
    SELECT_STAGED,
    SELECT_WRITE_TARGET,
    branch_of,
    entry_record_of,
    entry_values,
    fetch_all,
    key_range,
    repository_of,
)
from lakefs_core.refstore.schema import staged_entries

T = TypeVar("T")


def _branch_and_staged(first: First, repo_id: str, branch_name: str,
                       path: str) -> tuple[Branch, EntryRecord | None] | None:
    """:meth:`SQLRefStore.get_branch_and_staged`, its statements run by ``first``."""
    row = first(SELECT_BRANCH_STAGED, {"repo": repo_id, "name": branch_name, "path": path})
    if row is None:
        return None
    width = len(BRANCH_COLUMNS)
    branch = branch_of(row[:width])
    if row[width] is not None:  # the path of a record staged under the live token
        return branch, entry_record_of(row[width:])
    for token in branch.sealed_tokens:
        sealed = first(SELECT_STAGED, {"repo": repo_id, "token": token, "path": path})
        if sealed is not None:
            return branch, entry_record_of(sealed)
    return branch, None


class StagedRecords:
    """Staged records, and the reads and writes of an object request."""

    if TYPE_CHECKING:  # provided by SQLRefStore
        _page_size: int
        _writers: ThreadConnections | None

        def _read(self, work: Callable[[Connection], T]) -> T: ...

        def _write(self, work: Callable[[Connection], T], *,
                   repo_fk: str | None = None) -> T: ...

        def _run(self, work: Callable[[Connection], T], *, write: bool,
                 repo_fk: str | None = None, driver: bool = False) -> T: ...

        def _read_row(self, statement: Any, params: Any) -> Any: ...

        def _read_rows(self, work: Callable[[First], T]) -> T: ...

        def _upsert(self, conn: Connection, table: Table,
                    rows: list[dict[str, Any]]) -> None: ...

        def _upsert_statement(self, table: Table) -> Any: ...

        @staticmethod
        def _require_repository(conn: Connection, repo_id: str, *,
                                lock: Literal["", "share", "update"] = "") -> None: ...

    # --- the reads of an object request ---------------------------------------------------
    def get_write_target(
        self, repo_id: str, branch_name: str
    ) -> tuple[Repository, tuple[str, ...], Branch | None]:
        """The repository, its protection patterns and one of its branches, in one query.

        Raises RepositoryNotFoundError.
        """
        params = {"repo": repo_id, "name": branch_name}
        row = self._read_row(SELECT_WRITE_TARGET, params)
        if row is None:
            raise RepositoryNotFoundError(f"repository {repo_id!r} not found")
        width = len(REPOSITORY_COLUMNS)
        patterns, branch = row[width], row[width + 1:]
        rules = tuple(json.loads(patterns)) if patterns else ()
        # a missing branch reads as NULL columns, its name (a key) among them
        return repository_of(row[:width]), rules, None if branch[0] is None else branch_of(branch)

    def get_branch_and_staged(
        self, repo_id: str, branch_name: str, path: str
    ) -> tuple[Branch, EntryRecord | None] | None:
        """The branch and the record staged at ``path`` on it, on one connection.

        The branch row comes with the live token's record in one query; the sealed
        tokens (a commit in progress) are looked up only if the live token has none.
        """

        return self._read_rows(lambda first: _branch_and_staged(first, repo_id, branch_name,
                                                                path))

    def get_repository_and_staged(
        self, repo_id: str, branch_name: str, path: str
    ) -> tuple[Repository, tuple[Branch, EntryRecord | None] | None]:
        """See :meth:`RefStore.get_repository_and_staged`: one statement, unless the
        branch has sealed tokens (a commit in progress), then one transaction."""
        row = self._read_row(SELECT_REPOSITORY_BRANCH_STAGED,
                             {"repo": repo_id, "name": branch_name, "path": path})
        if row is None:
            raise RepositoryNotFoundError(f"repository {repo_id!r} not found")
        repo_width = len(REPOSITORY_COLUMNS)
        entry_at = repo_width + len(BRANCH_COLUMNS)
        repo = repository_of(row[:repo_width])
        if row[repo_width] is None:  # no such branch (its name is a key)
            return repo, None
        branch = branch_of(row[repo_width:entry_at])
        if row[entry_at] is not None:
            return repo, (branch, entry_record_of(row[entry_at:]))
        if not branch.sealed_tokens:
            return repo, (branch, None)

        def work(first: First) -> tuple[Repository, tuple[Branch, EntryRecord | None] | None]:
            row = first(SELECT_REPOSITORY, {"repo": repo_id})
            if row is None:
                raise RepositoryNotFoundError(f"repository {repo_id!r} not found")
            return repository_of(row), _branch_and_staged(first, repo_id, branch_name, path)

        return self._read_rows(work)

    # --- staged records -----------------------------------------------------------------
    def _staged_key(self, repo_id: str, token: str) -> tuple[ColumnElement[bool], ...]:
        return staged_entries.c.repo == repo_id, staged_entries.c.staging_token == token

    def put_staged(self, repo_id: str, token: str, record: EntryRecord) -> None:
        """Stage an entry (or a tombstone, ``record.entry is None``), replacing any."""
        row = {"repo": repo_id, "staging_token": token, "path": record.path,
               **entry_values(record)}

        def work(conn: Connection) -> None:
            self._require_repository(conn, repo_id, lock="share")
            self._upsert(conn, staged_entries, [row])

        self._write(work)

    def stage_on_branch(self, repo_id: str, branch_name: str, token: str,
                        record: EntryRecord) -> Branch:
        """See :meth:`RefStore.stage_on_branch`: one transaction. The branch row is read
        after the record is written, under a share lock on PostgreSQL (SQLite runs one
        writer at a time): a commit sealing ``token`` either moved the branch before
        this read, or waits for this transaction and then sees the record. Without the
        branch nothing is written."""
        row = {"repo": repo_id, "staging_token": token, "path": record.path,
               **entry_values(record)}
        params = {"repo": repo_id, "name": branch_name}

        def work(conn: Connection) -> Branch:
            self._require_repository(conn, repo_id, lock="share")
            self._upsert(conn, staged_entries, [row])
            found = conn.execute(SELECT_BRANCH_SHARED if conn.dialect.name == "postgresql"
                                 else SELECT_BRANCH, params).first()
            if found is None:  # raised inside the transaction: the record is rolled back
                raise BranchNotFoundError(f"branch {branch_name!r} not found")
            return branch_of(found)

        writers = self._writers
        if writers is None:
            return self._write(work)
        # on the thread's own driver connection, one writer at a time
        upsert = sqlite_text(self._upsert_statement(staged_entries), tuple(row))
        select_branch = sqlite_text(SELECT_BRANCH)

        def on_driver(conn: sqlite3.Connection) -> Branch:
            conn.execute(upsert, row)
            found = conn.execute(select_branch, params).fetchone()
            if found is not None:  # and so the repository: branches go with it
                return branch_of(found)
            # raised inside the transaction: the record is rolled back
            if conn.execute(sqlite_text(REPOSITORY_EXISTS), {"repo": repo_id}
                            ).fetchone() is None:
                raise RepositoryNotFoundError(f"repository {repo_id!r} not found")
            raise BranchNotFoundError(f"branch {branch_name!r} not found")

        return self._run(lambda _: writers.write(on_driver), write=True, driver=True)

    def get_staged(self, repo_id: str, token: str, path: str) -> EntryRecord | None:
        """The staged record at ``path`` (maybe a tombstone), or None if nothing staged."""
        params = {"repo": repo_id, "token": token, "path": path}
        row = self._read(lambda conn: conn.execute(SELECT_STAGED, params).first())
        return None if row is None else entry_record_of(row)

    def list_staged(self, repo_id: str, token: str, prefix: str = "",
                    after: str = "") -> Iterator[EntryRecord]:
        """Stream staged records (tombstones included) with path > ``after``, sorted by path.

        Pages through the rows by key, one short query per ``page_size`` rows; no
        connection is held between pages.
        """
        key = self._staged_key(repo_id, token)
        while True:
            stmt = (select(*ENTRY_COLUMNS)
                    .where(*key, *key_range(staged_entries.c.path, prefix, after))
                    .order_by(staged_entries.c.path).limit(self._page_size))
            rows = self._read(partial(fetch_all, stmt=stmt))
            for row in rows:
                yield entry_record_of(row)
            if len(rows) < self._page_size:
                return
            after = rows[-1].path

    def delete_staged(self, repo_id: str, token: str, path: str) -> None:
        """Remove a staged record (nothing happens if none is staged at ``path``)."""
        stmt = staged_entries.delete().where(
            *self._staged_key(repo_id, token), staged_entries.c.path == path)
        self._write(lambda conn: conn.execute(stmt))

    def drop_staging(self, repo_id: str, token: str) -> None:
        """Drop every record staged under ``token``."""
        stmt = staged_entries.delete().where(*self._staged_key(repo_id, token))
        self._write(lambda conn: conn.execute(stmt))

    def has_staged(self, repo_id: str, token: str) -> bool:
        """Whether anything (entry or tombstone) is staged under ``token``."""
        stmt = select(staged_entries.c.path).where(*self._staged_key(repo_id, token)).limit(1)
        return self._read(lambda conn: conn.execute(stmt).first()) is not None
