"""The replication API's mirror groups: ``/service/replication/v1/groups``.

A group is created, changed, cut and deleted in its source region (the region whose
sidecar writes its rows); it is read, with its status, in either region. RBAC: changing
a group or taking a cut needs ``fs:MirrorRepository`` on every member's source
repository, reading it ``fs:ReadRepository`` on each.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from lakefs_core.auth import rbac
from lakefs_core.auth.service import Principal
from lakefs_core.errors import ConflictError, ValidationError
from mirrors_db.errors import GroupNotFoundError, MirrorNotFoundError
from mirrors_db.models import (
    GroupCut,
    GroupMember,
    GroupProgress,
    GroupSpec,
    Mirror,
    MirrorGroup,
    MirrorState,
)
from replication.forwarding import FORWARDED, PREFIX, forward
from replication.freshness import BranchFreshness, group_freshness
from replication.group_handover import GroupHandover, GroupHandoverResult, retire_group
from replication.handover import HandoverRequest
from replication.sidecar import Sidecar, shown_state


class MemberIn(BaseModel):
    mirror_id: str = Field(max_length=256)
    branch: str | None = Field(
        default=None, max_length=256,
        description="the branch the group moves; the source repository's default branch "
        "when unset")


class GroupCreation(BaseModel):
    name: str = Field(max_length=256)
    region: str = Field(max_length=256, description="destination region of every member")
    members: list[MemberIn] = Field(default_factory=list, max_length=100)


def _ts(value: datetime | None) -> int | None:
    return int(value.timestamp()) if value else None


def group_json(g: MirrorGroup) -> dict[str, Any]:
    return {"id": g.id, "name": g.name, "source_region": g.source_region,
            "region": g.destination_region,
            "members": [{"mirror_id": m.mirror_id, "branch": m.branch} for m in g.members],
            "last_cut": g.last_cut, "source_read_at": _ts(g.heads_read_at),
            "creation_date": _ts(g.created_at), "updated_at": _ts(g.updated_at)}


def cut_json(c: GroupCut) -> dict[str, Any]:
    return {"sequence": c.sequence, "taken_at": _ts(c.taken_at), "reason": c.reason,
            "heads": [{"mirror_id": m.mirror_id, "branch": m.branch, "commit_id": cid}
                      for m, cid in c.heads.items()]}


@dataclass(frozen=True)
class GroupView:
    """A group as its status shows it at one instant."""

    group: MirrorGroup
    progress: GroupProgress
    cuts: dict[int, GroupCut]  # the served cut and those after it
    mirrors: dict[str, Mirror]  # the member mirrors, by id
    fresh: BranchFreshness
    now: float

    @classmethod
    def read(cls, sidecar: Sidecar, g: MirrorGroup, now: float) -> GroupView:
        org = sidecar.org
        progress = sidecar.table.get_group_progress(org, g.id) or GroupProgress(org, g.id)
        cuts = {c.sequence: c for c in sidecar.table.list_cuts(
            org, g.id, after=max(0, progress.served_cut - 1))}
        mirrors = {}
        for mirror_id in dict.fromkeys(m.mirror_id for m in g.members):
            with contextlib.suppress(MirrorNotFoundError):  # a handover forms it first
                mirrors[mirror_id] = sidecar.table.get_mirror(org, mirror_id)
        return cls(g, progress, cuts, mirrors,
                   group_freshness(g, progress, now, sidecar.stale_after), now)

    @property
    def served(self) -> GroupCut | None:
        return self.cuts.get(self.progress.served_cut)

    @property
    def waiting(self) -> GroupCut | None:
        return None if self.detached else self.cuts.get(self.progress.waiting_cut)

    @property
    def state(self) -> str:
        """The member mirrors' state when they share it, else ``mixed``."""
        states = {self.member_state(i) for i in dict.fromkeys(
            m.mirror_id for m in self.group.members)}
        return states.pop() if len(states) == 1 else "mixed"

    def member_state(self, mirror_id: str) -> str:
        mirror = self.mirrors.get(mirror_id)
        return shown_state(mirror).value if mirror else MirrorState.CREATING.value

    @property
    def detached(self) -> bool:
        return self.state == MirrorState.DETACHED.value

    @property
    def current(self) -> bool:
        # a group with a member that does not follow its source follows nothing
        return self.fresh.current and self.state == MirrorState.ACTIVE.value

    def status_json(self, sidecar: Sidecar) -> dict[str, Any]:
        g, progress, served, waiting = self.group, self.progress, self.served, self.waiting
        return {
            "group": group_json(g),
            "state": self.state,
            "served_cut": cut_json(served) if served else None,
            "served_at": _ts(progress.served_at),
            "latest_cut": g.last_cut,
            "waiting": None if waiting is None else {
                "cut": cut_json(waiting), "waiting_for": progress.waiting_for},
            "lag_seconds": round(self.fresh.lag_seconds, 3),
            "stale": self.fresh.stale,
            "current": self.current,
            "stale_after_seconds": sidecar.stale_after,
            "error": progress.error or sidecar.last_errors.get(f"group:{g.id}", ""),
            "members": [{"mirror_id": m.mirror_id, "branch": m.branch,
                         "repository": getattr(self.mirrors.get(m.mirror_id), "name", ""),
                         "source_repository": getattr(self.mirrors.get(m.mirror_id),
                                                      "source_repository", ""),
                         "state": self.member_state(m.mirror_id),
                         "served_head": served.heads.get(m) if served else None,
                         "waiting_head": waiting.heads.get(m) if waiting else None}
                        for m in g.members],
        }

    def branch_rows(self, mirror_id: str) -> list[dict[str, Any]]:
        """The status rows of the mirror's branches this group moves, shaped as a mirror
        status's branches: what the group serves, its lag and freshness (the mirror's own
        rounds leave these branches alone)."""
        served, waiting = self.served, self.waiting
        latest = self.cuts.get(self.group.last_cut)
        rows = []
        for m in self.group.members:
            if m.mirror_id != mirror_id:
                continue
            head = served.heads.get(m) if served else None
            pending = waiting.heads.get(m) if waiting else None
            rows.append({
                "branch": m.branch,
                "source_head": latest.heads.get(m) if latest else None,
                "mirror_head": head,
                "pending_commit": pending if pending != head else None,
                "missing_ranges": 0, "missing_objects": 0,
                "lag_seconds": round(self.fresh.lag_seconds, 3),
                "stale": self.fresh.stale,
                "current": self.current,
                "source_seen_at": _ts(self.group.heads_read_at),
                "source_confirmed_at": int(self.now - self.fresh.lag_seconds),
                "promoted_at": _ts(self.progress.served_at),
                "error": self.progress.error,
                "group": {"id": self.group.id, "name": self.group.name,
                          "cut": self.progress.served_cut,
                          "waiting_for": self.progress.waiting_for if pending else ""},
            })
        return rows


