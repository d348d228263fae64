"""Pull requests: proposals to merge one branch into another, kept beside the refs.

A pull request is a typed record of the refstore (see :class:`PullRequest`). It is
``open`` when created, may be ``closed`` and opened again, and ends ``merged`` when
merged (a three-way merge of its source branch into its destination, as any merge).
Status changes are compare-and-swap on the status read, so two merges of one pull
request cannot both record themselves.
"""

from __future__ import annotations

import secrets
from dataclasses import replace

from lakefs_core.errors import ValidationError
from lakefs_core.graveler.committing import CommitEngine
from lakefs_core.graveler.model import CommitRecord, PullRequest, PullRequestStatus

#: the statuses a pull request may be given directly (merged comes from merging)
SETTABLE_STATUSES = frozenset({PullRequestStatus.OPEN, PullRequestStatus.CLOSED})


def new_pull_request_id(now: float) -> str:
    """A pull request id that sorts by creation time: microseconds, then random bits."""
    return f"{int(now * 1_000_000):014x}{secrets.token_hex(3)}"


class PullRequestEngine(CommitEngine):
    """Create, read, list, update and merge pull requests."""

    def create_pull_request(self, repo_id: str, *, title: str, description: str,
                            source_branch: str, destination_branch: str,
                            author: str) -> PullRequest:
        """Open a pull request of ``source_branch`` into ``destination_branch``.

        Raises:
            ValidationError: empty title, or the same branch on both sides.
            BranchNotFoundError: a branch does not exist.
            ReadOnlyRepositoryError: the repository is read-only.
        """
        self._writable_repo(repo_id)
        if not title.strip():
            raise ValidationError("title must not be empty")
        if source_branch == destination_branch:
            raise ValidationError("source and destination branches are the same")
        self.refstore.get_branch(repo_id, source_branch)
        self.refstore.get_branch(repo_id, destination_branch)
        now = self.clock()
        pr = PullRequest(id=new_pull_request_id(now), title=title, description=description,
                         status=PullRequestStatus.OPEN, author=author,
                         source_branch=source_branch, destination_branch=destination_branch,
                         creation_date=now)
        self.refstore.create_pull_request(repo_id, pr)
        return pr

    def get_pull_request(self, repo_id: str, pr_id: str) -> PullRequest:
        """Raises RepositoryNotFoundError, PullRequestNotFoundError."""
        self.refstore.get_repository(repo_id)
        return self.refstore.get_pull_request(repo_id, pr_id)

    def list_pull_requests(self, repo_id: str, *, prefix: str = "", after: str = "",
                           amount: int = 1000,
                           statuses: frozenset[PullRequestStatus] | None = None
                           ) -> list[PullRequest]:
        """Pull requests by id (creation order), only those of ``statuses`` if given."""
        self.refstore.get_repository(repo_id)
        return self.refstore.list_pull_requests(repo_id, prefix=prefix, after=after,
                                                amount=amount, statuses=statuses)

    def update_pull_request(self, repo_id: str, pr_id: str, *, title: str | None = None,
                            description: str | None = None,
                            status: PullRequestStatus | None = None) -> PullRequest:
        """Change a pull request's title, description or status (open or closed).

        Raises:
            ValidationError: an empty title; status ``merged`` (merge instead); a
                status change of a merged pull request.
            PullRequestChangedError: its status changed meanwhile.
        """
        self._writable_repo(repo_id)
        current = self.refstore.get_pull_request(repo_id, pr_id)
        new = current
        if title is not None:
            if not title.strip():
                raise ValidationError("title must not be empty")
            new = replace(new, title=title)
        if description is not None:
            new = replace(new, description=description)
        if status is not None and status != current.status:
            if status not in SETTABLE_STATUSES:
                raise ValidationError(f"status {status.value!r} comes from merging only")
            if current.status is PullRequestStatus.MERGED:
                raise ValidationError(f"pull request {pr_id} is merged: its status is final")
            closed = self.clock() if status is PullRequestStatus.CLOSED else None
            new = replace(new, status=status, closed_date=closed)
        if new != current:
            self.refstore.update_pull_request(repo_id, current, new)
        return new

    def merge_pull_request(self, repo_id: str, pr_id: str, committer: str) -> CommitRecord:
        """Merge an open pull request's source into its destination; it ends merged.

        Raises:
            ValidationError: the pull request is not open.
            NoChangesError, MergeConflictError, DirtyBranchError: as any merge.
            PullRequestChangedError: it was closed or merged meanwhile (the merge
                commit stays: it is an ordinary merge of the branches).
        """
        pr = self.get_pull_request(repo_id, pr_id)
        if pr.status is not PullRequestStatus.OPEN:
            raise ValidationError(f"pull request {pr_id} is {pr.status.value}: "
                                  "only an open pull request can be merged")
        merged = self.merge(repo_id, pr.source_branch, pr.destination_branch, committer)
        self.refstore.update_pull_request(repo_id, pr, replace(
            pr, status=PullRequestStatus.MERGED, closed_date=self.clock(),
            merged_commit_id=merged.id))
        return merged
