"""Which commits a repository may serve: every commit, or on a mirror the proven ones.

A mirror (and a detached former mirror) serves only commits that replication proved
fully present in its storage namespace; any other commit (an intermediate commit it
skipped, one still arriving) reads as not found, so a commit is never half-served.
See docs/ARCHITECTURE.md ("Invariants", I2).
"""

from __future__ import annotations

import threading

from cachetools import LRUCache

from lakefs_core.errors import CommitNotFoundError
from lakefs_core.graveler.model import Repository
from lakefs_core.refstore.base import RefStore


class MirrorVisibility:
    """Answers "may this repository serve this commit?", with bounded caches.

    The answers it caches cannot change once given. A mirror stays one (detached or
    not: its marking is never removed while the repository lives), so "a mirror" is
    cached, "not a mirror" never is: a switchover or failback may adopt an ordinary
    repository as a mirror, and a process that cached the answer before would serve,
    once the repository is detached again, commits it only learned of. What is cached
    instead is the commit: a commit once servable stays so (a commit proven present
    stays present, and adoption marks every commit an ordinary repository holds present).
    Both are keyed by the repository's creation date too: a repository id reused by a
    new repository (a new creation date) has proven nothing yet.
    """

    def __init__(self, refstore: RefStore, *, repositories: int = 10_000,
                 commits: int = 100_000) -> None:
        self.refstore = refstore
        self._lock = threading.Lock()
        self._mirrors: LRUCache[tuple[str, str, int], bool] = LRUCache(repositories)
        self._present: LRUCache[tuple[str, str, int, str], bool] = LRUCache(commits)

    def is_mirror(self, repo: Repository) -> bool:
        """Whether the repository is (or was) a mirror."""
        key = (repo.id, repo.storage_namespace, repo.creation_date)
        with self._lock:
            if key in self._mirrors:
                return True
        if self.refstore.get_mirror_marking(repo.id) is None:
            return False
        with self._lock:
            self._mirrors[key] = True
        return True

    def is_servable(self, repo: Repository, commit_id: str) -> bool:
        """Whether the repository may serve the commit's data (see check_servable)."""
        try:
            self.check_servable(repo, commit_id)
        except CommitNotFoundError:
            return False
        return True

    def check_servable(self, repo: Repository, commit_id: str) -> None:
        """Raise unless the repository may serve the commit's data.

        Raises:
            CommitNotFoundError: a mirror's commit that is not proven present.
        """
        key = (repo.id, repo.storage_namespace, repo.creation_date, commit_id)
        with self._lock:
            if key in self._present:
                return
        if self.is_mirror(repo) and not self.refstore.is_commit_present(repo.id, commit_id):
            raise CommitNotFoundError(
                f"commit {commit_id} is not fully replicated to {repo.id!r} (a mirror, "
                "or one before it was detached): replication never proved its data present")
        with self._lock:
            self._present[key] = True
