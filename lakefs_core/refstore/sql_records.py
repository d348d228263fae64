"""The refstore's records of repository operations on SQLAlchemy Core: garbage
collection rules, refs dump and restore tasks, zero-copy imports, pull requests, action
runs and the physical addresses handed out for linking.

A mixin of :class:`~lakefs_core.refstore.sql.SQLRefStore`, which provides the
transactions (``_read``, ``_write``) and the statement helpers these methods use.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from sqlalchemy import ColumnElement, Connection, Row, Table, select

from lakefs_core.errors import (
    ActionRunNotFoundError,
    AlreadyExistsError,
    ConflictError,
    ImportNotFoundError,
    PullRequestChangedError,
    PullRequestNotFoundError,
)
from lakefs_core.graveler.model import (
    ActionRun,
    GarbageCollectionRules,
    HookRun,
    ImportState,
    PullRequest,
    PullRequestStatus,
    RefsDump,
    RepositoryTask,
    TaskKind,
)
from lakefs_core.refstore.rows import (
    PULL_REQUEST_COLUMNS,
    check_amount,
    fetch_all,
    key_range,
    pull_request_of,
    pull_request_values,
)
from lakefs_core.refstore.schema import (
    action_runs,
    gc_branch_rules,
    gc_rules,
    hook_runs,
    imports,
    link_addresses,
    pull_requests,
    repository_tasks,
)

T = TypeVar("T")


class RepositoryRecords:
    """Garbage collection rules, dump/restore tasks, imports, pull requests, action runs
    and link addresses."""

    if TYPE_CHECKING:  # provided by SQLRefStore
        def _read(self, work: Callable[[Connection], T]) -> T: ...

        def _write(self, work: Callable[[Connection], T], *,
                   repo_fk: str | None = None) -> T: ...

        def _insert_new(self, table: Table, **values: Any) -> Any: ...

        def _upsert(self, conn: Connection, table: Table,
                    rows: list[dict[str, Any]]) -> None: ...

        @staticmethod
        def _require_repository(conn: Connection, repo_id: str, *,
                                lock: Literal["", "share", "update"] = "") -> None: ...

    # --- garbage collection rules ---------------------------------------------------------
    def get_gc_rules(self, repo_id: str) -> GarbageCollectionRules | None:
        """The repository's garbage collection rules; None when none are set."""
        def work(conn: Connection) -> GarbageCollectionRules | None:
            default = conn.execute(select(gc_rules.c.default_retention_days).where(
                gc_rules.c.repo == repo_id)).scalar()
            if default is None:
                return None
            branch_rows = conn.execute(
                select(gc_branch_rules.c.branch, gc_branch_rules.c.retention_days)
                .where(gc_branch_rules.c.repo == repo_id).order_by(gc_branch_rules.c.branch))
            return GarbageCollectionRules(default, {b: d for b, d in branch_rows})

        return self._read(work)

    def set_gc_rules(self, repo_id: str, rules: GarbageCollectionRules | None) -> None:
        """Replace the repository's rules (None removes them), in one transaction."""
        def work(conn: Connection) -> None:
            self._require_repository(conn, repo_id)
            conn.execute(gc_branch_rules.delete().where(gc_branch_rules.c.repo == repo_id))
            conn.execute(gc_rules.delete().where(gc_rules.c.repo == repo_id))
            if rules is None:
                return
            conn.execute(gc_rules.insert().values(
                repo=repo_id, default_retention_days=rules.default_retention_days))
            if rules.branch_retention_days:
                conn.execute(gc_branch_rules.insert(), [
                    {"repo": repo_id, "branch": b, "retention_days": d}
                    for b, d in rules.branch_retention_days.items()])

        self._write(work, repo_fk=repo_id)

    # --- dump and restore tasks ------------------------------------------------------------
    def put_task(self, repo_id: str, task: RepositoryTask) -> None:
        """Record a task's progress. Raises RepositoryNotFoundError."""
        refs = task.refs
        row = {"repo": repo_id, "id": task.id, "kind": str(task.kind), "done": task.done,
               "update_time": task.update_time, "error": task.error,
               "commits_metarange_id": refs.commits_metarange_id if refs else None,
               "tags_metarange_id": refs.tags_metarange_id if refs else None,
               "branches_metarange_id": refs.branches_metarange_id if refs else None}
        self._write(lambda conn: self._upsert(conn, repository_tasks, [row]), repo_fk=repo_id)

    def get_task(self, repo_id: str, task_id: str) -> RepositoryTask | None:
        row = self._read(lambda conn: conn.execute(select(repository_tasks).where(
            repository_tasks.c.repo == repo_id, repository_tasks.c.id == task_id)).first())
        if row is None:
            return None
        refs = None
        if row.commits_metarange_id is not None:
            refs = RefsDump(row.commits_metarange_id, row.tags_metarange_id,
                            row.branches_metarange_id)
        return RepositoryTask(id=row.id, kind=TaskKind(row.kind), done=row.done,
                              update_time=row.update_time, error=row.error, refs=refs)

    # --- link addresses ---------------------------------------------------------------
    def put_link_address(self, repo_id: str, address: str, *, expires_at: float,
                         now: float) -> None:
        def work(conn: Connection) -> None:
            conn.execute(link_addresses.delete().where(
                link_addresses.c.repo == repo_id, link_addresses.c.expires_at < now))
            self._upsert(conn, link_addresses,
                         [{"repo": repo_id, "address": address, "expires_at": expires_at}])

        self._write(work, repo_fk=repo_id)

    def get_link_address(self, repo_id: str, address: str) -> float | None:
        expires_at = self._read(lambda conn: conn.execute(
            select(link_addresses.c.expires_at).where(
                link_addresses.c.repo == repo_id,
                link_addresses.c.address == address)).scalar())
        return None if expires_at is None else float(expires_at)

    def take_link_address(self, repo_id: str, address: str) -> float | None:
        key = (link_addresses.c.repo == repo_id, link_addresses.c.address == address)

        def work(conn: Connection) -> float | None:
            expires_at = conn.execute(select(link_addresses.c.expires_at).where(*key)).scalar()
            if expires_at is None:
                return None
            taken = conn.execute(link_addresses.delete().where(*key)
                                 .execution_options(preserve_rowcount=True)).rowcount
            return float(expires_at) if taken else None

        return self._write(work)

    # --- imports ----------------------------------------------------------------------
    def create_import(self, repo_id: str, state: ImportState) -> None:
        row = {"repo": repo_id, **_import_row(state)}
        self._write(lambda conn: conn.execute(imports.insert().values(**row)), repo_fk=repo_id)

    def _import_key(self, repo_id: str, import_id: str) -> tuple[ColumnElement[bool], ...]:
        return imports.c.repo == repo_id, imports.c.id == import_id

    def get_import(self, repo_id: str, import_id: str) -> ImportState:
        stmt = select(imports).where(*self._import_key(repo_id, import_id))
        row = self._read(lambda conn: conn.execute(stmt).first())
        if row is None:
            raise ImportNotFoundError()
        return _import_state(row)

    def update_import(self, repo_id: str, state: ImportState) -> bool:
        values = _import_row(state)
        del values["id"]
        stmt = (imports.update()
                .where(*self._import_key(repo_id, state.id), imports.c.completed.is_(False),
                       imports.c.error == "")
                .values(**values).execution_options(preserve_rowcount=True))
        return bool(self._write(lambda conn: conn.execute(stmt).rowcount))

    def cancel_import(self, repo_id: str, import_id: str, error: str) -> None:
        def work(conn: Connection) -> None:
            row = conn.execute(select(imports).where(
                *self._import_key(repo_id, import_id))).first()
            if row is None:
                raise ImportNotFoundError()
            state = _import_state(row)
            if state.completed:
                raise ConflictError("cannot cancel: the import is completed")
            if state.error:
                raise ConflictError(f"cannot cancel: the import ended: {state.error}")
            if state.committing:
                raise ConflictError("cannot cancel: the import is committing")
            done = conn.execute(
                imports.update()
                .where(*self._import_key(repo_id, import_id), imports.c.completed.is_(False),
                       imports.c.committing.is_(False), imports.c.error == "")
                .values(error=error, updated_at=time.time())
                .execution_options(preserve_rowcount=True)).rowcount
            if not done:
                raise ConflictError("cannot cancel import: it changed meanwhile")

        self._write(work)

    # --- pull requests --------------------------------------------------------------
    def create_pull_request(self, repo_id: str, pr: PullRequest) -> None:
        """Raises RepositoryNotFoundError; AlreadyExistsError if the id is taken."""
        stmt = self._insert_new(pull_requests, repo=repo_id, id=pr.id,
                                **pull_request_values(pr))
        if self._write(lambda conn: conn.execute(stmt).rowcount, repo_fk=repo_id) == 0:
            raise AlreadyExistsError(f"pull request {pr.id!r} already exists")

    def get_pull_request(self, repo_id: str, pr_id: str) -> PullRequest:
        """Raises PullRequestNotFoundError."""
        row = self._read(lambda conn: conn.execute(select(*PULL_REQUEST_COLUMNS).where(
            pull_requests.c.repo == repo_id, pull_requests.c.id == pr_id)).first())
        if row is None:
            raise PullRequestNotFoundError(f"pull request {pr_id!r} not found")
        return pull_request_of(row)

    def list_pull_requests(self, repo_id: str, *, prefix: str = "", after: str = "",
                           amount: int = 1000,
                           statuses: frozenset[PullRequestStatus] | None = None
                           ) -> list[PullRequest]:
        """Pull requests by id (only those of ``statuses`` when given)."""
        check_amount(amount)
        where = [pull_requests.c.repo == repo_id,
                 *key_range(pull_requests.c.id, prefix, after)]
        if statuses is not None:
            where.append(pull_requests.c.status.in_(sorted(s.value for s in statuses)))
        stmt = (select(*PULL_REQUEST_COLUMNS).where(*where).order_by(pull_requests.c.id)
                .limit(amount))
        return [pull_request_of(r) for r in self._read(lambda conn: fetch_all(conn, stmt))]

    def update_pull_request(self, repo_id: str, expected: PullRequest,
                            new: PullRequest) -> None:
        """Replace a pull request if its status is still ``expected``'s."""
        key = (pull_requests.c.repo == repo_id, pull_requests.c.id == expected.id)
        stmt = (pull_requests.update()
                .where(*key, pull_requests.c.status == expected.status.value)
                .values(**pull_request_values(new))
                .execution_options(preserve_rowcount=True))

        def work(conn: Connection) -> None:
            if conn.execute(stmt).rowcount == 1:
                return
            if conn.execute(select(pull_requests.c.id).where(*key)).first() is None:
                raise PullRequestNotFoundError(f"pull request {expected.id!r} not found")
            raise PullRequestChangedError(f"pull request {expected.id!r} changed concurrently")

        self._write(work)

    # --- action runs ----------------------------------------------------------------
    def put_action_run(self, repo_id: str, run: ActionRun, hooks: Sequence[HookRun]) -> None:
        """Record a finished run and its hooks' runs, in one transaction."""
        def work(conn: Connection) -> None:
            conn.execute(action_runs.insert().values(
                repo=repo_id, run_id=run.run_id, event_type=run.event_type,
                branch=run.branch, source_ref=run.source_ref, commit_id=run.commit_id,
                start_time=run.start_time, end_time=run.end_time, status=run.status))
            if hooks:
                conn.execute(hook_runs.insert(), [
                    {"repo": repo_id, "run_id": run.run_id, "hook_run_id": h.hook_run_id,
                     "action": h.action, "hook_id": h.hook_id, "start_time": h.start_time,
                     "end_time": h.end_time, "status": h.status, "output": h.output}
                    for h in hooks])

        self._write(work, repo_fk=repo_id)

    def set_action_run_commit(self, repo_id: str, run_id: str, commit_id: str) -> None:
        stmt = (action_runs.update()
                .where(action_runs.c.repo == repo_id, action_runs.c.run_id == run_id)
                .values(commit_id=commit_id))
        self._write(lambda conn: conn.execute(stmt))

    def get_action_run(self, repo_id: str, run_id: str) -> ActionRun:
        row = self._read(lambda conn: conn.execute(select(action_runs).where(
            action_runs.c.repo == repo_id, action_runs.c.run_id == run_id)).first())
        if row is None:
            raise ActionRunNotFoundError(f"run {run_id!r} not found")
        return _action_run(row)

    def list_action_runs(self, repo_id: str, *, after: str = "", amount: int = 1000,
                         branch: str | None = None, commit_id: str | None = None
                         ) -> list[ActionRun]:
        check_amount(amount)
        where = [action_runs.c.repo == repo_id, *key_range(action_runs.c.run_id, "", after)]
        if branch is not None:
            where.append(action_runs.c.branch == branch)
        if commit_id is not None:
            where.append(action_runs.c.commit_id == commit_id)
        stmt = (select(action_runs).where(*where).order_by(action_runs.c.run_id)
                .limit(amount))
        return [_action_run(r) for r in self._read(lambda conn: fetch_all(conn, stmt))]

    def list_hook_runs(self, repo_id: str, run_id: str, *, after: str = "",
                       amount: int = 1000) -> list[HookRun]:
        check_amount(amount)
        cols = [c for c in hook_runs.c if c.name != "output"]
        stmt = (select(*cols).where(hook_runs.c.repo == repo_id, hook_runs.c.run_id == run_id,
                                    *key_range(hook_runs.c.hook_run_id, "", after))
                .order_by(hook_runs.c.hook_run_id).limit(amount))
        return [_hook_run(r, "") for r in self._read(lambda conn: fetch_all(conn, stmt))]

    def get_hook_run(self, repo_id: str, run_id: str, hook_run_id: str) -> HookRun:
        row = self._read(lambda conn: conn.execute(select(hook_runs).where(
            hook_runs.c.repo == repo_id, hook_runs.c.run_id == run_id,
            hook_runs.c.hook_run_id == hook_run_id)).first())
        if row is None:
            raise ActionRunNotFoundError(f"hook run {hook_run_id!r} of run {run_id!r} not found")
        return _hook_run(row, row.output)


def _action_run(row: Row[Any]) -> ActionRun:
    return ActionRun(run_id=row.run_id, event_type=row.event_type, branch=row.branch,
                     source_ref=row.source_ref, commit_id=row.commit_id,
                     start_time=row.start_time, end_time=row.end_time, status=row.status)


def _hook_run(row: Row[Any], output: str) -> HookRun:
    return HookRun(hook_run_id=row.hook_run_id, action=row.action, hook_id=row.hook_id,
                   start_time=row.start_time, end_time=row.end_time, status=row.status,
                   output=output)


def _import_row(state: ImportState) -> dict[str, Any]:
    return {"id": state.id, "branch": state.branch, "updated_at": state.updated_at,
            "ingested": state.ingested, "metarange_id": state.metarange_id,
            "commit_id": state.commit_id, "completed": state.completed,
            "committing": state.committing, "error": state.error}


def _import_state(row: Row[Any]) -> ImportState:
    return ImportState(id=row.id, branch=row.branch, updated_at=row.updated_at,
                       ingested=row.ingested, metarange_id=row.metarange_id,
                       commit_id=row.commit_id, completed=row.completed,
                       committing=row.committing, error=row.error)
