"""I1-I4, I6 and I7 (docs/ARCHITECTURE.md) checked through the REST API of both regions.

The same idea as ``tests/replication/invariants.py`` (which reads both regions'
engines in one process), but the processes here are separate, so everything goes
through HTTP, and the source region may die: whatever the checker learns of the
source (commit records, the bytes of every object of every head) is kept, so the
mirror can still be checked against it after the source is gone.

- **I1 consistent**: a mirror branch points at a commit its source branch pointed at
  (or a first-parent ancestor of one), whose commit record on the mirror equals the
  source's, and which the mirror serves completely (I2).
- **I2 same data**: the mirror's listing of a commit equals the source's, and every
  object reads byte-identical. A source head the mirror has not promoted yet is
  either refused (404) or served completely and identically, never half-served.
- **I3 forward only**: a mirror branch moves to a descendant of its previous head (or
  disappears) only if the source branch was reset or deleted since that head was
  first a source head.
- **I4 read-only**: every write a client can try on the mirror is refused.

A repository that becomes a mirror by a switchover or failback (the old source,
adopted under its own name) still holds its own heads until the first promotion
replaces them: those *legacy* heads are served as they were, and from the moment a
branch or tag leaves its legacy head the rules above hold for it as for any mirror.

- **I6 honest lag** (:meth:`ApiMirrorChecker.check_status`): whenever the mirror's status
  is read, every branch's ``lag_seconds`` is at least the time since its
  ``source_confirmed_at`` (less :data:`LAG_EPSILON`: the status gives whole seconds),
  and while the source region's server has been down for longer than the status's
  ``stale_after_seconds`` (plus :data:`BLIND_MARGIN`) no branch is ``current`` and
  every branch is ``stale``. The destination cannot have read the source since the
  server died, so this holds whatever the timing; a server down for less than that
  (the chaos run's kills) is not judged.
- **I8 one cut** (:class:`GroupCutChecker`): in a destination region, the heads of a
  mirror group's member branches read at one instant are the heads of one cut of the
  group; the cut served never goes back to an older one; and every cut the source
  region takes holds heads its member branches had at one moment of the source's
  history (:class:`SourceTimeline`). The API reads one branch at a time, so an instant
  is a sandwich: every member's head, then all but the last again; when the second
  reads equal the first, those heads were all served together when the last member was
  read (promotions move every member in one transaction).
- **I7 nothing lost** (:class:`HandoverAudit`): every commit the old primary acknowledged
  and that its branches or tags still reach is, after a switchover, reachable from the
  new primary's refs and readable there; after a failback, reachable from the new
  primary's refs (its own or the ``failover-*`` branches the failback reported), or
  already in the new primary before the failback (mirrored before the failover, then
  moved away by the new primary's own writes: their decision, not a loss).
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from e2e.api import ApiError, RegionClient

#: name of the object, branch and tag the read-only probes try to create on a mirror
PROBE = "i4-probe"
#: seconds of slack in the I6 lag check: ``source_confirmed_at`` is shown in whole
#: seconds (rounded down), the lag to the millisecond
LAG_EPSILON = 1.01
#: seconds beyond ``stale_after_seconds`` after which a mirror of a dead source region
#: must read stale: the destination's last read may have finished just after the kill
BLIND_MARGIN = 2.0


class InvariantViolation(AssertionError):
    """An invariant did not hold.

    Attributes:
        invariant: ``I1`` .. ``I4``.
        detail: what was seen.
    """

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail


def record_violation(violations: list[InvariantViolation], invariant: str,
                     detail: str) -> None:
    """Add a violation to ``violations``, unless the same one is there already."""
    v = InvariantViolation(invariant, detail)
    if all(str(v) != str(seen) for seen in violations):
        violations.append(v)


@dataclass(frozen=True, slots=True)
class ObjectFact:
    """What the source says one object of a commit is."""

    checksum: str
    size: int
    sha256: str


@dataclass
class CheckerStats:
    checks: int = 0
    commits_verified: int = 0
    objects_compared: int = 0
    partial_probes: int = 0
    write_probes: int = 0
    #: rounds in which the mirror region did not answer (killed, restarting)
    mirror_unavailable: int = 0
    #: rounds in which the source region did not answer
    source_unavailable: int = 0
    #: mirror statuses read (I6), and those read while the source region was down
    #: long enough that the mirror must read blind
    status_reads: int = 0
    blind_reads: int = 0
    #: I8: reads of a group's member heads judged, sandwiches that moved under the
    #: read (tried again), cuts checked against the source's history
    group_reads: int = 0
    group_reads_moved: int = 0
    cuts_checked: int = 0


@dataclass
class ApiMirrorChecker:
    """Checks one mirror against its source repository, round after round.

    Args:
        source: client of the source region.
        source_repo: the source repository.
        mirror: client of the destination region.
        mirror_repo: the mirror repository's name.
        collect: keep going after a violation (record it in :attr:`violations`)
            instead of raising :class:`InvariantViolation`.
    """

    source: RegionClient
    source_repo: str
    mirror: RegionClient
    mirror_repo: str
    collect: bool = False
    violations: list[InvariantViolation] = field(default_factory=list)
    stats: CheckerStats = field(default_factory=CheckerStats)
    #: branch -> every head the source branch was seen at
    source_heads: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    #: tag -> every commit the source tag was seen at
    source_tags: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    #: branch -> the mirror head seen last
    mirror_heads: dict[str, str] = field(default_factory=dict)
    #: set once the mirror is detached: it is an ordinary repository from then on
    detached: bool = False
    #: branch -> head of an adopted old source, served until a promotion replaces it
    legacy_heads: dict[str, str] = field(default_factory=dict)
    #: tag -> commit of an adopted old source, likewise
    legacy_tags: dict[str, str] = field(default_factory=dict)
    _seq: itertools.count[int] = field(default_factory=itertools.count)
    _first_seen: dict[tuple[str, str], int] = field(default_factory=dict)
    _resets: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    _last_source: dict[str, str | None] = field(default_factory=dict)
    _commits: dict[str, dict[str, Any]] = field(default_factory=dict)
    _facts: dict[str, dict[str, ObjectFact]] = field(default_factory=dict)
    _blobs: dict[tuple[str, str], str] = field(default_factory=dict)
    _verified: set[str] = field(default_factory=set)
    _failed: set[str] = field(default_factory=set)

    # --------------------------------------------------------------- source side
    def share_source(self, other: ApiMirrorChecker) -> None:
        """Keep one cache of the source's commit records and object contents with
        ``other``, a checker of another mirror of the same source repository (a commit
        and the bytes of its objects are the same whichever mirror they are checked for).
        """
        if (other.source.endpoint, other.source_repo) != (self.source.endpoint,
                                                          self.source_repo):
            raise ValueError("the checkers' sources differ")
        self._commits, self._facts, self._blobs = other._commits, other._facts, other._blobs

    def _tick(self) -> int:
        return next(self._seq)

    def source_moved(self, branch: str, commit_id: str | None, *, reset: bool = False) -> None:
        """Tell the checker of a move the caller made (``None``: the branch was deleted).

        The new head's commits and data are recorded at once, so they can be checked
        against even if the source region dies right after.
        """
        seq = self._tick()
        if reset or commit_id is None:
            self._resets[branch].append(seq)
        if commit_id is not None:
            self._record_head(branch, commit_id, seq)
        self._last_source[branch] = commit_id

    def _record_head(self, branch: str, commit_id: str, seq: int) -> None:
        self.source_heads[branch].add(commit_id)
        self._first_seen.setdefault((branch, commit_id), seq)
        self._learn_commits(commit_id)
        self.facts(commit_id)

    def observe_source(self) -> bool:
        """Read the source's branches and tags; False when the source does not answer."""
        try:
            branches = self.source.branches(self.source_repo)
            tags = self.source.tags(self.source_repo)
        except ApiError as e:
            if e.unreachable:
                self.stats.source_unavailable += 1
                return False
            raise
        seq = self._tick()
        for name, head in branches.items():
            last = self._last_source.get(name)
            if last is not None and last != head and not self._is_ancestor(last, head):
                self._resets[name].append(seq)  # reset (or deleted and re-created)
            self._record_head(name, head, seq)
            self._last_source[name] = head
        for name, last in list(self._last_source.items()):
            if name not in branches and last is not None:
                self._resets[name].append(seq)  # deleted
                self._last_source[name] = None
        for name, cid in tags.items():
            if cid not in self.source_tags[name]:
                self.source_tags[name].add(cid)
                self._learn_commits(cid)
                self.facts(cid)
        return True

    def commit(self, commit_id: str) -> dict[str, Any]:
        """A commit record: cached, else from the source, else from the mirror."""
        rec = self._commits.get(commit_id)
        if rec is None:
            try:
                rec = self.source.get_commit(self.source_repo, commit_id)
            except ApiError as e:
                if not e.unreachable:
                    raise
                rec = self.mirror.get_commit(self.mirror_repo, commit_id)
            self._commits[commit_id] = rec
        return rec

    def _learn_commits(self, head: str) -> None:
        """Fetch the first-parent chain of ``head`` down to a commit already known."""
        cid: str | None = head
        while cid and cid not in self._commits:
            parents = self.commit(cid)["parents"]
            cid = parents[0] if parents else None

    def _first_parent_closure(self, heads: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for head in heads:
            cid: str | None = head
            while cid and cid not in out:
                out.add(cid)
                parents = self.commit(cid)["parents"]
                cid = parents[0] if parents else None
        return out

    def _is_ancestor(self, ancestor: str, descendant: str) -> bool:
        seen: set[str] = set()
        todo = [descendant]
        while todo:
            cid = todo.pop()
            if cid == ancestor:
                return True
            if cid in seen:
                continue
            seen.add(cid)
            todo.extend(self.commit(cid)["parents"])
        return False

    def facts(self, commit_id: str) -> dict[str, ObjectFact]:
        """The source's objects of ``commit_id``: path -> checksum, size and SHA-256."""
        known = self._facts.get(commit_id)
        if known is not None:
            return known
        out: dict[str, ObjectFact] = {}
        for stat in self.source.list_objects(self.source_repo, commit_id):
            key = (stat["physical_address"], stat["checksum"])
            digest = self._blobs.get(key)
            if digest is None:
                data = self.source.read_object(self.source_repo, commit_id, stat["path"])
                digest = hashlib.sha256(data).hexdigest()
                self._blobs[key] = digest
            out[stat["path"]] = ObjectFact(stat["checksum"], int(stat["size_bytes"] or 0),
                                           digest)
        self._facts[commit_id] = out
        return out

    # --------------------------------------------------------------- mirror side
    def _violation(self, invariant: str, detail: str) -> None:
        if not self.collect:
            raise InvariantViolation(invariant, detail)
        record_violation(self.violations, invariant, detail)

    def check(self) -> None:
        """One round: observe the source, then check every mirror branch and tag."""
        self.stats.checks += 1
        self.observe_source()
        if self.detached:
            return
        try:
            branches = self.mirror.branches(self.mirror_repo)
            tags = self.mirror.tags(self.mirror_repo)
        except ApiError as e:
            if e.status == 404:
                return  # the mirror repository is not created yet, or deleted
            if e.unreachable:
                self.stats.mirror_unavailable += 1
                return
            raise
        try:
            self._check_branches(branches)
            self._check_tags(tags)
            self._probe_pending(branches)
        except ApiError as e:
            if e.unreachable:
                self.stats.mirror_unavailable += 1
                return
            if e.status == 404 and not self._mirror_exists():
                return  # deleted while we looked
            raise

    def _check_branches(self, branches: dict[str, str]) -> None:
        for name, head in branches.items():
            if not head:
                continue
            if self.legacy_heads.get(name, head) != head:
                del self.legacy_heads[name]  # promoted over: an ordinary mirror branch now
            allowed = self._first_parent_closure(self.source_heads.get(name, ()))
            if head not in allowed:
                # the source may have moved, and the mirror followed, between the two
                # reads of this round: look at the source once more before judging
                self.observe_source()
                allowed = self._first_parent_closure(self.source_heads.get(name, ()))
            if head not in allowed:
                if name in self.legacy_heads:
                    continue
                self._violation("I1", f"mirror branch {name} at {head}, which its source "
                                      "branch never pointed at (nor at a descendant of it)")
                continue
            prev = self.mirror_heads.get(name)
            if prev and prev != head and not self._is_ancestor(prev, head) \
                    and not self._reset_since(name, prev):
                self._violation("I3", f"mirror branch {name} moved from {prev} to "
                                      f"{head}, not a descendant, without a source reset")
            self.mirror_heads[name] = head
            self.verify_commit(head, f"branch {name}")
        for name in list(self.mirror_heads):
            if name not in branches:
                prev = self.mirror_heads.pop(name)
                if not self._reset_since(name, prev):
                    self._violation("I3", f"mirror branch {name} (at {prev}) vanished, but "
                                          "its source branch was never deleted or reset")

    def _reset_since(self, branch: str, head: str) -> bool:
        since = self._first_seen.get((branch, head), -1)
        return any(seq > since for seq in self._resets.get(branch, ()))

    def _check_tags(self, tags: dict[str, str]) -> None:
        for name, cid in tags.items():
            if self.legacy_tags.get(name, cid) != cid:
                del self.legacy_tags[name]
            if cid not in self.source_tags.get(name, ()):
                if name in self.legacy_tags:
                    continue
                self._violation("I1", f"mirror tag {name} at {cid}, never its source's")
                continue
            self.verify_commit(cid, f"tag {name}")

    def verify_commit(self, commit_id: str, what: str = "", *, force: bool = False) -> None:
        """I1/I2: the mirror's record and data of ``commit_id`` equal the source's.

        A commit that failed is reported once and not read again (unless ``force``).
        """
        if (commit_id in self._verified or commit_id in self._failed) and not force:
            return
        problem = self._commit_problem(commit_id)
        if problem is None:
            self._verified.add(commit_id)
            self.stats.commits_verified += 1
            return
        self._failed.add(commit_id)
        where = f"{what} at {commit_id}" if what else commit_id
        self._violation(problem[0], f"{where}: {problem[1]}")

    def _commit_problem(self, commit_id: str) -> tuple[str, str] | None:
        """What is wrong with the mirror's copy of a commit: (invariant, detail), or None."""
        src = self.commit(commit_id)
        try:
            rec = self.mirror.get_commit(self.mirror_repo, commit_id)
        except ApiError as e:
            if e.unreachable or not self._mirror_exists():
                raise
            return "I1", f"commit record not readable on the mirror: {e}"
        for key in ("id", "parents", "meta_range_id", "message", "committer",
                    "creation_date", "metadata"):
            if rec.get(key) != src.get(key):
                return "I1", f"commit field {key}: {rec.get(key)!r} != {src.get(key)!r}"
        facts = self.facts(commit_id)
        try:
            listing = {s["path"]: s for s in self.mirror.list_objects(self.mirror_repo,
                                                                      commit_id)}
        except ApiError as e:
            if e.unreachable or not self._mirror_exists():
                raise
            return "I2", f"the mirror does not serve the commit: {e}"
        if sorted(listing) != sorted(facts):
            extra = sorted(set(listing) - set(facts))[:5]
            lacking = sorted(set(facts) - set(listing))[:5]
            return "I2", f"listings differ (mirror extra {extra}, lacking {lacking})"
        for path, fact in facts.items():
            stat = listing[path]
            if stat["checksum"] != fact.checksum or int(stat["size_bytes"] or 0) != fact.size:
                return "I2", (f"{path} has checksum/size {stat['checksum']}/"
                              f"{stat['size_bytes']}, source {fact.checksum}/{fact.size}")
            try:
                data = self.mirror.read_object(self.mirror_repo, commit_id, path)
            except ApiError as e:
                if e.unreachable or not self._mirror_exists():
                    raise
                return "I2", f"{path} listed but not readable: {e}"
            self.stats.objects_compared += 1
            if hashlib.sha256(data).hexdigest() != fact.sha256:
                return "I2", f"{path} differs from the source's bytes"
        return None

    def _probe_pending(self, branches: dict[str, str]) -> None:
        """I2: a source head not promoted yet is refused or served whole, never half."""
        for name, head in self._last_source.items():
            if head is None or branches.get(name) == head or head in self._verified:
                continue
            self.stats.partial_probes += 1
            try:
                self.mirror.list_objects(self.mirror_repo, head)
            except ApiError as e:
                if e.status == 404 or e.unreachable:
                    continue
                self._violation("I2", f"pending head {head} of {name}: {e}")
                continue
            # served: then it must be served completely and identically
            self.verify_commit(head, f"pending head of {name}")

    # ------------------------------------------------------------------- I4
    def probe_read_only(self) -> None:
        """I4: every client write to the mirror is refused with 403, and nothing lands."""
        if self.detached:
            return
        repo = self.mirror_repo
        try:
            branches = self.mirror.branches(repo)
            tags = self.mirror.tags(repo)
        except ApiError as e:
            if e.status == 404 or e.unreachable:
                return
            raise
        branch = next(iter(sorted(branches)), "main")
        base = f"/api/v1/repositories/{repo}"
        attempts: list[tuple[str, str, dict[str, Any]]] = [
            ("POST", f"{base}/branches/{branch}/objects",
             {"params": {"path": PROBE}, "content": b"must not land"}),
            ("DELETE", f"{base}/branches/{branch}/objects", {"params": {"path": PROBE}}),
            ("POST", f"{base}/branches/{branch}/commits",
             {"json": {"message": "i4 probe", "allow_empty": True}}),
            ("POST", f"{base}/branches", {"json": {"name": PROBE, "source": branch}}),
            ("PUT", f"{base}/branches/{branch}/hard_reset", {"params": {"ref": branch}}),
            ("DELETE", f"{base}/branches/{branch}", {}),
            ("POST", f"{base}/tags", {"json": {"id": PROBE, "ref": branch}}),
            ("DELETE", base, {}),
        ]
        attempts += [("DELETE", f"{base}/tags/{t}", {}) for t in sorted(tags)[:1]]
        for method, path, kwargs in attempts:
            self.stats.write_probes += 1
            try:
                self.mirror.request(method, path, expect=(403,), **kwargs)
            except ApiError as e:
                if e.unreachable:
                    return
                if e.status == 404 and not self._mirror_exists():
                    return  # the mirror was deleted meanwhile
                self._violation("I4", f"{method} {path} on the mirror answered {e.status} "
                                      f"({e.message}), not 403")
        self._probe_gateway(branch)
        try:
            landed = [what for what, present in (
                ("object", self._exists(f"{base}/refs/{branch}/objects/stat",
                                        {"path": PROBE})),
                ("branch", self._exists(f"{base}/branches/{PROBE}", {})),
                ("tag", self._exists(f"{base}/tags/{PROBE}", {}))) if present]
        except ApiError as e:
            if e.unreachable:
                return
            raise
        if landed:
            self._violation("I4", f"refused writes left a probe {', '.join(landed)} behind")

    def _probe_gateway(self, branch: str) -> None:
        """A PUT through the S3 gateway (bucket = repository) is refused too."""
        import boto3
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError, ClientError

        key, secret = self.mirror.credentials
        gateway = boto3.client(
            "s3", endpoint_url=self.mirror.endpoint, aws_access_key_id=key,
            aws_secret_access_key=secret, region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
        self.stats.write_probes += 1
        try:
            gateway.put_object(Bucket=self.mirror_repo, Key=f"{branch}/{PROBE}",
                               Body=b"must not land")
        except ClientError as e:
            status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            if status not in (403, 404) or (status == 404 and self._mirror_exists()):
                self._violation("I4", f"S3 gateway PUT on the mirror answered {status}, "
                                      "not 403")
            return
        except BotoCoreError:
            return  # not answering (restarting)
        finally:
            gateway.close()
        self._violation("I4", "S3 gateway PUT on the mirror succeeded")

    def _exists(self, path: str, params: dict[str, str]) -> bool:
        return self.mirror.request("GET", path, expect=(200, 404),
                                   params=params).status_code == 200

    def _mirror_exists(self) -> bool:
        try:
            self.mirror.get_repository(self.mirror_repo)
        except ApiError as e:
            if e.status == 404:
                return False
            raise
        return True

    # ------------------------------------------------------------------- I6
    def check_status(self, mirror_id: str, *, source_down_since: float | None = None
                     ) -> dict[str, Any] | None:
        """I6: read the mirror's status in its region and check that its lag is honest.

        Args:
            mirror_id: the (active) mirror.
            source_down_since: when the source region's server was killed (Unix
                seconds), if it has been down since.

        Returns:
            The status, or None when the mirror's region did not answer.
        """
        if self.detached:
            return None
        before = time.time()
        try:
            status = self.mirror.mirror_status(self.mirror_repo, mirror_id)
        except ApiError as e:
            if e.unreachable or e.status == 404:
                return None
            raise
        self.stats.status_reads += 1
        if status["mirror"]["state"] != "active":
            return status
        stale_after = float(status.get("stale_after_seconds") or 0.0)
        down = before - source_down_since if source_down_since is not None else 0.0
        blind = source_down_since is not None and down > stale_after + BLIND_MARGIN
        self.stats.blind_reads += blind
        for row in status["branches"]:
            branch, lag = row["branch"], float(row["lag_seconds"])
            confirmed = row.get("source_confirmed_at")
            if confirmed is not None and lag < before - confirmed - LAG_EPSILON:
                self._violation("I6", f"branch {branch} shows a lag of {lag:.3f}s, but "
                                      f"its source was last confirmed "
                                      f"{before - confirmed:.1f}s ago")
            if blind and (row["current"] or not row["stale"]):
                self._violation("I6", f"branch {branch} reads current={row['current']}, "
                                      f"stale={row['stale']} while its source region has "
                                      f"been down for {down:.1f}s (stale after "
                                      f"{stale_after:.0f}s)")
        return status

    # ---------------------------------------------------------------- progress
    def in_sync(self) -> bool:
        """Whether every source branch and tag is on the mirror at the same commit."""
        try:
            source = self.source.branches(self.source_repo)
            mirror = self.mirror.branches(self.mirror_repo)
            if self.source.tags(self.source_repo) != self.mirror.tags(self.mirror_repo):
                return False
        except ApiError:
            return False
        return source == {b: c for b, c in mirror.items() if c}

    def status_caught_up(self, mirror_id: str) -> bool:
        """Whether the mirror's status view agrees: every source branch has a progress
        row whose source and mirror heads are its head, nothing pending, and current
        (the source read recently and found equal, see replication.freshness).

        The row is written just after the promotion, so it may trail :meth:`in_sync`.
        """
        try:
            heads = self.source.branches(self.source_repo)
            status = self.source.mirror_status(self.source_repo, mirror_id)
        except ApiError:
            return False
        rows = {b["branch"]: b for b in status["branches"]}
        return status["mirror"]["state"] == "active" and set(rows) == set(heads) and all(
            rows[b]["source_head"] == rows[b]["mirror_head"] == head
            and rows[b]["pending_commit"] is None and rows[b]["current"]
            for b, head in heads.items())

    def wait_in_sync(self, timeout: float = 60.0, what: str = "mirror in sync") -> None:
        """Check round after round until :meth:`in_sync` (AssertionError on timeout)."""
        from lakefs_testing.waiting import wait_for

        wait_for(self.in_sync, timeout, 0.1, what=what, check=self.check)
        self.check()

    # ---------------------------------------------------------------- summary
    def summary(self) -> str:
        s = self.stats
        return (f"{s.checks} checks, {s.commits_verified} commits verified, "
                f"{s.objects_compared} objects compared, {s.partial_probes} pending-head "
                f"probes, {s.write_probes} refused-write probes, {len(self.violations)} "
                f"violations (mirror unavailable {s.mirror_unavailable}x, source "
                f"{s.source_unavailable}x)")


# ----------------------------------------------------------------------------- I7
#: a region's client and the repository there
Place = tuple[RegionClient, str]


@dataclass
class CommitGraph:
    """Parents of commits, read from the regions that have them (a commit never changes,
    so what one region said holds for all)."""

    parents: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def parents_of(self, commit_id: str, places: Sequence[Place]) -> tuple[str, ...] | None:
        """The commit's parents, from the first place that has it; None if none has it."""
        known = self.parents.get(commit_id)
        if known is not None:
            return known
        for client, repo in places:
            try:
                record = client.get_commit(repo, commit_id)
            except ApiError as e:
                if e.status == 404 or e.unreachable:
                    continue
                raise
            known = self.parents[commit_id] = tuple(record["parents"])
            return known
        return None

    def closure(self, heads: Iterable[str], places: Sequence[Place]) -> set[str]:
        """Every commit reachable from ``heads`` (through all parents)."""
        out: set[str] = set()
        todo = [h for h in heads if h]
        while todo:
            cid = todo.pop()
            if cid in out:
                continue
            parents = self.parents_of(cid, places)
            if parents is None:
                continue
            out.add(cid)
            todo.extend(parents)
        return out


@dataclass
class HandoverAudit:
    """I7: what a switchover or failback must not lose (see the module doc).

    Args:
        violations: where violations go (shared with the run's mirror checkers).
    """

    violations: list[InvariantViolation]
    graph: CommitGraph = field(default_factory=CommitGraph)
    #: acknowledged commits checked after a handover
    commits_checked: int = 0

    def required(self, acknowledged: dict[str, str], refs: Iterable[str],
                 places: Sequence[Place]) -> dict[str, str]:
        """The acknowledged commits (id -> branch) that ``refs`` (the old primary's heads
        and tags) still reach."""
        reached = self.graph.closure(refs, places)
        return {cid: branch for cid, branch in acknowledged.items() if cid in reached}

    @staticmethod
    def present(place: Place, commits: Iterable[str]) -> set[str]:
        """Which of ``commits`` the repository at ``place`` can read."""
        client, repo = place
        out = set()
        for cid in commits:
            try:
                client.get_commit(repo, cid)
            except ApiError as e:
                if e.status != 404:
                    raise
                continue
            out.add(cid)
        return out

    def check(self, what: str, required: dict[str, str], new: Place, *,
              excused: Iterable[str] = ()) -> None:
        """Every ``required`` commit is reachable from the refs of ``new`` and readable
        there, or (``excused``) readable there."""
        client, repo = new
        refs = [*client.branches(repo).values(), *client.tags(repo).values()]
        reached = self.graph.closure(refs, [new])
        excused = set(excused)
        readable = self.present(new, required)
        for cid, branch in sorted(required.items()):
            self.commits_checked += 1
            if cid not in readable:
                record_violation(self.violations, "I7", f"{what}: commit {cid} "
                                 f"acknowledged on {branch} is not in the new primary")
            elif cid not in reached and cid not in excused:
                record_violation(self.violations, "I7", f"{what}: commit {cid} "
                                 f"acknowledged on {branch} is in the new primary, but no "
                                 "branch or tag reaches it")

    def check_same_refs(self, what: str, heads: dict[str, str], tags: dict[str, str],
                        new: Place) -> None:
        """A switchover leaves the new primary at exactly the old primary's refs."""
        client, repo = new
        for kind, mine, theirs in (("branch", heads, client.branches(repo)),
                                   ("tag", tags, client.tags(repo))):
            for name in sorted(set(mine) | set(theirs)):
                if mine.get(name) != theirs.get(name):
                    record_violation(self.violations, "I7", f"{what}: {kind} {name} at "
                                     f"{theirs.get(name)} in the new primary, the old "
                                     f"primary's at {mine.get(name)}")


# ----------------------------------------------------------------------------- I8
#: a source branch: (repository, branch)
BranchKey = tuple[str, str]


@dataclass
class SourceTimeline:
    """Every head the source branches had, in the order one writer moved them.

    The run's workload is the only writer of the source repositories and moves one
    branch at a time, so a move it reports (after the source acknowledged it) is
    ordered before its next one: a snapshot of the source, whenever it was read, saw
    the heads of one instant of this timeline.
    """

    #: branch -> (tick, head from then on; None: deleted), in order
    spans: dict[BranchKey, list[tuple[int, str | None]]] = field(
        default_factory=lambda: defaultdict(list))
    _ticks: itertools.count[int] = field(default_factory=itertools.count)

    def moved(self, repo: str, branch: str, head: str | None) -> None:
        spans = self.spans[(repo, branch)]
        if not spans or spans[-1][1] != head:
            spans.append((next(self._ticks), head))

    def follow(self, repo: str) -> TimelineObserver:
        """What a :class:`~e2e.workload.SourceDriver` of ``repo`` reports moves to."""
        return TimelineObserver(self, repo)

    def head_at(self, key: BranchKey, tick: int) -> str | None:
        head = None
        for start, h in self.spans.get(key, ()):
            if start > tick:
                break
            head = h
        return head

    def held_together(self, heads: Mapping[BranchKey, str]) -> bool:
        """Whether the branches were at ``heads`` all at one moment."""
        instants = {start for key in heads for start, _ in self.spans.get(key, ())}
        return any(all(self.head_at(key, t) == h for key, h in heads.items())
                   for t in instants)


@dataclass
class TimelineObserver:
    """A driver's moves of one repository, into a :class:`SourceTimeline`."""

    timeline: SourceTimeline
    repo: str

    def source_moved(self, branch: str, commit_id: str | None, *, reset: bool = False) -> None:
        self.timeline.moved(self.repo, branch, commit_id)

    def observe_source(self) -> bool:
        return True


@dataclass(frozen=True)
class GroupMemberRef:
    """One member of a group as a destination region serves it."""

    mirror_id: str
    source_repo: str
    mirror_repo: str
    branch: str


#: the group's cuts after a sequence number: [(sequence, {mirror id: commit id})]
CutReader = Callable[[int], list[tuple[int, dict[str, str]]]]


@dataclass
class GroupCutChecker:
    """I8 for one group in one destination region (see the module doc).

    Args:
        mirror: client of the destination region.
        region: its name (for messages).
        group_id: the group.
        members: its members, in the group's order.
        read_cuts: the group's cuts (kept by the mirrors table, the last 100).
        timeline: the source's history, to check each cut against (optional).
    """

    mirror: RegionClient
    region: str
    group_id: str
    members: Sequence[GroupMemberRef]
    read_cuts: CutReader
    timeline: SourceTimeline | None = None
    violations: list[InvariantViolation] = field(default_factory=list)
    stats: CheckerStats = field(default_factory=CheckerStats)
    #: judge what is served only from when the group serves its cuts (set once the
    #: group was created and caught up: lone mirrors promoted before it existed)
    armed: bool = False
    cuts: dict[int, dict[str, str]] = field(default_factory=dict)
    #: the newest cut the served heads could be, at the last read
    served_at_least: int = 0

    def learn_cuts(self) -> None:
        """Read the cuts taken since the last known; each must be a source snapshot."""
        last = max(self.cuts, default=0)
        for sequence, heads in self.read_cuts(last):
            self.cuts[sequence] = heads
            self._check_cut(sequence, heads)

    def _check_cut(self, sequence: int, heads: dict[str, str]) -> None:
        if self.timeline is None:
            return
        self.stats.cuts_checked += 1
        by_branch = {(m.source_repo, m.branch): heads[m.mirror_id] for m in self.members
                     if m.mirror_id in heads}
        if not self.timeline.held_together(by_branch):
            record_violation(self.violations, "I8", f"group {self.group_id}: cut {sequence} "
                             f"holds {self._describe(heads)}, heads the source's member "
                             "branches never had at one moment")

    def _describe(self, heads: Mapping[str, str]) -> str:
        return ", ".join(f"{m.source_repo}/{m.branch}@{heads.get(m.mirror_id, '-')[:12]}"
                         for m in self.members)

    def _head(self, member: GroupMemberRef) -> str | None:
        try:
            return self.mirror.branch_head(member.mirror_repo, member.branch)
        except ApiError as e:
            if e.unreachable or e.status == 404:
                return None
            raise

    def read_served(self, attempts: int = 3) -> dict[str, str] | None:
        """The member heads served at one instant (mirror id -> commit id); None when the
        region does not answer, or the heads kept moving under the reads."""
        for _ in range(attempts):
            first = [self._head(m) for m in self.members]
            if any(h is None for h in first):
                return None
            again = [self._head(m) for m in self.members[:-1]]
            if again == first[:-1]:
                return {m.mirror_id: str(h) for m, h in zip(self.members, first, strict=True)}
            self.stats.group_reads_moved += 1
        return None

    def matching(self, served: Mapping[str, str]) -> list[int]:
        """The known cuts whose heads are the ``served`` ones."""
        return [seq for seq, heads in sorted(self.cuts.items())
                if heads and all(served.get(mid) == cid for mid, cid in heads.items())]

    def check(self) -> None:
        """One round: new cuts, then (once armed) one read of the members' heads."""
        self.learn_cuts()
        if not self.armed:
            return
        served = self.read_served()
        if served is None:
            return
        self.stats.group_reads += 1
        found = self.matching(served)
        if not found:  # a cut taken and promoted since the cuts were read
            self.learn_cuts()
            found = self.matching(served)
        if not found:
            record_violation(self.violations, "I8", f"group {self.group_id} in "
                             f"{self.region} serves {self._describe(served)}, heads of no "
                             f"one cut (cuts {min(self.cuts, default=0)}.."
                             f"{max(self.cuts, default=0)} known)")
            return
        if found[-1] < self.served_at_least:
            record_violation(self.violations, "I8", f"group {self.group_id} in "
                             f"{self.region} went back from cut {self.served_at_least} to "
                             f"cut {found[-1]} ({self._describe(served)})")
        self.served_at_least = max(self.served_at_least, found[0])

    def served_cut(self) -> int | None:
        """The cut whose heads are served now (the newest such), if one is."""
        served = self.read_served()
        if served is None:
            return None
        self.learn_cuts()
        found = self.matching(served)
        return found[-1] if found else None
