"""The sidecar's REST API: mirrors of a repository, their status, detach.

Served on ``listen_address`` under ``/service/replication/v1``; each region's server
proxies the same paths, so clients use one endpoint. Basic auth with lakeFS access
keys, checked against the region's auth tables (or ``auth.api.endpoint``); the RBAC
of each route is listed in docs/ARCHITECTURE.md ("Replication API").
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Annotated, Any

import httpx
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError
from starlette.concurrency import run_in_threadpool

from lakefs_core import ref_events
from lakefs_core.auth import rbac
from lakefs_core.auth.service import Principal, parse_basic_authorization
from lakefs_core.block.registry import namespace_parts
from lakefs_core.errors import (
    AuthenticationError,
    PayloadTooLargeError,
    RepositoryNotFoundError,
    ValidationError,
)
from lakefs_core.graveler.model import MirrorMarking
from lakefs_core.graveler.refs import validate_repository_id
from lakefs_core.web import install_error_handlers
from mirrors_db.errors import MirrorNotFoundError
from mirrors_db.models import Mirror, MirrorGroup, MirrorSpec, MirrorState
from replication.forwarding import FORWARDED, PREFIX, forward
from replication.freshness import Confirmations, branch_freshness, source_unreadable
from replication.group_api import add_group_routes, grouped_branch_rows
from replication.handover import Handover as HandoverService
from replication.handover import HandoverRequest as Handover
from replication.sidecar import MAX_EVENTS, Sidecar, shown_state
from replication.source import HEADS_BATCH, SourceError

log = logging.getLogger("replication.api")


class MirrorCreation(BaseModel):
    name: str | None = Field(
        default=None, description="name of the read-only mirror repository in the region; "
        "the source repository's name when unset (the mirror lives in another installation)")
    region: str = Field(description="destination region")
    storage_namespace: str = Field(description="storage namespace in the destination")
    storage_id: str | None = Field(
        default=None, description="the destination region's blockstore (multi-store) that "
        "holds the mirror; its default store when unset")


class ReadOnly(BaseModel):
    read_only: bool


class Adoption(BaseModel):
    mirror_id: str = Field(max_length=256)
    source_region: str = Field(max_length=256)
    source_repository: str = Field(max_length=63)


class HeadsQuery(BaseModel):
    repositories: list[str] = Field(max_length=HEADS_BATCH)


class RefEvent(BaseModel):
    repository: str = Field(max_length=63)
    refs: list[str] = Field(default_factory=list, max_length=1000)


class RefEvents(BaseModel):
    events: list[RefEvent] = Field(max_length=MAX_EVENTS)
    source_region: str | None = Field(default=None, max_length=100)
    #: mirrors whose news another replica of this region passes on (it does not hold
    #: their shard), and that replica's owner id
    mirrors: list[Annotated[str, Field(max_length=256)]] = Field(
        default_factory=list, max_length=MAX_EVENTS)
    passed_from: str | None = Field(default=None, max_length=256)


def _ts(value: datetime | None) -> int | None:
    return int(value.timestamp()) if value else None


def mirror_json(m: Mirror) -> dict[str, Any]:
    state = shown_state(m)
    return {
        "id": m.id,
        "name": m.name,
        "source_region": m.source_region,
        "source_repository": m.source_repository,
        "region": m.destination_region,
        "storage_namespace": m.storage_namespace,
        "storage_id": m.storage_id,
        "state": state.value,
        "error": "" if state is MirrorState.DETACHED else m.error,
        "creation_date": _ts(m.created_at),
        "updated_at": _ts(m.updated_at),
    }


def confirmed_heads(sidecar: Sidecar, m: Mirror, now: float, groups: list[MirrorGroup],
                    confirmations: Confirmations) -> list[dict[str, Any]]:
    """Per branch, what the mirror serves and when the source was last found at it
    (``groups``: the organization's mirror groups; ``confirmations``: its sensors'
    readings)."""
    grouped = grouped_branch_rows(sidecar, m, now, groups)
    rows = [{k: row[k] for k in ("branch", "mirror_head", "source_head", "source_confirmed_at",
                                 "lag_seconds", "stale", "current", "group")}
            for row in grouped.values()]
    for p in sidecar.views.branch_progress(m.id, confirmations):
        if p.branch in grouped:
            continue  # a group moves it: its row is the group's
        fresh = branch_freshness(m, p, now, sidecar.stale_after)
        rows.append({"branch": p.branch, "mirror_head": p.promoted_commit,
                     "source_head": p.source_head,
                     "source_confirmed_at": _ts(p.source_confirmed_at),
                     "lag_seconds": round(fresh.lag_seconds, 3), "stale": fresh.stale,
                     "current": fresh.current})
    return sorted(rows, key=lambda r: str(r["branch"]))


def _forward_delete(sidecar: Sidecar, mirror: Mirror, request: Request) -> Response | None:
    """Have the destination region apply a deletion; None if it cannot be reached."""
    return _forward(sidecar, mirror, request, "")


def _forward(sidecar: Sidecar, mirror: Mirror, request: Request, action: str,
             body: BaseModel | None = None) -> Response | None:
    """Send the request (``action``: the mirror's sub-path, "" for the mirror itself,
    with ``body``) to the mirror's destination region, with the caller's credentials;
    None if it cannot be reached."""
    path = f"{PREFIX}/repositories/{mirror.source_repository}/mirrors/{mirror.id}"
    return forward(sidecar, mirror.destination_region, request,
                   f"{path}{'/' + action if action else ''}", body,
                   timeout=10 if not action else 3600)


def _check_destination_store(sidecar: Sidecar, region: str, storage_id: str,
                             namespace: str) -> None:
    """Refuse a mirror on a store the destination region lacks, or a namespace its store
    cannot hold (400), as the destination's ``/config`` lists its stores.

    An unreachable destination (the disaster mirrors are for) is not asked: its mirrors
    manager refuses such a mirror when it creates the repository (the mirror fails).
    """
    try:
        default, stores = sidecar.client_for(region).storage_configs()
    except (SourceError, httpx.HTTPError) as e:
        log.warning("mirror creation: the stores of region %s not checked: %s", region, e)
        return
    if storage_id:
        named = {str(c.get("blockstore_id") or ""): c for c in stores}
        store = named.get(storage_id) if "" not in named else None
        if store is None:
            known = sorted(i for i in named if i)
            raise ValidationError(
                f"storage_id {storage_id!r}: region {region!r} has no such blockstore "
                + (f"(configured ids: {', '.join(known)})" if known
                   else "(it has a single blockstore: leave storage_id unset)"))
    else:
        store = default
    if store is None:
        return
    # lakeFS's StorageConfig spells it so
    regex = str(store.get("blockstore_namespace_ValidityRegex") or "")
    try:
        fits = not regex or re.match(regex, namespace) is not None
    except re.error:  # not a pattern this side can read: the destination checks
        fits = True
    if not fits:
        where = f"blockstore {storage_id!r}" if storage_id else "default blockstore"
        raise ValidationError(
            f"storage namespace {namespace!r} does not fit the {where} of region {region!r} "
            f"({store.get('blockstore_type')}: expected {regex})")


def create_app(sidecar: Sidecar) -> FastAPI:
    app = FastAPI(title="lakeFS replication service", version="1.0.0",
                  openapi_url=f"{PREFIX}/openapi.json", docs_url=None, redoc_url=None)
    install_error_handlers(app)
    router = APIRouter(prefix=PREFIX)
    cfg = sidecar.config

    def caller(request: Request) -> Principal:
        creds = parse_basic_authorization(request.headers.get("authorization", ""))
        if creds is None:
            raise AuthenticationError("error authenticating request")
        return sidecar.auth.authenticate(*creds)

    def may_read(repository: str) -> rbac.Permission:
        """What seeing a repository's mirrors (their names, regions and storage
        namespaces) takes: reading the repository itself."""
        return rbac.Permission(rbac.READ_REPOSITORY, rbac.repository_arn(repository))

    def mirror_of(repository: str, mirror_id: str) -> Mirror:
        """The mirror, addressed by its source repository or, in its destination region,
        by its own repository's name."""
        m = sidecar.table.get_mirror(sidecar.org, mirror_id)
        if not _names(m, repository, sidecar.region):
            raise MirrorNotFoundError(sidecar.org, mirror_id,
                                      f"not a mirror of repository {repository!r}")
        return m

    def region_mirrors() -> Iterator[Mirror]:
        """Every mirror whose source or destination is this region, by id."""
        token: str | None = None
        while True:
            page = sidecar.table.list_mirrors(sidecar.org, page_token=token,
                                              page_size=cfg.list_mirrors_page_size)
            yield from (m for m in page.mirrors
                        if sidecar.region in (m.source_region, m.destination_region))
            if not page.next_page_token:
                return
            token = page.next_page_token

    def listing(mirrors: Iterator[Mirror], after: str, amount: int,
                with_heads: bool) -> dict[str, Any]:
        if not 1 <= amount <= 1000:
            raise ValidationError("amount must be 1..1000")
        now = time.time()
        results: list[dict[str, Any]] = []
        more = False
        groups = sidecar.table.list_groups(sidecar.org) if with_heads else []
        confirmations = sidecar.views.confirmations() if with_heads else Confirmations()
        for m in mirrors:
            if after and m.id <= after:
                continue
            if len(results) == amount:
                more = True
                break
            item = mirror_json(m)
            if with_heads:
                item["branches"] = confirmed_heads(sidecar, m, now, groups, confirmations)
            results.append(item)
        return {"results": results,
                "pagination": {"has_more": more,
                               "next_offset": results[-1]["id"] if more else "",
                               "results": len(results), "max_per_page": amount}}

    @app.get("/_health", include_in_schema=False)
    def health() -> Response:
        return Response(status_code=204)

    @app.get("/metrics", include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(sidecar.metrics.registry),
                        media_type=CONTENT_TYPE_LATEST)

    @router.post("/repositories/{repository}/mirrors", status_code=201)
    def create_mirror(repository: str, body: MirrorCreation,
                      who: Principal = Depends(caller)) -> JSONResponse:  # noqa: B008
        body = body.model_copy(update={"name": body.name or repository})
        assert body.name is not None
        who.check(rbac.all_of(
            rbac.Permission(rbac.CREATE_REPOSITORY, rbac.repository_arn(body.name)),
            rbac.Permission(rbac.MIRROR_REPOSITORY, rbac.repository_arn(repository)),
            rbac.Permission(rbac.ATTACH_STORAGE_NAMESPACE,
                            rbac.storage_namespace_arn(body.storage_namespace)),
        ))
        validate_repository_id(body.name)
        if body.region == sidecar.region:
            raise ValidationError(f"region {body.region!r} is this region: a mirror must be "
                                  "in another region")
        if body.region not in cfg.dst_endpoints:
            raise ValidationError(f"unknown region {body.region!r}; known regions: "
                                  f"{sorted(cfg.dst_endpoints)}")
        ns = body.storage_namespace.strip()
        namespace_parts(ns)  # well-formed
        storage_id = (body.storage_id or "").strip()
        _check_destination_store(sidecar, body.region, storage_id, ns)
        try:
            sidecar.mirrors.repository(repository)
        except RepositoryNotFoundError:
            raise RepositoryNotFoundError(f"repository {repository!r} not found") from None
        marking = sidecar.mirrors.marking(repository)
        if marking is not None and not marking.detached:
            # a detached former mirror is an ordinary repository: it may be mirrored
            # back (failback), a mirror that still follows its source may not
            raise ValidationError(f"repository {repository!r} is itself a mirror")
        mirror = sidecar.table.create_mirror(MirrorSpec(
            organization_id=sidecar.org, name=body.name, source_region=sidecar.region,
            source_repository=repository, destination_region=body.region,
            storage_namespace=ns, storage_id=storage_id))
        sidecar.source_index.add(mirror)
        sidecar.on_ref_events([{"repository": repository}], None)
        return JSONResponse(mirror_json(mirror), status_code=201)

    @router.get("/repositories/{repository}/mirrors")
    def list_mirrors(repository: str, after: str = "", amount: int = 100,
                     who: Principal = Depends(caller)) -> dict[str, Any]:  # noqa: B008
        """The mirrors of ``repository`` this region knows: those whose source it is
        here, and those whose destination is here (named by their source repository or
        by their own repository's name), so that every step of a failover works from
        the surviving region."""
        who.check(may_read(repository))
        return listing((m for m in region_mirrors() if _names(m, repository, sidecar.region)),
                       after, amount, with_heads=False)

    @router.get("/mirrors")
    def list_region_mirrors(after: str = "", amount: int = 100,
                            who: Principal = Depends(caller)) -> dict[str, Any]:  # noqa: B008
        """Every mirror whose source or destination is this region and whose source or
        mirror repository the caller may read, with what each branch serves and when its
        source was last confirmed there."""
        visible = (m for m in region_mirrors()
                   if who.allowed(may_read(m.source_repository)) or who.allowed(may_read(m.name)))
        return listing(visible, after, amount, with_heads=True)

    @router.get("/regions")
    def list_regions(who: Principal = Depends(caller)) -> dict[str, Any]:  # noqa: B008
        """This region's name and the regions a mirror may be created in from here (those
        of ``dst_endpoints``), for forms and scripts that pick a destination."""
        del who  # any authenticated caller
        return {"region": sidecar.region, "destinations": sorted(cfg.dst_endpoints)}

    @router.get("/repositories/{repository}/mirrors/{mirror_id}")
    def read_mirror(repository: str, mirror_id: str,
                    who: Principal = Depends(caller)) -> dict[str, Any]:  # noqa: B008
        who.check(may_read(repository))
        return mirror_json(mirror_of(repository, mirror_id))

    @router.delete("/repositories/{repository}/mirrors/{mirror_id}", status_code=204)
    def delete_mirror(repository: str, mirror_id: str, request: Request,
                      who: Principal = Depends(caller)) -> Response:  # noqa: B008
        m = mirror_of(repository, mirror_id)
        who.check(rbac.Permission(rbac.DELETE_REPOSITORY, rbac.repository_arn(m.name)))
        if m.state in (MirrorState.DELETING, MirrorState.DELETED):
            return Response(status_code=204)
        if m.destination_region != sidecar.region and not request.headers.get(FORWARDED):
            # the mirror row has one writing region, its destination (a DynamoDB global
            # table settles concurrent writes to one item by last-writer-wins): ask it
            forwarded = _forward_delete(sidecar, m, request)
            if forwarded is not None:
                return forwarded
        sidecar.table.update_mirror(m.with_state(MirrorState.DELETING))
        return Response(status_code=204)

    @router.get("/repositories/{repository}/mirrors/{mirror_id}/status")
    def mirror_status(repository: str, mirror_id: str,
                      who: Principal = Depends(caller)) -> dict[str, Any]:  # noqa: B008
        who.check(may_read(repository))
        m = mirror_of(repository, mirror_id)
        now = time.time()
        branches: list[dict[str, Any]] = []
        lags: list[float] = []
        seen: list[int | None] = []
        stale = m.state is MirrorState.ACTIVE and source_unreadable(m)
        grouped = grouped_branch_rows(sidecar, m, now, sidecar.table.list_groups(sidecar.org))
        for row in grouped.values():  # a group moves these: their rows are the group's
            lags.append(row["lag_seconds"])
            seen.append(row["source_seen_at"])
            stale = stale or (m.state is MirrorState.ACTIVE and row["stale"])
            branches.append(row)
        for p in sidecar.views.branch_progress(m.id):
            if p.branch in grouped:
                continue
            fresh = branch_freshness(m, p, now, sidecar.stale_after)
            lags.append(fresh.lag_seconds)
            seen.append(_ts(p.source_seen_at))
            stale = stale or (m.state is MirrorState.ACTIVE and fresh.stale)
            branches.append({
                "branch": p.branch,
                "source_head": p.source_head,
                "mirror_head": p.promoted_commit,
                "pending_commit": p.pending_commit,
                "missing_ranges": p.missing_ranges,
                "missing_objects": p.missing_objects,
                "lag_seconds": round(fresh.lag_seconds, 3),
                "stale": fresh.stale,
                "current": fresh.current,
                "source_seen_at": _ts(p.source_seen_at),
                "source_confirmed_at": _ts(p.source_confirmed_at),
                "promoted_at": _ts(p.promoted_at),
                "error": p.error,
            })
        known = [t for t in seen if t is not None]
        branches.sort(key=lambda b: str(b["branch"]))
        return {"mirror": mirror_json(m), "branches": branches,
                "error": m.error or sidecar.last_errors.get(m.id, ""),
                # the mirror as a whole: blind if any branch is, its lag the largest
                "stale": stale or (m.state is MirrorState.ACTIVE and not branches),
                "lag_seconds": round(max(lags, default=0.0), 3),
                "source_seen_at": min(known) if known and len(known) == len(seen) else None,
                "stale_after_seconds": sidecar.stale_after}

    @router.get("/repositories/{repository}/mirrors/{mirror_id}/lag")
    def mirror_lag(repository: str, mirror_id: str,
                   who: Principal = Depends(caller)) -> dict[str, Any]:  # noqa: B008
        """Each branch's recent lag, as this region's sidecar sampled it."""
        who.check(may_read(repository))
        m = mirror_of(repository, mirror_id)
        history = sidecar.lag_history
        return {
            "mirror_id": m.id,
            "interval_seconds": history.interval,
            "window_seconds": history.window,
            "branches": [{"branch": branch,
                          "samples": [[round(t, 3), round(lag, 3)] for t, lag in samples]}
                         for branch, samples in sorted(history.samples(m.id).items())],
        }

    @router.post("/repositories/{repository}/mirrors/{mirror_id}/detach")
    def detach_mirror(repository: str, mirror_id: str,
                      who: Principal = Depends(caller)) -> dict[str, Any]:  # noqa: B008
        m = mirror_of(repository, mirror_id)
        who.check(rbac.all_of(
            rbac.Permission(rbac.MIRROR_REPOSITORY, rbac.repository_arn(repository)),
            rbac.Permission(rbac.UPDATE_REPOSITORY, rbac.repository_arn(m.name))))
        if m.destination_region != sidecar.region:
            raise ValidationError(f"detach mirror {m.id} in its destination region "
                                  f"{m.destination_region!r}")
        if m.state is not MirrorState.ACTIVE:
            raise ValidationError(f"mirror {m.id} is {m.state.value}, not active")
        alone(m, "detach")
        detached = sidecar.detach(m)
        return mirror_json(detached)

    def alone(m: Mirror, action: str) -> None:
        """A member of a group is detached, switched over and failed back with its group:
        on its own, the group's other members could never move again."""
        for g in sidecar.table.list_groups(sidecar.org):
            if any(member.mirror_id == m.id for member in g.members):
                raise ValidationError(
                    f"mirror {m.id} is a member of group {g.id} ({g.name}): {action} the "
                    f"group (POST {PREFIX}/groups/{g.id}/{action})")

    def handover_allowed(who: Principal, m: Mirror) -> None:
        """Both repositories change role: the caller may mirror and update each."""
        who.check(rbac.all_of(*(
            rbac.Permission(action, rbac.repository_arn(name))
            for name in (m.source_repository, m.name)
            for action in (rbac.MIRROR_REPOSITORY, rbac.UPDATE_REPOSITORY))))

    def in_destination(m: Mirror, request: Request, action: str,
                       body: Handover) -> Response | None:
        """A handover runs in the mirror's destination region: elsewhere, forwarded."""
        if m.destination_region == sidecar.region or request.headers.get(FORWARDED):
            return None
        forwarded = _forward(sidecar, m, request, action, body)
        if forwarded is None:
            raise ValidationError(
                f"{action} mirror {m.id} in its destination region {m.destination_region!r} "
                "(it could not be reached from here)")
        return forwarded

    @router.post("/repositories/{repository}/mirrors/{mirror_id}/switchover",
                 response_model=None)
    def switchover(repository: str, mirror_id: str, request: Request,
                   body: Handover | None = None,
                   who: Principal = Depends(caller)) -> dict[str, Any] | Response:  # noqa: B008
        """Planned switchover, RPO 0: the mirror becomes the primary, its source the
        mirror, names unchanged (see :mod:`replication.handover`)."""
        m = mirror_of(repository, mirror_id)
        handover_allowed(who, m)
        alone(m, "switchover")
        body = body or Handover()
        forwarded = in_destination(m, request, "switchover", body)
        if forwarded is not None:
            return forwarded
        return HandoverService(sidecar).switchover(m, body.timeout_seconds)

    @router.post("/repositories/{repository}/mirrors/{mirror_id}/failback",
                 response_model=None)
    def failback(repository: str, mirror_id: str, request: Request,
                 body: Handover | None = None,
                 who: Principal = Depends(caller)) -> dict[str, Any] | Response:  # noqa: B008
        """After a failover: the old source repository follows the detached mirror, its
        commits that never arrived kept on failover branches here."""
        m = mirror_of(repository, mirror_id)
        handover_allowed(who, m)
        alone(m, "failback")
        body = body or Handover()
        forwarded = in_destination(m, request, "failback", body)
        if forwarded is not None:
            return forwarded
        return HandoverService(sidecar).failback(m, body.timeout_seconds)

    def replication_user(request: Request) -> None:
        """Internal steps of a handover come from another region's sidecar, with the
        replication user's key (the sidecars share it)."""
        creds = parse_basic_authorization(request.headers.get("authorization", ""))
        if creds is None or not all(
                hmac.compare_digest(given.encode(), own.encode())
                for given, own in zip(creds, replication_key, strict=True)):
            raise AuthenticationError("internal requests need the replication user's key")

    @router.post("/internal/repositories/{repository}/read-only", include_in_schema=False)
    def set_read_only(repository: str, body: ReadOnly, request: Request) -> dict[str, Any]:
        replication_user(request)
        before = sidecar.mirrors.repository(repository).read_only
        repo = sidecar.mirrors.set_read_only(repository, body.read_only)
        return {"read_only": repo.read_only, "was_writable": not before}

    @router.post("/internal/repositories/{repository}/adopt", include_in_schema=False)
    def adopt(repository: str, body: Adoption, request: Request) -> dict[str, Any]:
        replication_user(request)
        repo, discarded = sidecar.mirrors.adopt_repository(repository, MirrorMarking(
            body.mirror_id, body.source_region, body.source_repository))
        return {"storage_namespace": repo.storage_namespace, "storage_id": repo.storage_id,
                "discarded_uncommitted": discarded}

    events_key = ref_events.events_key(cfg.auth.encrypt.secret_key.get_secret_value())
    replication_key = (cfg.source_lakefs.access_key_id.get_secret_value(),
                       cfg.source_lakefs.secret_access_key.get_secret_value())

    def events_sender(request: Request, body: bytes) -> None:
        """Events come signed by this region's server, or from another region's sidecar
        with the replication user's key (the sidecars share it)."""
        if ref_events.events_signed(events_key, body,
                                    request.headers.get(ref_events.SIGNATURE_HEADER)):
            return
        creds = parse_basic_authorization(request.headers.get("authorization", ""))
        if creds is not None and all(hmac.compare_digest(given.encode(), own.encode())
                                     for given, own in zip(creds, replication_key, strict=True)):
            return
        raise AuthenticationError("ref events need the server's signature or the replication "
                                  "user's key")

    @router.post("/internal/ref-events", status_code=202, include_in_schema=False)
    async def ref_events_(request: Request) -> dict[str, int]:
        body = await _bounded_body(request, ref_events.MAX_EVENTS_BODY)
        events_sender(request, body)
        try:
            parsed = RefEvents.model_validate_json(body)
        except PydanticValidationError as e:
            raise ValidationError(f"invalid ref events: {e.error_count()} errors") from None
        # wakes mirrors at most: the sensor reads the heads from the source itself
        n = await run_in_threadpool(
            sidecar.on_ref_events, [json.loads(e.model_dump_json()) for e in parsed.events],
            parsed.source_region, parsed.mirrors, parsed.passed_from)
        return {"woken": n}

    @router.post("/internal/heads", include_in_schema=False)
    def heads(body: HeadsQuery, who: Principal = Depends(caller)) -> dict[str, Any]:  # noqa: B008
        """The branch heads (and tags, where the caller may list them) of many of this
        region's repositories in one answer, read from its refstore: what a destination
        region's sensor reads each period rather than listing each mirror's source. A
        repository the caller may not list the branches of, or that is not here, is
        null."""
        out: dict[str, Any] = {}
        for repo in body.repositories:
            arn = rbac.repository_arn(repo)
            if not who.allowed(rbac.Permission(rbac.LIST_BRANCHES, arn)):
                out[repo] = None
                continue
            try:
                refs: dict[str, Any] = {"branches": sidecar.mirrors.listed_branches(repo)}
                if who.allowed(rbac.Permission(rbac.LIST_TAGS, arn)):
                    refs["tags"] = sidecar.mirrors.tags(repo)
            except RepositoryNotFoundError:
                out[repo] = None
                continue
            out[repo] = refs
        return {"repositories": out}

    add_group_routes(router, sidecar, caller, replication_user)
    app.include_router(router)
    return app


def utcnow() -> datetime:
    return datetime.now(UTC)


def _names(m: Mirror, repository: str, region: str) -> bool:
    """Whether ``repository``, asked in ``region``, names mirror ``m``: its source
    repository (in either region), or its own repository in its destination."""
    return (m.source_repository == repository
            and region in (m.source_region, m.destination_region)) or (
        m.destination_region == region and m.name == repository)


async def _bounded_body(request: Request, limit: int) -> bytes:
    """The request body, refused (413) past ``limit`` bytes without reading the rest."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise PayloadTooLargeError(f"a body of at most {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLargeError(f"a body of at most {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
