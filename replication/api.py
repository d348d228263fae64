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
from datetime import UTC, datetime
from typing import Any

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
from lakefs_core.graveler.refs import validate_repository_id
from lakefs_core.web import install_error_handlers
from mirrors_db.errors import MirrorNotFoundError
from mirrors_db.models import Mirror, MirrorSpec, MirrorState
from replication.lag_history import branch_lag
from replication.sidecar import MAX_EVENTS, Sidecar
from replication.source import SourceError

PREFIX = "/service/replication/v1"

log = logging.getLogger("replication.api")


class MirrorCreation(BaseModel):
    name: str = Field(description="name of the read-only mirror repository in the region")
    region: str = Field(description="destination region")
    storage_namespace: str = Field(description="storage namespace in the destination")
    storage_id: str | None = Field(
        default=None, description="the destination region's blockstore (multi-store) that "
        "holds the mirror; its default store when unset")


class RefEvent(BaseModel):
    repository: str = Field(max_length=63)
    refs: list[str] = Field(default_factory=list, max_length=1000)


class RefEvents(BaseModel):
    events: list[RefEvent] = Field(max_length=MAX_EVENTS)
    source_region: str | None = Field(default=None, max_length=100)


def _ts(value: datetime | None) -> int | None:
    return int(value.timestamp()) if value else None


def mirror_json(m: Mirror) -> dict[str, Any]:
    return {
        "id": m.id,
        "name": m.name,
        "source_region": m.source_region,
        "source_repository": m.source_repository,
        "region": m.destination_region,
        "storage_namespace": m.storage_namespace,
        "storage_id": m.storage_id,
        "state": m.state.value,
        "error": m.error,
        "creation_date": _ts(m.created_at),
        "updated_at": _ts(m.updated_at),
    }


FORWARDED = "x-replication-forwarded-from"


def _forward_delete(sidecar: Sidecar, mirror: Mirror, request: Request) -> Response | None:
    """Have the destination region apply a deletion; None if it cannot be reached."""
    try:
        url = sidecar.config.endpoint_for(mirror.destination_region).rstrip("/")
        resp = sidecar.http.delete(
            f"{url}{PREFIX}/repositories/{mirror.source_repository}/mirrors/{mirror.id}",
            headers={"authorization": request.headers.get("authorization", ""),
                     FORWARDED: sidecar.region}, timeout=10)
    except (httpx.HTTPError, ValidationError):
        return None  # destination unreachable (disaster): record the request here
    if resp.status_code >= 500:
        return None
    return Response(content=resp.content, status_code=resp.status_code,
                    media_type=resp.headers.get("content-type"))


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
        m = sidecar.table.get_mirror(sidecar.org, mirror_id)
        if m.source_repository != repository:
            raise MirrorNotFoundError(sidecar.org, mirror_id,
                                      f"not a mirror of repository {repository!r}")
        return m

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
        sidecar.on_ref_events([{"repository": repository}], None)
        return JSONResponse(mirror_json(mirror), status_code=201)

    @router.get("/repositories/{repository}/mirrors")
    def list_mirrors(repository: str, after: str = "", amount: int = 100,
                     who: Principal = Depends(caller)) -> dict[str, Any]:  # noqa: B008
        who.check(may_read(repository))
        if not 1 <= amount <= 1000:
            raise ValidationError("amount must be 1..1000")
        page = sidecar.table.list_mirrors_by_source(sidecar.org, sidecar.region, repository,
                                                    page_token=after or None, page_size=amount)
        return {
            "results": [mirror_json(m) for m in page.mirrors],
            "pagination": {"has_more": page.has_more, "next_offset": page.next_page_token or "",
                           "results": len(page.mirrors), "max_per_page": amount},
        }

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
        branches = []
        for p in sidecar.table.list_branch_progress(sidecar.org, m.id):
            lag = branch_lag(p, now)
            branches.append({
                "branch": p.branch,
                "source_head": p.source_head,
                "mirror_head": p.promoted_commit,
                "pending_commit": p.pending_commit,
                "missing_ranges": p.missing_ranges,
                "missing_objects": p.missing_objects,
                "lag_seconds": round(lag, 3),
                "promoted_at": _ts(p.promoted_at),
                "error": p.error,
            })
        return {"mirror": mirror_json(m), "branches": branches,
                "error": m.error or sidecar.last_errors.get(m.id, "")}

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
        detached = sidecar.detach(m)
        return mirror_json(detached)

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
            parsed.source_region)
        return {"woken": n}

    app.include_router(router)
    return app


def utcnow() -> datetime:
    return datetime.now(UTC)


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
