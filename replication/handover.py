"""Moving the primary between regions: planned switchover and failback (design 9).

Both run in the destination region of the mirror they start from (its sidecar owns
the mirror's row), talk to the other region's sidecar through its server's
``/service/replication/`` proxy with the replication user's key, and keep repository
names: the old source repository becomes the read-only mirror of the new primary
under its own name.

**Switchover** (the source region is up; RPO 0): the source repository is made
read-only, the mirror catches up until every branch (and tag the replication user may
list) equals the source, the mirror is detached, and the reverse mirror adopts the old
source repository. If the mirror cannot catch up within the timeout the source is made
writable again and nothing else changed.

**Failback** (after an unplanned failover: the mirror was detached and written to,
and the old source region is back): the old source repository is made read-only; each
of its branches (and tags) whose head the new primary lacks is kept there on a branch
named for the failover (``failover-<time>-<branch>``), its commits and their pieces
proven present first; then the reverse mirror adopts the old source repository, which
follows the new primary from then on. Nothing the old source committed is lost: a
failback that cannot keep a head refuses before anything but the freeze happened.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx
from pydantic import BaseModel, Field

from lakefs_core.errors import (
    BranchExistsError,
    ConflictError,
    LakeFSError,
    ValidationError,
)
from lakefs_core.graveler.model import CommitRecord
from mirrors_db.errors import MirrorsDatabaseError, VersionConflictError
from mirrors_db.models import Mirror, MirrorSpec, MirrorState, new_mirror_id
from replication.mirroring import MirrorFollower
from replication.source import SourceForbiddenError

if TYPE_CHECKING:
    from replication.sidecar import Sidecar

log = logging.getLogger("replication.handover")

INTERNAL = "/service/replication/v1/internal/repositories"
#: how long a switchover waits for the mirror to catch up, unless told
DEFAULT_TIMEOUT = 300.0
#: once the heads are equal, how long the switchover waits and looks again. Commits,
#: merges and resets check that the repository is writable atomically with moving the
#: branch, so none lands after the freeze; a branch or tag created or deleted by a
#: request that passed its check just before the freeze lands within this time
SETTLE = 1.0
_POLL = 0.2
_BRANCH_CHARS = re.compile(r"[^\w-]")


class HandoverRequest(BaseModel):
    """The body of a switchover or failback request."""

    timeout_seconds: float = Field(
        default=DEFAULT_TIMEOUT, gt=0, le=86_400,
        description="how long a switchover waits for the mirror to catch up (a failback for "
        "the pieces of the commits it keeps)")


class HandoverError(ConflictError):
    """A switchover or failback that could not be done; both sides are as they were
    (but for what the message says)."""


@dataclass
class Phases:
    """The time each phase of a handover took, in order."""

    started: float = field(default_factory=time.monotonic)
    done: list[dict[str, Any]] = field(default_factory=list)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.done.append({"phase": name,
                              "seconds": round(time.monotonic() - start, 3)})

    def as_json(self) -> list[dict[str, Any]]:
        return [*self.done, {"phase": "total",
                             "seconds": round(time.monotonic() - self.started, 3)}]


@dataclass(frozen=True, slots=True)
class KeptHead:
    """A head of the old source kept on the new primary by a failback."""

    ref: str
    kind: str  # "branch" or "tag"
    commit_id: str
    branch: str  # the failover branch on the new primary

    def as_json(self) -> dict[str, str]:
        return {"ref": self.ref, "kind": self.kind, "commit_id": self.commit_id,
                "branch": self.branch}


def failover_branch(stamp: str, ref: str, kind: str) -> str:
    """``failover-<time>-<ref>`` within lakeFS's branch-name rules (``tag-`` for tags)."""
    name = _BRANCH_CHARS.sub("-", ref)
    return f"failover-{stamp}-{'tag-' if kind == 'tag' else ''}{name}"[:250]