def grouped_branch_rows(sidecar: Sidecar, mirror: Mirror, now: float,
                        groups: list[MirrorGroup]) -> dict[str, dict[str, Any]]:
    """Per branch of ``mirror`` that one of ``groups`` moves, its status row (see
    :meth:`GroupView.branch_rows`)."""
    rows: dict[str, dict[str, Any]] = {}
    for g in groups:
        if any(m.mirror_id == mirror.id for m in g.members):
            rows.update((r["branch"], r)
                        for r in GroupView.read(sidecar, g, now).branch_rows(mirror.id))
    return rows


def result_json(r: GroupHandoverResult) -> dict[str, Any]:
    """The API's shape of what a group detach, switchover or failback did."""
    from replication.api import mirror_json  # the API's shape of a mirror

    return {"group": group_json(r.group), "cut": cut_json(r.cut) if r.cut else None,
            "detached": [mirror_json(m) for m in r.detached],
            "mirrors": [mirror_json(m) for m in r.mirrors],
            "kept": [{"mirror_id": mirror_id, **k.as_json()}
                     for mirror_id, kept in r.kept.items() for k in kept],
            "discarded_uncommitted": r.discarded, "phases": r.phases}


def add_group_routes(router: APIRouter, sidecar: Sidecar, caller: Callable[..., Principal],
                     internal: Callable[[Request], None]) -> None:
    """Register the group routes on the replication API's router (``internal`` checks
    that a request comes from another region's sidecar)."""
    org = sidecar.org

    def member_sources(g: MirrorGroup) -> list[str]:
        return sorted({sidecar.table.get_mirror(org, m.mirror_id).source_repository
                       for m in g.members})

    def check(who: Principal, action: str, repositories: list[str]) -> None:
        who.check(rbac.all_of(*(rbac.Permission(action, rbac.repository_arn(r))
                                for r in repositories)))

    def visible_group(group_id: str) -> MirrorGroup:
        g = sidecar.table.get_group(org, group_id)
        if sidecar.region not in (g.source_region, g.destination_region):
            raise GroupNotFoundError(org, group_id, f"not a group of region {sidecar.region!r}")
        return g

    def in_source(g: MirrorGroup) -> None:
        if g.source_region != sidecar.region:
            raise ValidationError(f"change group {g.id} in its source region "
                                  f"{g.source_region!r} (the region that writes it)")

    def member(body: MemberIn, destination: str, taken: set[GroupMember]) -> GroupMember:
        """A member for this region's group into ``destination``, checked."""
        m = sidecar.table.get_mirror(org, body.mirror_id)
        if m.source_region != sidecar.region or m.destination_region != destination:
            raise ValidationError(
                f"mirror {m.id} goes from {m.source_region!r} to {m.destination_region!r}; "
                f"the group's members go from {sidecar.region!r} to {destination!r}")
        if m.state not in (MirrorState.CREATING, MirrorState.ACTIVE):
            raise ValidationError(f"mirror {m.id} is {m.state.value}")
        branch = body.branch or sidecar.mirrors.repository(m.source_repository).default_branch
        new = GroupMember(m.id, branch)
        if new in taken:
            raise ConflictError(f"branch {branch!r} of mirror {m.id} is in a group already")
        return new

    def member_mirrors(g: MirrorGroup) -> list[Mirror]:
        return [sidecar.table.get_mirror(org, mirror_id)
                for mirror_id in dict.fromkeys(m.mirror_id for m in g.members)]

    def grouped_members() -> set[GroupMember]:
        return {m for g in sidecar.table.list_groups(org) for m in g.members}

    @router.post("/groups", status_code=201)
    def create_group(body: GroupCreation,
                     who: Principal = Depends(caller)) -> JSONResponse:  # noqa: B008
        if body.region == sidecar.region or body.region not in sidecar.config.dst_endpoints:
            raise ValidationError(f"region {body.region!r} is not another known region")
        taken = grouped_members()
        members = tuple(member(b, body.region, taken) for b in body.members)
        sources = sorted({sidecar.table.get_mirror(org, m.mirror_id).source_repository
                          for m in members})
        check(who, rbac.MIRROR_REPOSITORY, sources)
        g = sidecar.table.create_group(GroupSpec(org, body.name, sidecar.region, body.region,
                                                 members))
        sidecar.source_index.add_group(g)
        if members:
            sidecar.group_cutter.take(g.id, "moved")
            g = sidecar.table.get_group(org, g.id)
        return JSONResponse(group_json(g), status_code=201)

    @router.get("/groups")
    def list_groups(who: Principal = Depends(caller)) -> dict[str, Any]:  # noqa: B008
        """The groups whose source or destination is this region and all of whose
        members' source repositories the caller may read."""
        results = []
        for g in sidecar.table.list_groups(org):
            if sidecar.region not in (g.source_region, g.destination_region):
                continue
            if all(who.allowed(rbac.Permission(rbac.READ_REPOSITORY, rbac.repository_arn(r)))
                   for r in member_sources(g)):
                results.append(group_json(g))
        return {"results": results}

    @router.get("/groups/{group_id}")
    def read_group(group_id: str, who: Principal = Depends(caller)) -> dict[str, Any]:  # noqa: B008
        g = visible_group(group_id)
        check(who, rbac.READ_REPOSITORY, member_sources(g))
        return group_json(g)

    @router.delete("/groups/{group_id}", status_code=204)
    def delete_group(group_id: str, who: Principal = Depends(caller)) -> Response:  # noqa: B008
        g = visible_group(group_id)
        check(who, rbac.MIRROR_REPOSITORY, member_sources(g))
        in_source(g)
        sidecar.table.delete_group(org, g.id)
        return Response(status_code=204)

    @router.post("/groups/{group_id}/members")
    def add_member(group_id: str, body: MemberIn,
                   who: Principal = Depends(caller)) -> dict[str, Any]:  # noqa: B008
        g = visible_group(group_id)
        in_source(g)
        new = member(body, g.destination_region, grouped_members())
        check(who, rbac.MIRROR_REPOSITORY,
              sorted({*member_sources(g),
                      sidecar.table.get_mirror(org, new.mirror_id).source_repository}))
        g = sidecar.table.update_group(replace(g, members=(*g.members, new)))
        sidecar.source_index.add_group(g)
        sidecar.group_cutter.take(g.id, "moved")
        return group_json(sidecar.table.get_group(org, g.id))

    @router.post("/groups/{group_id}/cuts", status_code=201)
    def take_cut(group_id: str, who: Principal = Depends(caller)) -> JSONResponse:  # noqa: B008
        """Mark "these commits belong together": the member heads as they are now."""
        g = visible_group(group_id)
        check(who, rbac.MIRROR_REPOSITORY, member_sources(g))
        in_source(g)
        cut = sidecar.group_cutter.take(g.id, "requested")
        if cut is None:
            raise ValidationError(f"group {g.id}: no member branch has a head yet")
        return JSONResponse(cut_json(cut), status_code=201)

    @router.get("/groups/{group_id}/status")
    def group_status(group_id: str, who: Principal = Depends(caller)) -> dict[str, Any]:  # noqa: B008
        g = visible_group(group_id)
        check(who, rbac.READ_REPOSITORY, member_sources(g))
        return GroupView.read(sidecar, g, time.time()).status_json(sidecar)

    # ------------------------------------------------------------------ handover
    def handover(group_id: str, request: Request, body: HandoverRequest | None,
                 who: Principal, action: str) -> dict[str, Any] | Response:
        """A group switchover or failback: the caller may mirror and update every
        member's source and mirror repository (both change role); it runs in the group's
        destination region (elsewhere, forwarded there)."""
        g = visible_group(group_id)
        names = sorted({n for m in member_mirrors(g) for n in (m.source_repository, m.name)})
        who.check(rbac.all_of(*(rbac.Permission(a, rbac.repository_arn(n)) for n in names
                                for a in (rbac.MIRROR_REPOSITORY, rbac.UPDATE_REPOSITORY))))
        body = body or HandoverRequest()
        if g.destination_region != sidecar.region and not request.headers.get(FORWARDED):
            forwarded = forward(sidecar, g.destination_region, request,
                                f"{PREFIX}/groups/{g.id}/{action}", body)
            if forwarded is None:
                raise ValidationError(
                    f"{action} group {g.id} in its destination region "
                    f"{g.destination_region!r} (it could not be reached from here)")
            return forwarded
        service = GroupHandover(sidecar)
        run = service.switchover_group if action == "switchover" else service.failback_group
        return result_json(run(g, body.timeout_seconds))

    @router.post("/groups/{group_id}/detach")
    def detach_group(group_id: str, who: Principal = Depends(caller)) -> dict[str, Any]:  # noqa: B008
        """Failover of a whole group: every member mirror detached at the cut served."""
        g = visible_group(group_id)
        mirrors = member_mirrors(g)
        who.check(rbac.all_of(
            *(rbac.Permission(rbac.MIRROR_REPOSITORY, rbac.repository_arn(m.source_repository))
              for m in mirrors),
            *(rbac.Permission(rbac.UPDATE_REPOSITORY, rbac.repository_arn(m.name))
              for m in mirrors)))
        return result_json(GroupHandover(sidecar).detach_group(g))

    @router.post("/groups/{group_id}/switchover", response_model=None)
    def switchover_group(group_id: str, request: Request, body: HandoverRequest | None = None,
                         who: Principal = Depends(caller)) -> dict[str, Any] | Response:  # noqa: B008
        """Planned switchover of a whole group, RPO 0, the members at one cut throughout
        (see :mod:`replication.group_handover`)."""
        return handover(group_id, request, body, who, "switchover")

    @router.post("/groups/{group_id}/failback", response_model=None)
    def failback_group(group_id: str, request: Request, body: HandoverRequest | None = None,
                       who: Principal = Depends(caller)) -> dict[str, Any] | Response:  # noqa: B008
        """After a group detach: the old source repositories follow this region as a
        group, their heads that never arrived kept on failover branches here."""
        return handover(group_id, request, body, who, "failback")

    @router.post("/internal/groups/{group_id}/cut", include_in_schema=False)
    def internal_cut(group_id: str, request: Request) -> dict[str, Any]:
        """A switchover in the destination region asks for a cut of the frozen heads."""
        internal(request)
        g = sidecar.table.get_group(org, group_id)
        in_source(g)
        cut = sidecar.group_cutter.take(g.id, "requested")
        return {"sequence": cut.sequence if cut else 0}

    @router.post("/internal/groups/{group_id}/retire", include_in_schema=False)
    def internal_retire(group_id: str, request: Request) -> dict[str, Any]:
        """A handover retires the detached group before it forms the reverse one."""
        internal(request)
        retire_group(sidecar, group_id)
        return {}
