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

    Both answers it caches cannot change once given: a repository is a mirror from
    its creation on (or from when a switchover or failback adopted it, which it does
    only once the repository is read-only: whether it is read-only is part of the key),
    and a commit once proven present in a repository stays present. Both are keyed by
    the repository's creation date too: a repository id reused by a new repository (a
    new creation date) has proven nothing yet.
    """

    def __init__(self, refstore: RefStore, *, repositories: int = 10_000,
                 commits: int = 100_000) -> None:
        self.refstore = refstore
        self._lock = threading.Lock()
        self._mirror_flags: LRUCache[tuple[str, str, int, bool], bool] = LRUCache(
            repositories)
        self._present: LRUCache[tuple[str, str, int, str], bool] = LRUCache(commits)

    def is_mirror(self, repo: Repository) -> bool:
        """Whether the repository is (or was) a mirror."""
        key = (repo.id, repo.storage_namespace, repo.creation_date, repo.read_only)
        with self._lock:
            flag = self._mirror_flags.get(key)
        if flag is not None:
            return flag
        flag = self.refstore.get_mirror_marking(repo.id) is not None
        # a mirror is read-only from its creation until detached: an ordinary writable
        # repository's answer cannot change under us, nor can a mirror's
        if flag or not repo.read_only:
            with self._lock:
                self._mirror_flags[key] = flag
        return flag

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
        if not self.is_mirror(repo):
            return
        if not self.refstore.is_commit_present(repo.id, commit_id):
            raise CommitNotFoundError(
                f"commit {commit_id} is not fully replicated to {repo.id!r} (a mirror, "
                "or one before it was detached): replication never proved its data present")
        with self._lock:
            self._present[key] = True
