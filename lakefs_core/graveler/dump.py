"""Dump a repository's refs to its storage namespace, and restore them (lakeFS's refs dump).

A dump is three metaranges written with the engine's own range writer under
``<namespace>/_lakefs/``: one of commits, one of tags, one of branches, each a sorted
run of records keyed by commit id, tag name or branch name. Every record is an
:class:`~lakefs_core.graveler.model.Entry` whose ``content_type`` says what it holds:

- a commit: ``address`` is its metarange id, ``size`` its generation, ``mtime`` its
  creation date, ``etag`` its id; ``metadata`` holds ``parents`` (a JSON list),
  ``message``, ``committer`` and ``metadata`` (a JSON object);
- a branch or a tag: ``address`` (and ``etag``) is the commit it points at; a hidden
  branch has ``metadata`` ``{"hidden": "true"}``.

The ids of the three metaranges are also written to ``_lakefs/refs_manifest.json``.
A restore reads them back into a bare repository (no commit, no tag, no branch with a
commit) whose storage namespace holds the dump and, for the objects to be readable,
the data. Every commit record must hash to its id and every ref must point at a
dumped commit; all of it is checked before anything is written.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import replace

from lakefs_core.block.base import join_address
from lakefs_core.errors import NonEmptyRepositoryError, NotFoundError, ValidationError
from lakefs_core.graveler.core import all_branches, all_commits, all_pages, new_token
from lakefs_core.graveler.encoding import EMPTY_METARANGE_ID
from lakefs_core.graveler.encoding import commit_id as commit_id_of
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.graveler.model import (
    AddressType,
    Branch,
    Commit,
    CommitRecord,
    Entry,
    EntryRecord,
    RefsDump,
    Repository,
    RepositoryTask,
    Tag,
    TaskKind,
)

log = logging.getLogger("lakefs_core.graveler.dump")

COMMIT_TYPE = "application/vnd.lakefs.commit"
BRANCH_TYPE = "application/vnd.lakefs.branch"
TAG_TYPE = "application/vnd.lakefs.tag"
#: where a dump's metarange ids are written, below the storage namespace
MANIFEST_KEY = "_lakefs/refs_manifest.json"
#: lakeFS's refusal of a restore into a repository that has refs
NOT_BARE_MESSAGE = "can only restore into a bare repository"


# --- records ---------------------------------------------------------------------------
def commit_entry(rec: CommitRecord) -> EntryRecord:
    c = rec.commit
    return EntryRecord(rec.id, Entry(
        address=c.metarange_id, size=c.generation, etag=rec.id, mtime=float(c.creation_date),
        address_type=AddressType.RELATIVE, content_type=COMMIT_TYPE,
        metadata={"parents": json.dumps(list(c.parents)), "message": c.message,
                  "committer": c.committer,
                  "metadata": json.dumps(dict(c.metadata), sort_keys=True)}))


def ref_entry(name: str, commit_id: str, content_type: str, hidden: bool = False) -> EntryRecord:
    return EntryRecord(name, Entry(address=commit_id, size=0, etag=commit_id, mtime=0.0,
                                   content_type=content_type,
                                   metadata={"hidden": "true"} if hidden else {}))


def commit_of(record: EntryRecord) -> CommitRecord:
    """The commit a dumped record holds, checked against its id.

    Raises:
        ValidationError: not a commit record, or its content does not hash to its id.
    """
    e = _entry(record, COMMIT_TYPE)
    try:
        meta = e.metadata
        parents = json.loads(meta["parents"])
        metadata = json.loads(meta["metadata"])
        commit = Commit(parents=tuple(parents), metarange_id=e.address,
                        message=meta["message"], committer=meta["committer"],
                        creation_date=int(e.mtime), metadata=metadata, generation=e.size)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValidationError(f"dumped commit {record.path} is malformed: {exc!r}") from None
    if commit_id_of(commit) != record.path:
        raise ValidationError(f"dumped commit {record.path} does not match its content")
    return CommitRecord(record.path, commit)


def _entry(record: EntryRecord, content_type: str) -> Entry:
    e = record.entry
    if e is None or e.content_type != content_type:
        raise ValidationError(
            f"{record.path!r} is not a {content_type.rsplit('.', 1)[-1]} record of a refs dump")
    return e


# --- the service ---------------------------------------------------------------------------
class RefsDumpService:
    """Dumps and restores of one region's repositories, with their task records."""

    def __init__(self, graveler: Graveler) -> None:
        self._graveler = graveler
        self._refstore = graveler.refstore

    # --- dump ----------------------------------------------------------------------------
    def dump(self, repo_id: str) -> RefsDump:
        """Write the repository's commits, tags and branches to its namespace.

        Raises:
            RepositoryNotFoundError: no such repository.
        """
        repo = self._refstore.get_repository(repo_id)
        ranges = self._graveler.ranges_for(repo)
        # tags and branches before commits: a commit they point at is then in the dump
        tags = [ref_entry(t.name, t.commit_id, TAG_TYPE) for t in self._tags(repo_id)]
        branches = [ref_entry(b.name, b.commit_id, BRANCH_TYPE,
                              self._refstore.is_branch_hidden(repo_id, b.name))
                    for b in all_branches(self._refstore, repo_id) if b.commit_id]
        commits = (commit_entry(rec) for rec in all_commits(self._refstore, repo_id))
        refs = RefsDump(
            commits_metarange_id=ranges.apply(EMPTY_METARANGE_ID, commits).metarange_id,
            tags_metarange_id=ranges.apply(EMPTY_METARANGE_ID, tags).metarange_id,
            branches_metarange_id=ranges.apply(EMPTY_METARANGE_ID, branches).metarange_id)
        manifest = json.dumps({"commits_meta_range_id": refs.commits_metarange_id,
                               "tags_meta_range_id": refs.tags_metarange_id,
                               "branches_meta_range_id": refs.branches_metarange_id},
                              indent=2).encode()
        self._graveler.store_for(repo.storage_id).put(
            join_address(repo.storage_namespace, MANIFEST_KEY), manifest)
        return refs

    # --- restore -------------------------------------------------------------------------
    def check_bare(self, repo_id: str) -> Repository:
        """The repository, if a restore may write it.

        Raises:
            RepositoryNotFoundError, ReadOnlyRepositoryError (a mirror),
            NonEmptyRepositoryError: it has a commit, a tag or a branch with a head.
        """
        repo = self._graveler.writable_repository(repo_id)
        if (self._refstore.list_commits(repo_id, amount=1)
                or self._refstore.list_tags(repo_id, amount=1)
                or any(b.commit_id for b in all_branches(self._refstore, repo_id))):
            raise NonEmptyRepositoryError(NOT_BARE_MESSAGE)
        return repo

    def restore(self, repo_id: str, refs: RefsDump) -> None:
        """Load a dump into a bare repository: same commit ids, branches and tags.

        Raises:
            NonEmptyRepositoryError, ReadOnlyRepositoryError, RepositoryNotFoundError.
            RangeNotFoundError: a metarange or range of the dump is not in the namespace.
            ValidationError: a record is malformed or does not hash to its id, a ref
                points at a commit the dump lacks, or the default branch is missing.
        """
        repo = self.check_bare(repo_id)
        ranges = self._graveler.ranges_for(repo)
        commits = [commit_of(r) for r in ranges.iterate(refs.commits_metarange_id)]
        known = {rec.id for rec in commits}
        branches = [(r.path, _entry(r, BRANCH_TYPE)) for r in
                    ranges.iterate(refs.branches_metarange_id)]
        tags = [(r.path, _entry(r, TAG_TYPE)) for r in ranges.iterate(refs.tags_metarange_id)]
        for name, e in (*branches, *tags):
            if e.address not in known:
                raise ValidationError(f"ref {name!r} points at commit {e.address}, "
                                      "which the dump lacks")
        if repo.default_branch not in {name for name, _ in branches}:
            raise ValidationError(f"the dump has no branch {repo.default_branch!r}, "
                                  "the repository's default branch")
        # all or nothing: a failure leaves the repository bare, so the restore can be retried
        self._refstore.restore_refs(
            repo_id, commits,
            [(Branch(name, e.address, new_token()), e.metadata.get("hidden") == "true")
             for name, e in branches],
            [Tag(name, e.address) for name, e in tags],
            present=self._refstore.get_mirror_marking(repo_id) is not None)
        for name, _ in (*branches, *tags):
            self._graveler.notify_ref_moved(repo_id, name)

    # --- tasks ----------------------------------------------------------------------------
    def submit(self, repo_id: str, kind: TaskKind, refs: RefsDump | None = None) -> RepositoryTask:
        """Record a new task, not yet done (a restore's target is checked first)."""
        if kind is TaskKind.RESTORE:
            self.check_bare(repo_id)
        else:
            self._refstore.get_repository(repo_id)
        task = RepositoryTask(id=uuid.uuid4().hex, kind=kind, done=False,
                              update_time=self._graveler.clock(), refs=refs)
        self._refstore.put_task(repo_id, task)
        return task

    def run(self, repo_id: str, task: RepositoryTask) -> RepositoryTask:
        """Do a submitted task and record how it ended (an error is recorded, not raised)."""
        refs, error = task.refs, ""
        try:
            if task.kind is TaskKind.DUMP:
                refs = self.dump(repo_id)
            elif refs is None:
                raise ValidationError("a restore task needs the dump to restore")
            else:
                self.restore(repo_id, refs)
        except Exception as exc:  # noqa: BLE001 - recorded for the status request
            log.warning("%s task %s of %s failed: %s", task.kind, task.id, repo_id, exc)
            error = str(exc) or type(exc).__name__
        finished = replace(task, done=True, update_time=self._graveler.clock(), error=error,
                           refs=refs)
        self._refstore.put_task(repo_id, finished)
        return finished

    def status(self, repo_id: str, task_id: str, kind: TaskKind) -> RepositoryTask:
        """Raises RepositoryNotFoundError, NotFoundError (no such task of this kind)."""
        self._refstore.get_repository(repo_id)
        task = self._refstore.get_task(repo_id, task_id)
        if task is None or task.kind is not kind:
            raise NotFoundError(f"{kind} task {task_id!r} not found")
        return task

    def _tags(self, repo_id: str) -> Iterator[Tag]:
        return all_pages(lambda after, n: self._refstore.list_tags(repo_id, after=after,
                                                                   amount=n),
                         lambda t: t.name)
