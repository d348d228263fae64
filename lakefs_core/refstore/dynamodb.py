"""The refstore on DynamoDB: one table, shared by any number of server processes.

Single-table design, partition key ``pk`` and sort key ``sk`` (both strings):

* ``pk = "repos"``, ``sk = <repository id>``: a repository (listing repositories is
  one Query). While a deletion sweeps its records the item carries ``deleting``.
* ``pk = "repo#<repository id>"``, ``sk = <kind>#<key>``: every record of a
  repository: ``branch#``, ``tag#``, ``commit#``, ``staged#<token>#<path>``,
  ``meta#``, ``hidden#``, ``expiry#``, ``present#``, ``task#``, ``link#``,
  ``import#``, ``pr#``, ``run#``, ``hook#<run>#<hook run>``, and the single
  ``protection``, ``gc`` and ``marking`` records.

The auth store keeps its records in the same table, in partitions of its own
(``auth#...``, see :mod:`lakefs_core.auth.dynamodb_store`); both stores read
partitions by key only, never the whole table. The client, table creation and
plumbing are shared (:mod:`lakefs_core.dynamodb_table`).

A record's value is one JSON attribute ``v`` (JSON keeps floats exact); attributes
that conditions compare live beside it: ``cas`` of a branch (its commit, staging token
and sealed tokens, what a compare-and-swap compares), ``status`` of a pull request,
``live``/``cancelable`` of an import.

A write that needs its repository (a commit, a staged entry, a tag...) is a
TransactWriteItems with a ConditionCheck that the repository item exists and is not
being deleted; a deletion first marks the repository, then deletes its records, so a
record written before the mark is swept and one after it is refused. Listings Query
one partition in key order (UTF-8 byte order, which is code point order) and page with
``LastEvaluatedKey``; ``scan_limit`` caps the items read per request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import botocore.exceptions
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from lakefs_core.dynamodb_table import (
    ABSENT,
    PK,
    PRESENT,
    SK,
    TRANSACTION_LIMIT,
    DynamoDBTable,
    TransactionConflict,
    code,
    dump,
    key,
    load,
    s,
)
from lakefs_core.errors import (
    ActionRunNotFoundError,
    AlreadyExistsError,
    BranchChangedError,
    BranchExistsError,
    BranchNotFoundError,
    CommitNotFoundError,
    ConflictError,
    DatabaseError,
    ImportNotFoundError,
    NonEmptyRepositoryError,
    PullRequestChangedError,
    PullRequestNotFoundError,
    ReadOnlyRepositoryError,
    RepositoryExistsError,
    RepositoryNotFoundError,
    TagExistsError,
    TagNotFoundError,
    ValidationError,
)
from lakefs_core.graveler.model import (
    ActionRun,
    AddressType,
    Branch,
    BranchUpdate,
    Commit,
    CommitRecord,
    Entry,
    EntryRecord,
    GarbageCollectionRules,
    HookRun,
    ImportState,
    MirrorMarking,
    PullRequest,
    PullRequestStatus,
    RefsDump,
    Repository,
    RepositoryTask,
    Tag,
    TaskKind,
)
from lakefs_core.refstore.base import RefStore, check_branch_refs, check_branch_updates
from lakefs_core.refstore.rows import check_amount

_log = logging.getLogger(__name__)

REPOS = "repos"
#: the condition of a write that needs its repository
_REPO_LIVE = "attribute_exists(sk) AND attribute_not_exists(deleting)"
_ABSENT = ABSENT
_PRESENT = PRESENT
_TRANSACTION_LIMIT = TRANSACTION_LIMIT
_s, _key, _dump, _load, _code = s, key, dump, load, code


# --- records <-> JSON values ------------------------------------------------------------
def _repo_value(repo: Repository) -> dict[str, Any]:
    return {"storage_namespace": repo.storage_namespace,
            "default_branch": repo.default_branch, "creation_date": repo.creation_date,
            "storage_id": repo.storage_id, "read_only": repo.read_only}


def _repo_of(repo_id: str, v: Mapping[str, Any]) -> Repository:
    return Repository(id=repo_id, storage_namespace=v["storage_namespace"],
                      default_branch=v["default_branch"], creation_date=v["creation_date"],
                      storage_id=v["storage_id"], read_only=v["read_only"])


def _cas(branch: Branch) -> dict[str, str]:
    """What a compare-and-swap of a branch compares (sealed_at is left out)."""
    return _dump([branch.commit_id, branch.staging_token, list(branch.sealed_tokens)])


def _branch_item(pk: str, branch: Branch) -> dict[str, Any]:
    return {**_key(pk, "branch#" + branch.name), "cas": _cas(branch),
            "v": _dump([branch.commit_id, branch.staging_token, list(branch.sealed_tokens),
                        branch.sealed_at])}


def _branch_of(name: str, item: Mapping[str, Any]) -> Branch:
    commit_id, token, sealed, sealed_at = _load(item)
    return Branch(name=name, commit_id=commit_id, staging_token=token,
                  sealed_tokens=tuple(sealed), sealed_at=sealed_at)


def _commit_value(commit: Commit) -> dict[str, Any]:
    return {"parents": list(commit.parents), "metarange_id": commit.metarange_id,
            "message": commit.message, "committer": commit.committer,
            "creation_date": commit.creation_date, "metadata": dict(commit.metadata),
            "generation": commit.generation}


def _commit_of(v: Mapping[str, Any]) -> Commit:
    return Commit(parents=tuple(v["parents"]), metarange_id=v["metarange_id"],
                  message=v["message"], committer=v["committer"],
                  creation_date=v["creation_date"], metadata=v["metadata"],
                  generation=v["generation"])


def _entry_value(record: EntryRecord) -> Any:
    e = record.entry
    if e is None:
        return None
    return [e.address, e.size, e.etag, e.mtime, AddressType(e.address_type).value,
            e.content_type, dict(e.metadata)]


def _entry_of(path: str, v: Any) -> EntryRecord:
    if v is None:
        return EntryRecord(path=path, entry=None)
    address, size, etag, mtime, address_type, content_type, metadata = v
    return EntryRecord(path=path, entry=Entry(
        address=address, size=size, etag=etag, mtime=mtime,
        address_type=AddressType(address_type), content_type=content_type,
        metadata=metadata))


def _marking_value(m: MirrorMarking) -> dict[str, Any]:
    return {"mirror_id": m.mirror_id, "source_region": m.source_region,
            "source_repository": m.source_repository, "detached": m.detached}


def _import_value(s: ImportState) -> dict[str, Any]:
    return {"id": s.id, "branch": s.branch, "updated_at": s.updated_at,
            "ingested": s.ingested, "metarange_id": s.metarange_id,
            "commit_id": s.commit_id, "completed": s.completed,
            "committing": s.committing, "error": s.error}


def _import_item(pk: str, s: ImportState) -> dict[str, Any]:
    live = not s.completed and not s.error
    return {**_key(pk, "import#" + s.id), "v": _dump(_import_value(s)),
            "live": {"BOOL": live}, "cancelable": {"BOOL": live and not s.committing}}


def _pr_value(pr: PullRequest) -> dict[str, Any]:
    return {"id": pr.id, "title": pr.title, "description": pr.description,
            "status": pr.status.value, "author": pr.author,
            "source_branch": pr.source_branch, "destination_branch": pr.destination_branch,
            "creation_date": pr.creation_date, "closed_date": pr.closed_date,
            "merged_commit_id": pr.merged_commit_id}


def _pr_item(pk: str, pr: PullRequest) -> dict[str, Any]:
    return {**_key(pk, "pr#" + pr.id), "v": _dump(_pr_value(pr)),
            "status": _s(pr.status.value)}


def _pr_of(v: dict[str, Any]) -> PullRequest:
    return PullRequest(**{**v, "status": PullRequestStatus(v["status"])})


def _run_value(run: ActionRun) -> dict[str, Any]:
    return {"run_id": run.run_id, "event_type": run.event_type, "branch": run.branch,
            "source_ref": run.source_ref, "commit_id": run.commit_id,
            "start_time": run.start_time, "end_time": run.end_time, "status": run.status}


def _hook_value(h: HookRun) -> dict[str, Any]:
    return {"hook_run_id": h.hook_run_id, "action": h.action, "hook_id": h.hook_id,
            "start_time": h.start_time, "end_time": h.end_time, "status": h.status,
            "output": h.output}


def _task_value(task: RepositoryTask) -> dict[str, Any]:
    refs = task.refs
    return {"id": task.id, "kind": str(task.kind), "done": task.done,
            "update_time": task.update_time, "error": task.error,
            "refs": None if refs is None else [refs.commits_metarange_id,
                                                 refs.tags_metarange_id,
                                                 refs.branches_metarange_id]}


def _task_of(v: dict[str, Any]) -> RepositoryTask:
    refs = None if v["refs"] is None else RefsDump(*v["refs"])
    return RepositoryTask(id=v["id"], kind=TaskKind(v["kind"]), done=v["done"],
                          update_time=v["update_time"], error=v["error"], refs=refs)


def _repo_pk(repo_id: str) -> str:
    return "repo#" + repo_id


def _staged_prefix(token: str) -> str:
    if "#" in token:  # the token ends where its records' paths begin
        raise ValidationError(f"staging token {token!r} must not contain '#'")
    return f"staged#{token}#"


class DynamoDBRefStore(DynamoDBTable, RefStore):
    """A :class:`RefStore` on one DynamoDB table, created on construction if missing
    (unless ``create_table`` is False).

    Args:
        table_name: the table (lakeFS's ``database.dynamodb.table_name``).
        endpoint: another endpoint (DynamoDB Local, moto); None for AWS's.
        region: the table's region; None for the AWS default chain's.
        profile: a named profile of the shared AWS config files.
        access_key_id: static credentials; None for the default chain.
        secret_access_key: static credentials.
        read_capacity_units: provisioned read capacity of a table created here; with
            ``write_capacity_units`` unset too, the table is on-demand.
        write_capacity_units: provisioned write capacity of a table created here.
        scan_limit: the most items one Query request reads (a page).
        create_table: create the table when it does not exist; when False, a missing
            table is an error (a process that must find the server's table).

    Raises:
        ValidationError: bad settings (capacity given for one direction only...).
        DatabaseError: the table cannot be reached, created or used; or it does not
            exist and ``create_table`` is False.
    """

    def __init__(self, table_name: str, *, endpoint: str | None = None,
                 region: str | None = None, profile: str | None = None,
                 access_key_id: str | None = None, secret_access_key: str | None = None,
                 read_capacity_units: int | None = None,
                 write_capacity_units: int | None = None,
                 scan_limit: int = 1024, create_table: bool = True) -> None:
        self._connect(table_name, endpoint=endpoint, region=region, profile=profile,
                      access_key_id=access_key_id, secret_access_key=secret_access_key,
                      read_capacity_units=read_capacity_units,
                      write_capacity_units=write_capacity_units, scan_limit=scan_limit,
                      create_table=create_table)

    def __repr__(self) -> str:
        return f"DynamoDBRefStore({self._where})"

    # --- plumbing ------------------------------------------------------------------------
    def _repo_check(self, repo_id: str) -> dict[str, Any]:
        return {"ConditionCheck": {"TableName": self._table, "Key": _key(REPOS, repo_id),
                                   "ConditionExpression": _REPO_LIVE}}

    def _write_in_repo(self, repo_id: str, *ops: dict[str, Any]) -> list[bool]:
        """Run ``ops`` if the repository exists (and is not being deleted); which of
        ``ops``' own conditions failed.

        Several operations run in one transaction with a ConditionCheck of the
        repository. One runs alone and the repository is read after it: a write
        that a deletion's sweep may have missed (it landed after the deletion mark)
        sees the mark, and takes itself back. That costs what the transaction would,
        two requests, without a transaction's locking of both items.

        Raises RepositoryNotFoundError.
        """
        if len(ops) > 1:
            failed = self._transact([self._repo_check(repo_id), *ops])
            if failed is None:
                return [False] * len(ops)
            if failed[0]:
                raise RepositoryNotFoundError(f"repository {repo_id!r} not found")
            return failed[1:]
        (kind, op), = ops[0].items()
        try:
            self._call("put_item" if kind == "Put" else "delete_item",
                       "ConditionalCheckFailedException", **op)
            refused = False
        except botocore.exceptions.ClientError:
            refused = True
        repo = self._get(REPOS, repo_id)
        if repo is None or "deleting" in repo:
            if kind == "Put" and not refused:
                item = op["Item"]
                self._call("delete_item", TableName=self._table,
                           Key={PK: item[PK], SK: item[SK]})
            raise RepositoryNotFoundError(f"repository {repo_id!r} not found")
        return [refused]

    def _require_repository(self, repo_id: str) -> dict[str, Any]:
        item = self._get(REPOS, repo_id)
        if item is None or "deleting" in item:
            raise RepositoryNotFoundError(f"repository {repo_id!r} not found")
        return item

    # --- repositories -----------------------------------------------------------------
    def create_repository(self, repo: Repository, default_branch: Branch,
                          mirror: MirrorMarking | None = None,
                          initial_commit: tuple[str, Commit] | None = None) -> None:
        """Create a repository with its default branch, mirror marking and first
        commit in one transaction.

        Raises:
            RepositoryExistsError: a repository with this id exists.
            ValidationError: the branch is not the repository's default branch.
        """
        if default_branch.name != repo.default_branch:
            raise ValidationError(
                f"branch {default_branch.name!r} is not the default branch "
                f"{repo.default_branch!r} of repository {repo.id!r}")
        pk = _repo_pk(repo.id)
        ops = [self._put({**_key(REPOS, repo.id), "v": _dump(_repo_value(repo))}, _ABSENT),
               self._put(_branch_item(pk, default_branch))]
        if initial_commit is not None:
            commit_id, commit = initial_commit
            ops.append(self._put({**_key(pk, "commit#" + commit_id),
                                  "v": _dump(_commit_value(commit))}))
        if mirror is not None:
            ops.append(self._put({**_key(pk, "marking"), "v": _dump(_marking_value(mirror))}))
        failed = self._transact(ops)
        if failed is not None:
            raise RepositoryExistsError(f"repository {repo.id!r} already exists")

    def get_repository(self, repo_id: str) -> Repository:
        item = self._require_repository(repo_id)
        return _repo_of(repo_id, _load(item))

    def list_repositories(self, prefix: str = "", after: str = "",
                          amount: int = 1000) -> list[Repository]:
        check_amount(amount)
        repos: list[Repository] = []
        if amount == 0:
            return repos
        for item in self._query(REPOS, "", prefix, after):
            if "deleting" not in item:
                repos.append(_repo_of(self._name(item, ""), _load(item)))
            if len(repos) >= amount:
                break
        return repos

    def delete_repository(self, repo_id: str) -> None:
        """Mark the repository deleted (new records are refused from then on), delete
        its records, then the repository item. A deletion cut short (a lost process)
        is finished by deleting again. Raises RepositoryNotFoundError."""
        try:
            self._call("update_item", "ConditionalCheckFailedException",
                       TableName=self._table, Key=_key(REPOS, repo_id),
                       UpdateExpression="SET deleting = :t", ConditionExpression=_PRESENT,
                       ExpressionAttributeValues={":t": {"BOOL": True}})
        except botocore.exceptions.ClientError:
            raise RepositoryNotFoundError(f"repository {repo_id!r} not found") from None
        pk = _repo_pk(repo_id)
        keys = [{PK: i[PK], SK: i[SK]} for i in self._query(pk, "")]
        self._batch_delete(keys)
        self._call("delete_item", TableName=self._table, Key=_key(REPOS, repo_id))

    def update_repository(self, repo: Repository) -> None:
        """Replace the mutable fields (read_only, default_branch)."""
        for _attempt in range(10):
            item = self._require_repository(repo.id)
            value = _load(item)
            value.update(read_only=repo.read_only, default_branch=repo.default_branch)
            try:
                self._call("put_item", "ConditionalCheckFailedException",
                           TableName=self._table,
                           Item={**_key(REPOS, repo.id), "v": _dump(value)},
                           ConditionExpression=_REPO_LIVE + " AND v = :old",
                           ExpressionAttributeValues={":old": item["v"]})
                return
            except botocore.exceptions.ClientError:
                continue  # changed or deleted meanwhile: read it again
        raise DatabaseError(f"repository {repo.id!r} kept changing during an update")

    def get_repository_metadata(self, repo_id: str) -> dict[str, str]:
        self._require_repository(repo_id)
        return {self._name(i, "meta#"): str(_load(i))
                for i in self._query(_repo_pk(repo_id), "meta#")}

    def set_repository_metadata(self, repo_id: str, metadata: Mapping[str, str]) -> None:
        pk = _repo_pk(repo_id)
        puts = [self._put({**_key(pk, "meta#" + k), "v": _dump(v)}) for k, v in metadata.items()]
        if not puts:
            self._require_repository(repo_id)
        for start in range(0, len(puts), _TRANSACTION_LIMIT - 1):
            self._write_in_repo(repo_id, *puts[start:start + _TRANSACTION_LIMIT - 1])

    def delete_repository_metadata(self, repo_id: str, keys: list[str]) -> None:
        self._require_repository(repo_id)
        self._batch_delete([_key(_repo_pk(repo_id), "meta#" + k) for k in dict.fromkeys(keys)])

    # --- branch protection rules and hidden branches ----------------------------------
    def get_branch_protection_rules(self, repo_id: str) -> tuple[str, ...]:
        item = self._get(_repo_pk(repo_id), "protection")
        return () if item is None else tuple(_load(item))

    def set_branch_protection_rules(self, repo_id: str, patterns: Sequence[str]) -> None:
        self._write_in_repo(repo_id, self._put(
            {**_key(_repo_pk(repo_id), "protection"), "v": _dump(list(patterns))}))

    def is_branch_hidden(self, repo_id: str, name: str) -> bool:
        return self._get(_repo_pk(repo_id), "hidden#" + name) is not None

    def set_branch_hidden(self, repo_id: str, name: str, hidden: bool) -> None:
        pk = _repo_pk(repo_id)
        if hidden:
            self._write_in_repo(repo_id, self._put({**_key(pk, "hidden#" + name),
                                                    "v": _dump(True)}))
        else:
            self._call("delete_item", TableName=self._table, Key=_key(pk, "hidden#" + name))

    # --- ephemeral branches --------------------------------------------------------------
    def get_branch_expiry(self, repo_id: str, name: str) -> int | None:
        item = self._get(_repo_pk(repo_id), "expiry#" + name)
        return None if item is None else int(_load(item))

    def set_branch_expiry(self, repo_id: str, name: str, expires_at: int | None) -> None:
        pk = _repo_pk(repo_id)
        if expires_at is None:
            self._write_in_repo(repo_id, self._delete(pk, "expiry#" + name))
        else:
            self._write_in_repo(repo_id, self._put({**_key(pk, "expiry#" + name),
                                                    "v": _dump(int(expires_at))}))

    def list_expired_branches(self, now: int, amount: int = 1000) -> list[tuple[str, str]]:
        """Expired branches of every writable repository: a Query of each repository's
        expiries (housekeeping runs seldom; no index is kept for it)."""
        check_amount(amount)
        found: list[tuple[int, str, str]] = []
        for repo_item in self._query(REPOS, ""):
            repo = _load(repo_item)
            if repo["read_only"] or "deleting" in repo_item:
                continue
            repo_id = self._name(repo_item, "")
            for item in self._query(_repo_pk(repo_id), "expiry#"):
                name, expires_at = self._name(item, "expiry#"), int(_load(item))
                if expires_at <= now and name != repo["default_branch"]:
                    found.append((expires_at, repo_id, name))
        found.sort()
        expired: list[tuple[str, str]] = []
        for _expires_at, repo_id, name in found:
            if len(expired) >= amount:
                break
            if self._get(_repo_pk(repo_id), "branch#" + name) is not None:
                expired.append((repo_id, name))
        return expired

    # --- garbage collection rules ------------------------------------------------------
    def get_gc_rules(self, repo_id: str) -> GarbageCollectionRules | None:
        item = self._get(_repo_pk(repo_id), "gc")
        if item is None:
            return None
        default, branches = _load(item)
        return GarbageCollectionRules(default, dict(sorted(branches.items())))

    def set_gc_rules(self, repo_id: str, rules: GarbageCollectionRules | None) -> None:
        pk = _repo_pk(repo_id)
        if rules is None:
            self._write_in_repo(repo_id, self._delete(pk, "gc"))
            return
        self._write_in_repo(repo_id, self._put({**_key(pk, "gc"), "v": _dump(
            [rules.default_retention_days, dict(rules.branch_retention_days)])}))

    # --- dump and restore tasks -----------------------------------------------------------
    def put_task(self, repo_id: str, task: RepositoryTask) -> None:
        self._write_in_repo(repo_id, self._put(
            {**_key(_repo_pk(repo_id), "task#" + task.id), "v": _dump(_task_value(task))}))

    def get_task(self, repo_id: str, task_id: str) -> RepositoryTask | None:
        item = self._get(_repo_pk(repo_id), "task#" + task_id)
        return None if item is None else _task_of(_load(item))

    # --- link addresses ----------------------------------------------------------------
    def put_link_address(self, repo_id: str, address: str, *, expires_at: float,
                         now: float) -> None:
        pk = _repo_pk(repo_id)
        self._write_in_repo(repo_id, self._put({**_key(pk, "link#" + address),
                                                "v": _dump(expires_at)}))
        expired = [{PK: i[PK], SK: i[SK]} for i in self._query(pk, "link#")
                   if _load(i) < now]
        self._batch_delete(expired)

    def get_link_address(self, repo_id: str, address: str) -> float | None:
        item = self._get(_repo_pk(repo_id), "link#" + address)
        return None if item is None else float(_load(item))

    def take_link_address(self, repo_id: str, address: str) -> float | None:
        old = self._call("delete_item", TableName=self._table,
                         Key=_key(_repo_pk(repo_id), "link#" + address),
                         ReturnValues="ALL_OLD").get("Attributes")
        return None if not old else float(_load(old))

    # --- mirrors ------------------------------------------------------------------------
    def get_mirror_marking(self, repo_id: str) -> MirrorMarking | None:
        item = self._get(_repo_pk(repo_id), "marking")
        return None if item is None else MirrorMarking(**_load(item))

    def set_mirror_marking(self, repo_id: str, marking: MirrorMarking) -> None:
        self._write_in_repo(repo_id, self._put(
            {**_key(_repo_pk(repo_id), "marking"), "v": _dump(_marking_value(marking))}))

    def mark_commit_present(self, repo_id: str, commit_id: str) -> None:
        self._write_in_repo(repo_id, self._put(
            {**_key(_repo_pk(repo_id), "present#" + commit_id), "v": _dump(True)}))

    def is_commit_present(self, repo_id: str, commit_id: str) -> bool:
        return self._get(_repo_pk(repo_id), "present#" + commit_id) is not None

    # --- imports -------------------------------------------------------------------------
    def create_import(self, repo_id: str, state: ImportState) -> None:
        if self._write_in_repo(repo_id, self._put(_import_item(_repo_pk(repo_id), state),
                                                  _ABSENT))[0]:
            raise AlreadyExistsError(f"import {state.id!r} already exists")

    def get_import(self, repo_id: str, import_id: str) -> ImportState:
        item = self._get(_repo_pk(repo_id), "import#" + import_id)
        if item is None:
            raise ImportNotFoundError()
        return ImportState(**_load(item))

    def update_import(self, repo_id: str, state: ImportState) -> bool:
        try:
            self._call("put_item", "ConditionalCheckFailedException", TableName=self._table,
                       Item=_import_item(_repo_pk(repo_id), state),
                       ConditionExpression="live = :t",
                       ExpressionAttributeValues={":t": {"BOOL": True}})
            return True
        except botocore.exceptions.ClientError:
            return False

    def cancel_import(self, repo_id: str, import_id: str, error: str) -> None:
        state = self.get_import(repo_id, import_id)
        if state.completed:
            raise ConflictError("cannot cancel: the import is completed")
        if state.error:
            raise ConflictError(f"cannot cancel: the import ended: {state.error}")
        if state.committing:
            raise ConflictError("cannot cancel: the import is committing")
        ended = ImportState(**{**_import_value(state), "error": error,
                               "updated_at": time.time()})
        try:
            self._call("put_item", "ConditionalCheckFailedException", TableName=self._table,
                       Item=_import_item(_repo_pk(repo_id), ended),
                       ConditionExpression="cancelable = :t",
                       ExpressionAttributeValues={":t": {"BOOL": True}})
        except botocore.exceptions.ClientError:
            raise ConflictError("cannot cancel import: it changed meanwhile") from None

    # --- pull requests -------------------------------------------------------------------
    def create_pull_request(self, repo_id: str, pr: PullRequest) -> None:
        if self._write_in_repo(repo_id, self._put(_pr_item(_repo_pk(repo_id), pr), _ABSENT))[0]:
            raise AlreadyExistsError(f"pull request {pr.id!r} already exists")

    def get_pull_request(self, repo_id: str, pr_id: str) -> PullRequest:
        item = self._get(_repo_pk(repo_id), "pr#" + pr_id)
        if item is None:
            raise PullRequestNotFoundError(f"pull request {pr_id!r} not found")
        return _pr_of(_load(item))

    def list_pull_requests(self, repo_id: str, *, prefix: str = "", after: str = "",
                           amount: int = 1000,
                           statuses: frozenset[PullRequestStatus] | None = None
                           ) -> list[PullRequest]:
        check_amount(amount)
        prs: list[PullRequest] = []
        if amount == 0:
            return prs
        for item in self._query(_repo_pk(repo_id), "pr#", prefix, after):
            pr = _pr_of(_load(item))
            if statuses is None or pr.status in statuses:
                prs.append(pr)
                if len(prs) >= amount:
                    break
        return prs

    def update_pull_request(self, repo_id: str, expected: PullRequest,
                            new: PullRequest) -> None:
        pk = _repo_pk(repo_id)
        try:
            self._call("put_item", "ConditionalCheckFailedException", TableName=self._table,
                       Item=_pr_item(pk, new), ConditionExpression="#s = :s",
                       ExpressionAttributeNames={"#s": "status"},
                       ExpressionAttributeValues={":s": _s(expected.status.value)})
        except botocore.exceptions.ClientError:
            if self._get(pk, "pr#" + expected.id) is None:
                raise PullRequestNotFoundError(
                    f"pull request {expected.id!r} not found") from None
            raise PullRequestChangedError(
                f"pull request {expected.id!r} changed concurrently") from None

    # --- action runs -------------------------------------------------------------------
    def put_action_run(self, repo_id: str, run: ActionRun, hooks: Sequence[HookRun]) -> None:
        pk = _repo_pk(repo_id)
        puts = [self._put({**_key(pk, "run#" + run.run_id), "v": _dump(_run_value(run))})]
        puts += [self._put({**_key(pk, f"hook#{run.run_id}#{h.hook_run_id}"),
                            "v": _dump(_hook_value(h))}) for h in hooks]
        # hooks beyond one transaction's room go first: the run appears with all of them
        room = _TRANSACTION_LIMIT - 1
        while len(puts) > room:
            self._write_in_repo(repo_id, *puts[-room:])
            del puts[-room:]
        self._write_in_repo(repo_id, *puts)

    def set_action_run_commit(self, repo_id: str, run_id: str, commit_id: str) -> None:
        pk = _repo_pk(repo_id)
        for _attempt in range(10):
            item = self._get(pk, "run#" + run_id)
            if item is None:
                return
            value = {**_load(item), "commit_id": commit_id}
            try:
                self._call("put_item", "ConditionalCheckFailedException",
                           TableName=self._table,
                           Item={**_key(pk, "run#" + run_id), "v": _dump(value)},
                           ConditionExpression="v = :old",
                           ExpressionAttributeValues={":old": item["v"]})
                return
            except botocore.exceptions.ClientError:
                continue
        raise DatabaseError(f"action run {run_id!r} kept changing during an update")

    def get_action_run(self, repo_id: str, run_id: str) -> ActionRun:
        item = self._get(_repo_pk(repo_id), "run#" + run_id)
        if item is None:
            raise ActionRunNotFoundError(f"run {run_id!r} not found")
        return ActionRun(**_load(item))

    def list_action_runs(self, repo_id: str, *, after: str = "", amount: int = 1000,
                         branch: str | None = None, commit_id: str | None = None
                         ) -> list[ActionRun]:
        check_amount(amount)
        runs: list[ActionRun] = []
        if amount == 0:
            return runs
        for item in self._query(_repo_pk(repo_id), "run#", "", after):
            run = ActionRun(**_load(item))
            if ((branch is None or run.branch == branch)
                    and (commit_id is None or run.commit_id == commit_id)):
                runs.append(run)
                if len(runs) >= amount:
                    break
        return runs

    def list_hook_runs(self, repo_id: str, run_id: str, *, after: str = "",
                       amount: int = 1000) -> list[HookRun]:
        check_amount(amount)
        if amount == 0:
            return []
        return [HookRun(**{**_load(i), "output": ""})
                for i in self._query(_repo_pk(repo_id), f"hook#{run_id}#", "", after, amount)]

    def get_hook_run(self, repo_id: str, run_id: str, hook_run_id: str) -> HookRun:
        item = self._get(_repo_pk(repo_id), f"hook#{run_id}#{hook_run_id}")
        if item is None:
            raise ActionRunNotFoundError(f"hook run {hook_run_id!r} of run {run_id!r} not found")
        return HookRun(**_load(item))

    # --- branches ----------------------------------------------------------------------
    def create_branch(self, repo_id: str, branch: Branch) -> None:
        if self._write_in_repo(repo_id, self._put(_branch_item(_repo_pk(repo_id), branch),
                                                  _ABSENT))[0]:
            raise BranchExistsError("branch already exists: not unique")  # lakeFS's text

    def get_branch(self, repo_id: str, name: str) -> Branch:
        item = self._get(_repo_pk(repo_id), "branch#" + name)
        if item is None:
            raise BranchNotFoundError(f"branch {name!r} not found")
        return _branch_of(name, item)

    def get_write_target(
        self, repo_id: str, branch_name: str
    ) -> tuple[Repository, tuple[str, ...], Branch | None]:
        """The repository, its protection patterns and a branch, in one BatchGetItem."""
        pk = _repo_pk(repo_id)
        keys = [_key(REPOS, repo_id), _key(pk, "protection"), _key(pk, "branch#" + branch_name)]
        found = {(i[PK]["S"], i[SK]["S"]): i for i in self._batch_get(keys)}
        repo_item = found.get((REPOS, repo_id))
        if repo_item is None or "deleting" in repo_item:
            raise RepositoryNotFoundError(f"repository {repo_id!r} not found")
        rules = found.get((pk, "protection"))
        branch = found.get((pk, "branch#" + branch_name))
        return (_repo_of(repo_id, _load(repo_item)), () if rules is None else tuple(_load(rules)),
                None if branch is None else _branch_of(branch_name, branch))

    def list_branches(self, repo_id: str, prefix: str = "", after: str = "",
                      amount: int = 1000) -> list[Branch]:
        check_amount(amount)
        if amount == 0:
            return []
        return [_branch_of(self._name(i, "branch#"), i)
                for i in self._query(_repo_pk(repo_id), "branch#", prefix, after, amount)]

    def delete_branch(self, repo_id: str, name: str) -> None:
        """Delete a branch with its hidden mark and expiry. Raises BranchNotFoundError."""
        pk = _repo_pk(repo_id)
        failed = self._transact([self._delete(pk, "branch#" + name, _PRESENT),
                                 self._delete(pk, "hidden#" + name),
                                 self._delete(pk, "expiry#" + name)])
        if failed is not None:
            raise BranchNotFoundError(f"branch {name!r} not found")

    def update_branch(self, repo_id: str, expected: Branch, new: Branch, *,
                      writable: bool = False) -> None:
        """Compare-and-swap by a conditional PutItem on the branch's ``cas`` attribute;
        with ``writable``, a transaction of that Put and a check that the repository's
        item is still the writable one read just before (a freeze rewrites it)."""
        if new.name != expected.name:
            raise ValidationError(f"cannot rename branch {expected.name!r} to {new.name!r}")
        pk = _repo_pk(repo_id)
        if writable:
            self._update_writable_branch(repo_id, expected, new)
            return
        try:
            self._call("put_item", "ConditionalCheckFailedException", TableName=self._table,
                       Item=_branch_item(pk, new), ConditionExpression="cas = :c",
                       ExpressionAttributeValues={":c": _cas(expected)})
        except botocore.exceptions.ClientError:
            if self._get(pk, "branch#" + expected.name) is None:
                raise BranchNotFoundError(f"branch {expected.name!r} not found") from None
            raise BranchChangedError(
                f"branch {expected.name!r} changed concurrently") from None

    @retry(retry=retry_if_exception_type(TransactionConflict), stop=stop_after_attempt(8),
           wait=wait_exponential(multiplier=0.02, max=0.5), reraise=True)
    def _update_writable_branch(self, repo_id: str, expected: Branch, new: Branch) -> None:
        pk = _repo_pk(repo_id)
        for _attempt in range(10):
            repo_item = self._require_repository(repo_id)
            if _load(repo_item)["read_only"]:
                raise ReadOnlyRepositoryError(f"repository {repo_id!r} is read-only")
            put = self._put(_branch_item(pk, new), "cas = :c")
            put["Put"]["ExpressionAttributeValues"] = {":c": _cas(expected)}
            failed = self._transact([
                {"ConditionCheck": {"TableName": self._table, "Key": _key(REPOS, repo_id),
                                    "ConditionExpression": _REPO_LIVE + " AND v = :v",
                                    "ExpressionAttributeValues": {":v": repo_item["v"]}}},
                put])
            if failed is None:
                return
            if not failed[0]:  # the repository is as read: the branch moved
                if self._get(pk, "branch#" + expected.name) is None:
                    raise BranchNotFoundError(f"branch {expected.name!r} not found")
                raise BranchChangedError(f"branch {expected.name!r} changed concurrently")
        raise BranchChangedError(f"repository {repo_id!r} kept changing")

    def get_branches(self, refs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Branch]:
        """Several repositories' branches by one TransactGetItems: a serializable read,
        which no write transaction is half-applied to."""
        check_branch_refs(refs)
        pairs = sorted(set(refs))
        if not pairs:
            return {}
        items = self._transact_get([_key(_repo_pk(repo), "branch#" + name)
                                    for repo, name in pairs])
        return {pair: _branch_of(pair[1], item)
                for pair, item in zip(pairs, items, strict=True) if item is not None}

    @retry(retry=retry_if_exception_type(TransactionConflict), stop=stop_after_attempt(8),
           wait=wait_exponential(multiplier=0.02, max=0.5), reraise=True)
    def _transact_get(self, keys: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
        try:
            out = self._call("transact_get_items", "TransactionCanceledException",
                             TransactItems=[{"Get": {"TableName": self._table, "Key": k}}
                                            for k in keys])
        except botocore.exceptions.ClientError as exc:  # a write transaction was in flight
            raise TransactionConflict(str(exc)) from None
        return [r.get("Item") or None for r in out.get("Responses", [])]

    def update_branches(self, updates: Sequence[BranchUpdate]) -> None:
        """One TransactWriteItems: each branch a Put conditioned on its ``cas`` (or on
        its absence, with a check that its repository is live)."""
        check_branch_updates(updates)
        if not updates:
            return
        # one check per repository that gains a branch (a transaction names an item once)
        created_in = sorted({u.repo_id for u in updates if u.expected is None})
        ops: list[dict[str, Any]] = [self._repo_check(repo) for repo in created_in]
        for u in updates:
            item = _branch_item(_repo_pk(u.repo_id), u.new)
            if u.expected is None:
                ops.append(self._put(item, _ABSENT))
            else:
                op = self._put(item, "cas = :c")
                op["Put"]["ExpressionAttributeValues"] = {":c": _cas(u.expected)}
                ops.append(op)
        failed = self._transact(ops)
        if failed is None:
            return
        for repo, gone in zip(created_in, failed, strict=False):
            if gone:
                raise RepositoryNotFoundError(f"repository {repo!r} not found")
        for u, changed in zip(updates, failed[len(created_in):], strict=False):
            if changed:
                raise BranchChangedError(f"branch {u.new.name!r} of {u.repo_id!r} changed "
                                         "concurrently")
        raise BranchChangedError("a branch changed concurrently")

    # --- a dump's refs ---------------------------------------------------------------------
    def restore_refs(self, repo_id: str, commits: Sequence[CommitRecord],
                     branches: Sequence[tuple[Branch, bool]], tags: Sequence[Tag], *,
                     present: bool = False) -> None:
        """Write a dump's refs, all or nothing: one transaction when they fit in one
        (100 operations); else transactions of 100, the written ones deleted again if
        a later one fails."""
        for names, error in (([b.name for b, _ in branches],
                              BranchExistsError("branch already exists: not unique")),
                             ([t.name for t in tags], TagExistsError(
                                 "tag already exists: not unique"))):
            if len(set(names)) != len(names):
                raise error
        pk = _repo_pk(repo_id)
        self._require_repository(repo_id)
        existing = {self._name(i, "branch#"): _branch_of(self._name(i, "branch#"), i)
                    for i in self._query(pk, "branch#")}
        if (next(self._query(pk, "commit#", limit=1), None) is not None
                or next(self._query(pk, "tag#", limit=1), None) is not None
                or any(b.commit_id for b in existing.values())):
            raise NonEmptyRepositoryError("can only restore into a bare repository")
        ops: list[dict[str, Any]] = []
        for rec in commits:
            ops.append(self._put({**_key(pk, "commit#" + rec.id),
                                  "v": _dump(_commit_value(rec.commit))}))
            if present:
                ops.append(self._put({**_key(pk, "present#" + rec.id), "v": _dump(True)}))
        for branch, hidden in branches:
            bare = existing.get(branch.name)
            if bare is None:
                ops.append(self._put(_branch_item(pk, branch), _ABSENT))
            else:  # the bare default branch's row gets its head, keeps its token
                headed = Branch(name=bare.name, commit_id=branch.commit_id,
                                staging_token=bare.staging_token)
                ops.append({"Put": {"TableName": self._table, "Item": _branch_item(pk, headed),
                                    "ConditionExpression": "cas = :c",
                                    "ExpressionAttributeValues": {":c": _cas(bare)}}})
            if hidden:
                ops.append(self._put({**_key(pk, "hidden#" + branch.name), "v": _dump(True)}))
        for tag in tags:
            ops.append(self._put({**_key(pk, "tag#" + tag.name), "v": _dump(tag.commit_id)},
                                 _ABSENT))
        room = _TRANSACTION_LIMIT - 1
        chunks = [ops[i:i + room] for i in range(0, len(ops), room)] or [[]]
        done: list[dict[str, Any]] = []
        for chunk in chunks:
            try:
                failed = self._write_in_repo(repo_id, *chunk)
                if any(failed):
                    raise NonEmptyRepositoryError(
                        "can only restore into a bare repository: it changed meanwhile")
            except BaseException:
                self._undo(done, existing)
                raise
            done += chunk

    def _undo(self, ops: list[dict[str, Any]], bare: Mapping[str, Branch]) -> None:
        """Take back the puts of a restore that failed midway."""
        keys = [op["Put"]["Item"] for op in ops]
        restored = [k for k in keys if k[SK]["S"].removeprefix("branch#") in bare
                    and k[SK]["S"].startswith("branch#")]
        self._batch_delete([{PK: k[PK], SK: k[SK]} for k in keys if k not in restored])
        for item in restored:
            name = item[SK]["S"].removeprefix("branch#")
            self._call("put_item", TableName=self._table,
                       Item=_branch_item(item[PK]["S"], bare[name]))

    # --- tags -----------------------------------------------------------------------------
    def create_tag(self, repo_id: str, tag: Tag) -> None:
        if self._write_in_repo(repo_id, self._put(
                {**_key(_repo_pk(repo_id), "tag#" + tag.name), "v": _dump(tag.commit_id)},
                _ABSENT))[0]:
            raise TagExistsError("tag already exists: not unique")  # lakeFS's text

    def get_tag(self, repo_id: str, name: str) -> Tag:
        item = self._get(_repo_pk(repo_id), "tag#" + name)
        if item is None:
            raise TagNotFoundError(f"tag {name!r} not found")
        return Tag(name=name, commit_id=_load(item))

    def list_tags(self, repo_id: str, prefix: str = "", after: str = "",
                  amount: int = 1000) -> list[Tag]:
        check_amount(amount)
        if amount == 0:
            return []
        return [Tag(name=self._name(i, "tag#"), commit_id=_load(i))
                for i in self._query(_repo_pk(repo_id), "tag#", prefix, after, amount)]

    def delete_tag(self, repo_id: str, name: str) -> None:
        try:
            self._call("delete_item", "ConditionalCheckFailedException", TableName=self._table,
                       Key=_key(_repo_pk(repo_id), "tag#" + name), ConditionExpression=_PRESENT)
        except botocore.exceptions.ClientError:
            raise TagNotFoundError(f"tag {name!r} not found") from None

    # --- commits ------------------------------------------------------------------------
    def put_commit(self, repo_id: str, commit_id: str, commit: Commit) -> None:
        """Store a commit record; a record already stored under this id is kept."""
        self._write_in_repo(repo_id, self._put(
            {**_key(_repo_pk(repo_id), "commit#" + commit_id), "v": _dump(_commit_value(commit))},
            _ABSENT))

    def get_commit(self, repo_id: str, commit_id: str) -> Commit:
        item = self._get(_repo_pk(repo_id), "commit#" + commit_id)
        if item is None:
            raise CommitNotFoundError(f"commit {commit_id!r} not found")
        return _commit_of(_load(item))

    def list_commits(self, repo_id: str, after: str = "",
                     amount: int = 1000) -> list[CommitRecord]:
        check_amount(amount)
        if amount == 0:
            return []
        return [CommitRecord(self._name(i, "commit#"), _commit_of(_load(i)))
                for i in self._query(_repo_pk(repo_id), "commit#", "", after, amount)]

    def find_commit_ids(self, repo_id: str, prefix: str, limit: int = 2) -> list[str]:
        check_amount(limit)
        if limit == 0:
            return []
        return [self._name(i, "commit#")
                for i in self._query(_repo_pk(repo_id), "commit#", prefix, "", limit)]

    # --- staging ------------------------------------------------------------------------
    def put_staged(self, repo_id: str, token: str, record: EntryRecord) -> None:
        self._write_in_repo(repo_id, self._put(
            {**_key(_repo_pk(repo_id), _staged_prefix(token) + record.path),
             "v": _dump(_entry_value(record))}))

    def get_staged(self, repo_id: str, token: str, path: str) -> EntryRecord | None:
        item = self._get(_repo_pk(repo_id), _staged_prefix(token) + path)
        return None if item is None else _entry_of(path, _load(item))

    def list_staged(self, repo_id: str, token: str, prefix: str = "",
                    after: str = "") -> Iterator[EntryRecord]:
        """Stream staged records by path, one Query request per ``scan_limit`` items."""
        kind = _staged_prefix(token)
        for item in self._query(_repo_pk(repo_id), kind, prefix, after):
            yield _entry_of(self._name(item, kind), _load(item))

    def delete_staged(self, repo_id: str, token: str, path: str) -> None:
        self._call("delete_item", TableName=self._table,
                   Key=_key(_repo_pk(repo_id), _staged_prefix(token) + path))

    def drop_staging(self, repo_id: str, token: str) -> None:
        self._batch_delete([{PK: i[PK], SK: i[SK]} for i in
                            self._query(_repo_pk(repo_id), _staged_prefix(token))])

    def has_staged(self, repo_id: str, token: str) -> bool:
        return next(self._query(_repo_pk(repo_id), _staged_prefix(token), limit=1),
                    None) is not None