class Handover:
    """Switchover and failback of the mirrors whose destination is ``sidecar``'s region."""

    def __init__(self, sidecar: Sidecar) -> None:
        self.sidecar = sidecar
        self.region = sidecar.region

    # ------------------------------------------------------------- the other region
    def _internal(self, region: str, repository: str, action: str,
                  body: dict[str, Any]) -> dict[str, Any]:
        """Ask ``region``'s sidecar to act on one of its repositories."""
        return self._ask(region, f"{INTERNAL}/{repository}/{action}", body,
                         f"{action} repository {repository!r}")

    def _ask(self, region: str, path: str, body: dict[str, Any], what: str
             ) -> dict[str, Any]:
        """Send an internal request to ``region``'s sidecar (``what`` it is asked to do,
        for the refusal's message)."""
        creds = self.sidecar.config.source_lakefs
        url = f"{self.sidecar.config.endpoint_for(region).rstrip('/')}{path}"
        try:
            resp = self.sidecar.http.post(
                url, json=body, timeout=30,
                auth=(creds.access_key_id.get_secret_value(),
                      creds.secret_access_key.get_secret_value()))
        except httpx.HTTPError as e:
            raise HandoverError(f"region {region!r} could not be reached: {e}") from None
        if resp.status_code >= 300:
            try:
                message = resp.json().get("message", resp.text)
            except ValueError:
                message = resp.text
            raise HandoverError(f"region {region!r} refused to {what}: {message}")
        result: dict[str, Any] = resp.json()
        return result

    def _freeze(self, region: str, repository: str) -> bool:
        """Make the repository read-only; whether it was writable before."""
        answer = self._internal(region, repository, "read-only", {"read_only": True})
        return bool(answer.get("was_writable"))

    def _thaw(self, region: str, repository: str) -> None:
        try:
            self._internal(region, repository, "read-only", {"read_only": False})
        except HandoverError as e:  # said in the refusal; the operator may retry
            log.warning("repository %s in %s stays read-only: %s", repository, region, e)

    # ---------------------------------------------------------------- switchover
    def switchover(self, mirror: Mirror, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """Move the primary to this region with no commit lost (see module doc).

        Raises:
            ValidationError: the mirror is not active, or not this region's.
            HandoverError: the mirror did not catch up in time, or a region refused.
        """
        self._check_destination(mirror)
        if mirror.state is not MirrorState.ACTIVE:
            raise ValidationError(f"mirror {mirror.id} is {mirror.state.value}, not active")
        phases = Phases()
        source_region, source_repo = mirror.source_region, mirror.source_repository
        with phases.phase("freeze source"):
            was_writable = self._freeze(source_region, source_repo)
        try:
            with phases.phase("catch up"):
                self._catch_up([mirror], time.monotonic() + timeout, f"mirror {mirror.id}")
        except HandoverError as e:
            if not was_writable:  # read-only before: left as it was
                raise HandoverError(
                    f"{e}; the source was read-only before and stays so") from None
            self._thaw(source_region, source_repo)
            raise HandoverError(f"{e}; the source is writable again") from None
        except BaseException:
            if was_writable:
                self._thaw(source_region, source_repo)
            raise
        with phases.phase("detach"):
            detached = self.sidecar.detach(mirror)
        with phases.phase("reverse mirror"):
            reverse, discarded = self._reverse(detached)
        log.info("switchover", extra={"mirror": mirror.id, "reverse": reverse.id,
                                      "repository": mirror.name})
        from replication.api import mirror_json  # the API's shape of a mirror

        return {"detached": mirror_json(detached), "mirror": mirror_json(reverse),
                "discarded_uncommitted": discarded, "phases": phases.as_json()}

    def _heads(self, mirror: Mirror) -> tuple[dict[str, str], dict[str, str], bool]:
        """The source's branches and tags (tags empty when the replication user may not
        list them), and whether tags were read."""
        client = self.sidecar.client_for(mirror.source_region)
        repo = mirror.source_repository
        branches = {r.name: r.commit_id for r in client.list_branches(repo)}
        try:
            tags = {r.name: r.commit_id for r in client.list_tags(repo)}
        except SourceForbiddenError:
            return branches, {}, False
        return branches, tags, True

    def _behind(self, mirror: Mirror) -> list[str]:
        """What of the source the mirror does not serve yet, one line a ref."""
        branches, tags, with_tags = self._heads(mirror)
        mine = self.sidecar.mirrors.branches(mirror.name)
        lines = [f"branch {b}: mirror at {mine.get(b) or 'nothing'}, source at {h}"
                 for b, h in sorted(branches.items()) if mine.get(b) != h]
        if with_tags:
            my_tags = self.sidecar.mirrors.tags(mirror.name)
            lines += [f"tag {t}: mirror at {my_tags.get(t) or 'nothing'}, source at {h}"
                      for t, h in sorted(tags.items()) if my_tags.get(t) != h]
        return lines

    def _catch_up(self, mirrors: Sequence[Mirror], deadline: float, what: str,
                  nudge: Callable[[], None] | None = None) -> None:
        """Wait until the mirrors serve every head of their frozen sources, and still do
        :data:`SETTLE` seconds later (``nudge``, while they are behind, at most every
        second: asks the source to hurry)."""
        equal_since: float | None = None
        nudged = 0.0
        while True:
            behind: list[str] = []
            for mirror in mirrors:
                self.sidecar.schedule(mirror.id)
                try:
                    lines = self._behind(mirror)
                except LakeFSError as e:
                    lines = [f"source not read: {e}"]
                behind += [f"{mirror.name}: {line}" if len(mirrors) > 1 else line
                           for line in lines]
            now = time.monotonic()
            if behind:
                equal_since = None
                if nudge is not None and now - nudged >= 1.0:
                    nudge()
                    nudged = now
            elif equal_since is None:
                equal_since = now
            elif now - equal_since >= SETTLE:
                return
            if now > deadline:
                raise HandoverError(
                    f"{what} did not catch up with its source within the timeout, nothing "
                    "changed: " + "; ".join(behind[:10]))
            time.sleep(_POLL)

    # ------------------------------------------------------------------ failback
    def failback(self, mirror: Mirror, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """Make the old source repository of a detached mirror follow this region, its
        commits that never arrived here kept on failover branches (see module doc).

        Raises:
            ValidationError: the mirror is not detached, or not this region's.
            HandoverError: a head could not be kept, or a region refused.
        """
        self._check_destination(mirror)
        from replication.sidecar import shown_state

        if shown_state(mirror) is not MirrorState.DETACHED:
            raise ValidationError(f"mirror {mirror.id} is {shown_state(mirror).value}: "
                                  "failback starts from a detached mirror")
        phases = Phases()
        old_region, old_repo = mirror.source_region, mirror.source_repository
        with phases.phase("freeze old source"):
            self._freeze(old_region, old_repo)
        with phases.phase("keep diverged heads"):
            kept = self._keep_diverged(mirror, time.monotonic() + timeout)
        with phases.phase("reverse mirror"):
            reverse, discarded = self._reverse(mirror)
        log.info("failback", extra={"mirror": mirror.id, "reverse": reverse.id,
                                    "repository": mirror.name, "kept": len(kept)})
        from replication.api import mirror_json

        return {"detached": mirror_json(mirror), "mirror": mirror_json(reverse),
                "kept": [k.as_json() for k in kept], "discarded_uncommitted": discarded,
                "phases": phases.as_json()}

    def _keep_diverged(self, mirror: Mirror, deadline: float) -> list[KeptHead]:
        """Keep every head of the old source that this region lacks on a failover
        branch here. Raises HandoverError (nothing kept yet is undone) when one
        cannot be."""
        client = self.sidecar.client_for(mirror.source_region)
        old_repo, here = mirror.source_repository, mirror.name
        mirrors = self.sidecar.mirrors
        refs = [(r.name, "branch", r.commit_id) for r in client.list_branches(old_repo)]
        try:
            refs += [(r.name, "tag", r.commit_id) for r in client.list_tags(old_repo)]
        except SourceForbiddenError as e:
            raise HandoverError(f"the old source's tags cannot be read, so they cannot be "
                                f"kept: {e}") from None
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        # decided before anything is written: a head another kept head reaches is still
        # kept on its own branch, under the name of the ref it was the head of
        diverged = [(ref, kind, head) for ref, kind, head in refs
                    if head and not mirrors.has_commit(here, head)]
        existing = mirrors.branches(here)
        kept: list[KeptHead] = []
        follower = self._copier(mirror)
        for ref, kind, head in diverged:
            branch = failover_branch(stamp, ref, kind)
            if branch in existing:
                continue
            records = client.new_commits(old_repo, head,
                                         known=lambda c: mirrors.has_commit(here, c))
            if records:
                self._prove(follower, records[-1], deadline, f"{kind} {ref}")
                mirrors.write_commits(here, records)
            try:
                mirrors.keep_branch(here, branch, head)
            except BranchExistsError:
                pass  # a failback tried again: the branch keeps this head already
            kept.append(KeptHead(ref, kind, head, branch))
        return kept

    def _copier(self, mirror: Mirror) -> MirrorFollower:
        """Proves (and for ``builtin`` copies) the old source's pieces into this region's
        repository: a follower of the old source, never promoting anything."""
        repo = self.sidecar.mirrors.repository(mirror.name)
        pseudo = replace(mirror, storage_namespace=repo.storage_namespace,
                         storage_id=repo.storage_id)
        return MirrorFollower(self.sidecar.ctx, pseudo)

    def _prove(self, follower: MirrorFollower, target: CommitRecord, deadline: float,
               what: str) -> None:
        missing = follower.prove(target)
        while missing:
            if time.monotonic() > deadline:
                raise HandoverError(
                    f"{what} of the old source cannot be kept: {len(missing)} of its pieces "
                    "are not in this region's storage (with native replication, replicate "
                    "the old source's bucket here first); the old source stays read-only "
                    "and unchanged, heads kept before this one stay on their failover "
                    "branches: run the failback again once the pieces are here")
            time.sleep(_POLL * 5)
            missing = follower.prove(target)

    # --------------------------------------------------------------- both
    def _check_destination(self, mirror: Mirror) -> None:
        if mirror.destination_region != self.region:
            raise ValidationError(f"run it in the mirror's destination region "
                                  f"{mirror.destination_region!r}")

    def _reverse(self, detached: Mirror, reverse_id: str | None = None
                 ) -> tuple[Mirror, list[str]]:
        """The mirror (``reverse_id``, new by default) of this region's (detached)
        repository into its old source repository, which the other region adopts under
        its own name (the branches whose uncommitted changes the adoption discarded come
        second); the detached mirror's row is retired (its repository stays)."""
        old_region, old_repo = detached.source_region, detached.source_repository
        reverse_id = reverse_id or new_mirror_id()
        adopted = self._internal(old_region, old_repo, "adopt", {
            "mirror_id": reverse_id, "source_region": self.region,
            "source_repository": detached.name})
        self._retire(detached)
        reverse = self.sidecar.table.create_mirror(MirrorSpec(
            organization_id=self.sidecar.org, name=old_repo, source_region=self.region,
            source_repository=detached.name, destination_region=old_region,
            storage_namespace=str(adopted["storage_namespace"]),
            storage_id=str(adopted.get("storage_id") or ""), id=reverse_id))
        self.sidecar.source_index.add(reverse)
        self.sidecar.on_ref_events([{"repository": detached.name}], None)
        return reverse, [str(b) for b in adopted.get("discarded_uncommitted") or []]

    def _retire(self, mirror: Mirror) -> None:
        """Delete a detached mirror's row (its repository stays: it is detached), so its
        name and namespace may serve the mirror in the other direction later."""
        table, current = self.sidecar.table, mirror
        for _ in range(5):
            try:
                if current.state is MirrorState.DELETED:
                    return
                nxt = (MirrorState.DELETING if current.state is not MirrorState.DELETING
                       else MirrorState.DELETED)
                current = table.update_mirror(current.with_state(nxt))
            except VersionConflictError:
                current = table.get_mirror(mirror.organization_id, mirror.id)
            except MirrorsDatabaseError as e:
                log.warning("mirror %s: row not retired: %s", mirror.id, e)
                return

