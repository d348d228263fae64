"""Objects API: upload, read (with ranges), stat, list, delete, copy, user metadata and
the staging API (physical addresses written by the client, then linked).

Paths follow lakeFS's ``ObjectsApi`` and ``StagingApi``. Uploads stream: the raw
body goes to the blockstore chunk by chunk while it arrives (a multipart form is
spooled to a temporary file first), and reads stream from the store.

With ``presign=true`` the data moves between client and store directly, as in
lakeFS: get-object answers 302 to a pre-signed URL, stat and list return the URL as
``physical_address`` (list only for objects the user may read), and
``staging/backing`` returns a ``presigned_url`` to PUT to before linking. A store
that cannot pre-sign (the local store) answers 400.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Annotated, Any, Literal

import anyio
import anyio.to_thread
from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from lakefs_core.api.errors import error_response
from lakefs_core.api.guard import BODY_STATE
from lakefs_core.api.routes import (
    AfterQuery,
    AmountQuery,
    Pagination,
    PrefixQuery,
    page_size,
    pagination,
)
from lakefs_core.api.security import Ctx, authenticated, namespace_arn, object_arn, repo_arn
from lakefs_core.auth import rbac
from lakefs_core.block.base import PresignMode
from lakefs_core.catalog import DEFAULT_CONTENT_TYPE, SMALL_OBJECT
from lakefs_core.errors import (
    NotFoundError,
    ObjectNotFoundError,
    RangeNotSatisfiableError,
    ValidationError,
)
from lakefs_core.graveler.model import AddressType, Branch, Entry, Repository
from lakefs_core.graveler.refs import validate_path
from lakefs_core.protocol.bodies import BodyReader, has_body
from lakefs_core.protocol.http import (
    ReadOutcome,
    WriteConditions,
    content_range,
    header_value_safe,
    http_date,
    metadata_headers,
    object_content_headers,
    parse_range,
    quote_etag,
    read_outcome,
    unsatisfied_range,
    write_conditions,
)
from lakefs_core.services import Services

router = APIRouter(tags=["objects"])

META_PREFIX = "x-lakefs-meta-"
#: paths one bulk delete may name (as lakeFS)
MAX_DELETE_PATHS = 1000
_READ_CHUNK = 1 << 20


# --- shapes -----------------------------------------------------------------------------
class ObjectStats(BaseModel):
    path: str
    path_type: Literal["object", "common_prefix"]
    physical_address: str
    physical_address_expiry: int | None = None
    checksum: str
    size_bytes: int | None = None
    mtime: int
    metadata: dict[str, str] | None = None
    content_type: str | None = None


class ObjectStatsList(BaseModel):
    pagination: Pagination
    results: list[ObjectStats]


class PathList(BaseModel):
    paths: list[str]


class ObjectError(BaseModel):
    status_code: int
    message: str
    path: str | None = None


class ObjectErrorList(BaseModel):
    errors: list[ObjectError]


class ObjectCopyCreation(BaseModel):
    src_path: str
    src_ref: str | None = None
    force: bool | None = False
    shallow: bool | None = False


class UpdateObjectUserMetadata(BaseModel):
    set: dict[str, str]


class StagingLocation(BaseModel):
    physical_address: str | None = None
    presigned_url: str | None = None
    presigned_url_expiry: int | None = None


class StagingMetadata(BaseModel):
    staging: StagingLocation
    checksum: str
    size_bytes: int = Field(ge=0)
    user_metadata: dict[str, str] | None = None
    content_type: str | None = None
    mtime: int | None = None
    force: bool | None = False


class UnderlyingObjectProperties(BaseModel):
    storage_class: str | None = None


# --- helpers ----------------------------------------------------------------------------
def object_stats(services: Services, repo: Repository, path: str, entry: Entry,
                 user_metadata: bool = True, presign: bool = False) -> ObjectStats:
    """The API shape of one entry; with ``presign``, its address is a pre-signed URL."""
    stats = ObjectStats(
        path=path, path_type="object",
        physical_address=services.catalog.physical_address(repo, entry),
        checksum=entry.etag, size_bytes=entry.size, mtime=int(entry.mtime),
        metadata=dict(entry.metadata) if user_metadata else None,
        content_type=entry.content_type or DEFAULT_CONTENT_TYPE)
    if presign:
        url = services.catalog.presign_read(repo, entry)
        stats.physical_address, stats.physical_address_expiry = url.url, url.expiry
    return stats


def _common_prefix(path: str) -> ObjectStats:
    return ObjectStats(path=path, path_type="common_prefix", physical_address="", checksum="",
                       mtime=0)


def content_type_of(value: str | None) -> str:
    """A client's content type, checked; the default when none is given."""
    if not value:
        return DEFAULT_CONTENT_TYPE
    if len(value) > 1024 or not value.isascii() or not header_value_safe(value):
        raise ValidationError("invalid content type")
    return value


def metadata_from_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The user metadata of ``x-lakefs-meta-*`` headers."""
    meta = {}
    for key, value in headers:
        lowered = key.lower()
        if lowered.startswith(META_PREFIX) and len(lowered) > len(META_PREFIX):
            meta[lowered[len(META_PREFIX):]] = value
    return meta


def _object_headers(entry: Entry) -> list[tuple[bytes, bytes]]:
    """ETag, Last-Modified, Content-Type and ``x-lakefs-meta-*`` of an object, and what
    keeps a browser from running its bytes in this origin.

    Metadata that cannot be a header (a key that is not an HTTP token, a value with
    control characters) is left out rather than breaking the response.
    """
    content_type = _safe_header(entry.content_type or DEFAULT_CONTENT_TYPE, DEFAULT_CONTENT_TYPE)
    headers = [
        (b"etag", quote_etag(entry.etag).encode()),
        (b"last-modified", http_date(entry.mtime).encode()),
        (b"content-type", content_type),
        (b"accept-ranges", b"bytes"),
    ]
    headers.extend((name.encode(), value.encode()) for name, value
                   in object_content_headers(content_type.decode("utf-8", "replace")).items())
    headers.extend(((META_PREFIX + name).encode(), value.encode("utf-8"))
                   for name, value in metadata_headers(entry.metadata))
    return headers


def _safe_header(value: str, fallback: str) -> bytes:
    if header_value_safe(value):
        return value.encode("utf-8")
    return fallback.encode()


def _check_writable_branch(services: Services, repo_id: str, branch: str) -> Repository:
    """The repository, after checking that direct writes to ``branch`` are allowed."""
    repo, _ = services.catalog.writable(repo_id, branch)
    return repo


def _read_file(file: Any) -> Iterator[bytes]:
    while chunk := file.read(_READ_CHUNK):
        yield chunk


class _ObjectRead:
    """An object opened for a GET or HEAD: status, headers and (for GET) body."""

    def __init__(self, services: Services, repository: str, ref: str, path: str,
                 range_header: str | None) -> None:
        self.repo, entry = services.catalog.stat(repository, ref, path)
        self.catalog = services.catalog
        self.entry = entry
        self.headers = _object_headers(entry)
        self.status = 200
        self.byte_range: tuple[int, int] | None = None
        first, last = 0, entry.size - 1
        if range_header:
            try:
                self.byte_range = parse_range(range_header, entry.size)
            except ValidationError as e:  # unparsable or outside: 416 both
                raise _Unsatisfiable(str(e), entry.size) from None
            if self.byte_range is not None:
                first, last = self.byte_range
                self.status = 206
                self.headers.append(
                    (b"content-range", content_range(first, last, entry.size).encode()))
        self.headers.append((b"content-length", str(last - first + 1).encode()))

    def body(self) -> bytes | Iterator[bytes]:
        """The bytes to send, through the catalog's read path (the first chunk is read
        now, so a missing object fails before the response starts): a small object
        whole, read at once, a larger one or a range as a stream."""
        chunks = self.catalog.open_entry(self.repo, self.entry, self.byte_range).chunks
        if self.byte_range is None and self.entry.size <= SMALL_OBJECT:
            return b"".join(chunks)  # sent at once, without a thread to stream it
        return chunks


class _Unsatisfiable(RangeNotSatisfiableError):
    """A bad ``Range`` for an object of ``size`` bytes (416 with ``bytes */size``)."""

    def __init__(self, message: str, size: int) -> None:
        super().__init__(message or "Requested Range Not Satisfiable")
        self.size = size

    def response(self, body: bool = True) -> Response:
        response = (error_response(416, str(self)) if body
                    else _raw(416, [(b"content-length", b"0")]))
        response.headers["content-range"] = unsatisfied_range(self.size)
        return response


def _raw(status: int, headers: list[tuple[bytes, bytes]],
         body: bytes | Iterator[bytes] | None = None) -> Response:
    response: Response
    if body is None or isinstance(body, bytes):
        response = Response(body, status_code=status)
    else:
        response = StreamingResponse(body, status_code=status)
    response.raw_headers = [h for h in response.raw_headers
                            if h[0] not in (b"content-length", b"content-type")] + headers
    return response


# --- upload -----------------------------------------------------------------------------
_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "multipart/form-data": {"schema": {
                "type": "object",
                "properties": {"content": {"type": "string", "format": "binary",
                                           "description": "the object's data"}},
            }},
        },
    },
}


@router.post("/repositories/{repository}/branches/{branch}/objects", status_code=201,
             response_model=ObjectStats, response_model_exclude_none=True,
             openapi_extra=_UPLOAD_BODY, summary="upload an object")
async def upload_object(
    request: Request,
    repository: str,
    branch: str,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the branch")],
    storage_class: Annotated[str | None, Query(alias="storageClass")] = None,
    force: bool = False,
    if_none_match: Annotated[str | None, Header()] = None,
    if_match: Annotated[str | None, Header()] = None,
) -> ObjectStats:
    """Upload an object: the raw body, or the ``content`` field of a multipart form.

    ``x-lakefs-meta-*`` headers become user metadata; ``If-None-Match: *`` fails with
    412 when an object is already at ``path``, ``If-Match: <etag>`` when the object at
    ``path`` is missing or has another ETag.
    """
    services = ctx.services
    await run_in_threadpool(ctx.check, rbac.WRITE_OBJECT, object_arn(repository, path))
    validate_path(path)
    conditions = write_conditions(if_none_match, if_match)
    metadata = metadata_from_headers(request.headers.items())
    await run_in_threadpool(preflight_upload, services, repository, branch, path, conditions)

    content_type_header = request.headers.get("content-type", "")
    if content_type_header.lower().startswith("multipart/form-data"):
        async with request.form(max_files=1, max_fields=16) as form:
            content = form.get("content")
            if isinstance(content, str):  # a part sent without a file name
                return await _transfer(request, functools.partial(
                    store_object, services, repository, branch, path, [content.encode()],
                    DEFAULT_CONTENT_TYPE, metadata, conditions))
            if not isinstance(content, UploadFile):
                raise ValidationError("multipart upload needs a field named 'content'")
            return await _transfer(request, functools.partial(
                store_object, services, repository, branch, path, _read_file(content.file),
                content_type_of(content.content_type), metadata, conditions))

    body = request.scope.get("state", {}).get(BODY_STATE)
    if not isinstance(body, BodyReader):  # no body announced: an empty object
        body = BodyReader(request.receive, expect_body=has_body(request.scope["headers"]),
                          timeout=services.config.http.request_body_timeout.total_seconds())
    # the first piece arrives before a thread is taken: a slow sender holds none
    await body.prefetch()

    def chunks() -> Iterator[bytes]:
        # runs in a worker thread: pull each piece from the event loop as the store
        # asks for it, so the body is never held whole in memory
        more = True
        while more:
            chunk, more = body.pull()
            if chunk:
                yield chunk

    return await _transfer(request, functools.partial(
        store_object, services, repository, branch, path, chunks(),
        content_type_of(content_type_header), metadata, conditions))


async def _transfer(request: Request, store: Callable[[], ObjectStats]) -> ObjectStats:
    """Run ``store`` in a thread of the data-transfer pool, apart from the API's: a
    slow upload never holds a thread that other API calls need."""
    limiter: anyio.CapacityLimiter = request.app.state.transfer_limiter
    return await anyio.to_thread.run_sync(store, limiter=limiter)


def preflight_upload(services: Services, repository: str, branch: str, path: str,
                     conditions: WriteConditions) -> tuple[Repository, Branch]:
    """Refuse an upload before its body is read, when it could never succeed; the
    repository and branch it would write."""
    target = services.catalog.writable(repository, branch)
    services.graveler.check_write_conditions(target[0], branch, path,
                                             if_absent=conditions.if_absent,
                                             if_match=conditions.if_match)
    return target


def store_object(services: Services, repository: str, branch: str, path: str,
                 data: Iterable[bytes], content_type: str, metadata: Mapping[str, str],
                 conditions: WriteConditions, *,
                 checked: tuple[Repository, Branch] | None = None) -> ObjectStats:
    """Write an upload's data and stage it; ``checked``: the target that
    :func:`preflight_upload` returned just before (else it is read again)."""
    entry = services.catalog.upload(
        repository, branch, path, data, content_type=content_type, metadata=metadata,
        if_absent=conditions.if_absent, if_match=conditions.if_match, checked=checked)
    repo = checked[0] if checked is not None else services.graveler.get_repository(repository)
    return object_stats(services, repo, path, entry)


# --- read -------------------------------------------------------------------------------
_OBJECT_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/octet-stream": {"schema": {"type": "string",
                                                               "format": "binary"}}},
          "description": "object content"},
    206: {"content": {"application/octet-stream": {"schema": {"type": "string",
                                                               "format": "binary"}}},
          "description": "partial object content"},
    302: {"description": "presign=true: the object's pre-signed URL is in Location"},
    304: {"description": "the object's ETag matches If-None-Match"},
    416: {"description": "requested range not satisfiable"},
}


@router.get("/repositories/{repository}/refs/{ref}/objects", response_class=Response,
            responses=_OBJECT_RESPONSES, summary="get object content")
def get_object(
    repository: str,
    ref: str,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the ref")],
    presign: bool | None = None,
    range_header: Annotated[str | None, Header(alias="Range")] = None,
    if_none_match: Annotated[str | None, Header()] = None,
    if_match: Annotated[str | None, Header()] = None,
) -> Response:
    """Stream an object (or the byte range of ``Range``: 206, or 416 outside it); with
    ``presign=true``, redirect (302) to a pre-signed URL of its data instead."""
    ctx.check(rbac.READ_OBJECT, object_arn(repository, path))
    if presign:
        return _redirect_to_store(ctx.services, repository, ref, path, if_none_match, if_match)
    try:
        read = _ObjectRead(ctx.services, repository, ref, path, range_header)
    except _Unsatisfiable as e:
        return e.response()
    outcome = read_outcome(if_match, if_none_match, read.entry.etag)
    if outcome is ReadOutcome.NOT_MODIFIED:
        return _raw(304, [h for h in read.headers if h[0] != b"content-length"])
    if outcome is ReadOutcome.PRECONDITION_FAILED:
        return error_response(412, f"If-Match {if_match!r} does not match the object")
    return _raw(read.status, read.headers, read.body())


def _redirect_to_store(services: Services, repository: str, ref: str, path: str,
                       if_none_match: str | None, if_match: str | None) -> Response:
    repo, entry = services.catalog.stat(repository, ref, path)
    outcome = read_outcome(if_match, if_none_match, entry.etag)
    if outcome is ReadOutcome.NOT_MODIFIED:
        return Response(status_code=304, headers={"etag": quote_etag(entry.etag)})
    if outcome is ReadOutcome.PRECONDITION_FAILED:
        return error_response(412, f"If-Match {if_match!r} does not match the object")
    url = services.catalog.presign_read(repo, entry)
    # the URL is a credential while it lives: no cache may keep it
    return Response(status_code=302, headers={"location": url.url,
                                              "cache-control": "no-store"})


@router.head("/repositories/{repository}/refs/{ref}/objects", response_class=Response,
             responses={200: {"description": "object exists"},
                        206: {"description": "range exists"},
                        416: {"description": "requested range not satisfiable"}},
             summary="check that an object exists")
def head_object(
    repository: str,
    ref: str,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the ref")],
    range_header: Annotated[str | None, Header(alias="Range")] = None,
) -> Response:
    """The headers a GET would send, without the body."""
    ctx.check(rbac.READ_OBJECT, object_arn(repository, path))
    try:
        read = _ObjectRead(ctx.services, repository, ref, path, range_header)
    except _Unsatisfiable as e:
        return e.response(body=False)
    return _raw(read.status, read.headers)


@router.get("/repositories/{repository}/refs/{ref}/objects/stat", response_model=ObjectStats,
            response_model_exclude_none=True, summary="get object metadata")
def stat_object(
    repository: str,
    ref: str,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the ref")],
    user_metadata: bool = True,
    presign: bool | None = None,
) -> ObjectStats:
    ctx.check(rbac.READ_OBJECT, object_arn(repository, path))
    repo, entry = ctx.services.catalog.stat(repository, ref, path)
    return object_stats(ctx.services, repo, path, entry, user_metadata, bool(presign))


@router.get("/repositories/{repository}/refs/{ref}/objects/underlyingProperties",
            response_model=UnderlyingObjectProperties, response_model_exclude_none=True,
            summary="get the object's properties on the underlying storage")
def get_underlying_properties(
    repository: str,
    ref: str,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the ref")],
) -> UnderlyingObjectProperties:
    ctx.check(rbac.READ_OBJECT, object_arn(repository, path))
    ctx.services.catalog.stat(repository, ref, path)
    return UnderlyingObjectProperties()


@router.get("/repositories/{repository}/refs/{ref}/objects/ls",
            response_model=ObjectStatsList, response_model_exclude_none=True,
            summary="list objects")
def list_objects(
    repository: str,
    ref: str,
    ctx: Annotated[Ctx, Depends(authenticated)],
    user_metadata: bool = True,
    presign: bool | None = None,
    after: AfterQuery = "",
    amount: AmountQuery = 100,
    delimiter: Annotated[str, Query(description="group common prefixes by this")] = "",
    prefix: PrefixQuery = "",
) -> ObjectStatsList:
    """A page of the objects under ``prefix``; with ``delimiter``, directory style.

    With ``presign=true``, each object the user may read (``fs:ReadObject``) has a
    pre-signed URL as its ``physical_address``; the others keep their address.
    """
    ctx.check(rbac.LIST_OBJECTS, repo_arn(repository))
    services = ctx.services
    size = page_size(amount)
    repo = services.graveler.get_repository(repository)
    items, has_more = services.graveler.list_entries(
        repository, ref, prefix=prefix, after=after, amount=size, delimiter=delimiter)
    results = [object_stats(services, repo, item.path, item.entry, user_metadata,
                            bool(presign) and ctx.allowed(rbac.READ_OBJECT,
                                                          object_arn(repository, item.path)))
               if item.entry is not None else _common_prefix(item.path) for item in items]
    last = results[-1].path if results else ""
    return ObjectStatsList(pagination=pagination(len(results), has_more, last, size),
                           results=results)


# --- delete -----------------------------------------------------------------------------
@router.delete("/repositories/{repository}/branches/{branch}/objects", status_code=204,
               response_class=Response, summary="delete an object")
def delete_object(
    repository: str,
    branch: str,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the branch")],
    force: bool = False,
    no_tombstone: bool = False,
) -> Response:
    ctx.check(rbac.DELETE_OBJECT, object_arn(repository, path))
    validate_path(path)
    _check_writable_branch(ctx.services, repository, branch)
    ctx.services.graveler.delete_entry(repository, branch, path)
    return Response(status_code=204)


@router.post("/repositories/{repository}/branches/{branch}/objects/delete",
             response_model=ObjectErrorList, summary="delete objects")
def delete_objects(
    repository: str,
    branch: str,
    path_list: PathList,
    ctx: Annotated[Ctx, Depends(authenticated)],
    force: bool = False,
    no_tombstone: bool = False,
) -> ObjectErrorList:
    """Delete many paths; each failure (forbidden, bad path) is reported per path.

    Paths with no object are not errors (as S3's multi-delete).
    """
    if len(path_list.paths) > MAX_DELETE_PATHS:
        raise ValidationError(f"too many paths: at most {MAX_DELETE_PATHS} per request")
    services = ctx.services
    _check_writable_branch(services, repository, branch)
    policies = ctx.principal.policies
    errors: list[ObjectError] = []
    for path in path_list.paths:
        permission = rbac.Permission(rbac.DELETE_OBJECT, object_arn(repository, path))
        if not rbac.authorize(policies, permission, username=ctx.user.username):
            errors.append(ObjectError(status_code=403, message="insufficient permissions",
                                      path=path))
            continue
        try:
            validate_path(path)
            services.graveler.delete_entry(repository, branch, path)
        except ObjectNotFoundError:
            continue
        except ValidationError as e:
            errors.append(ObjectError(status_code=400, message=str(e), path=path))
    return ObjectErrorList(errors=errors)


# --- copy and metadata ---------------------------------------------------------------------
@router.post("/repositories/{repository}/branches/{branch}/objects/copy", status_code=201,
             response_model=ObjectStats, response_model_exclude_none=True,
             summary="copy an object")
def copy_object(
    repository: str,
    branch: str,
    object_copy_creation: ObjectCopyCreation,
    ctx: Annotated[Ctx, Depends(authenticated)],
    dest_path: Annotated[str, Query(description="destination path relative to the branch")],
) -> ObjectStats:
    """Copy ``src_ref``/``src_path`` (default ref: this branch) to ``dest_path``."""
    body = object_copy_creation
    ctx.check_requirement(rbac.all_of(
        rbac.Permission(rbac.READ_OBJECT, object_arn(repository, body.src_path)),
        rbac.Permission(rbac.WRITE_OBJECT, object_arn(repository, dest_path))))
    validate_path(body.src_path)
    validate_path(dest_path)
    services = ctx.services
    repo = _check_writable_branch(services, repository, branch)
    src_ref = body.src_ref or branch
    if body.shallow:
        entry = services.graveler.get_entry(repository, src_ref, body.src_path)
        new = replace(entry, mtime=time.time())
        services.catalog.link(repository, branch, dest_path, new)
    else:
        new = services.catalog.copy(repository, src_ref, body.src_path, branch, dest_path)
    return object_stats(services, repo, dest_path, new)


@router.put("/repositories/{repository}/branches/{branch}/objects/stat/user_metadata",
            status_code=201, response_class=Response, summary="replace an object's user metadata")
def update_object_user_metadata(
    repository: str,
    branch: str,
    update_object_user_metadata: UpdateObjectUserMetadata,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="path to object relative to the branch")],
) -> Response:
    ctx.check(rbac.WRITE_OBJECT, object_arn(repository, path))
    validate_path(path)
    services = ctx.services
    _check_writable_branch(services, repository, branch)
    entry = services.graveler.get_entry(repository, branch, path)
    services.catalog.link(repository, branch, path,
                          replace(entry, metadata=dict(update_object_user_metadata.set)))
    return Response(status_code=201)


# --- staging: client-written physical addresses ----------------------------------------
@router.get("/repositories/{repository}/branches/{branch}/staging/backing",
            response_model=StagingLocation, response_model_exclude_none=True,
            tags=["staging"], summary="get a physical address for a new object")
def get_physical_address(
    repository: str,
    branch: str,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the branch")],
    presign: bool | None = None,
) -> StagingLocation:
    """A fresh address under the repository's namespace for the client to write to
    (with ``presign=true``, also a pre-signed URL to PUT the data to); then link it
    with ``PUT``, once, before ``storage_config.link_address_expiry`` passes."""
    ctx.check(rbac.WRITE_OBJECT, object_arn(repository, path))
    validate_path(path)
    services = ctx.services
    repo = _check_writable_branch(services, repository, branch)
    address = services.catalog.hand_out_address(repo)
    location = StagingLocation(physical_address=address)
    if presign:
        url = services.catalog.store_of(repo).presign(address, PresignMode.WRITE)
        location.presigned_url, location.presigned_url_expiry = url.url, url.expiry
    return location


@router.put("/repositories/{repository}/branches/{branch}/staging/backing",
            response_model=ObjectStats, response_model_exclude_none=True, tags=["staging"],
            summary="link a written physical address to a path")
def link_physical_address(
    repository: str,
    branch: str,
    staging_metadata: StagingMetadata,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the branch")],
    if_none_match: Annotated[str | None, Header()] = None,
    if_match: Annotated[str | None, Header()] = None,
) -> ObjectStats:
    """Stage an object the client wrote itself at an address from ``GET``.

    The address must be one that ``GET`` handed out for this repository, not linked
    yet and not expired (else 400 "bad address token (expired or invalid)"), and the
    object must be there with the declared size. Linking uses the address up.
    """
    ctx.check(rbac.WRITE_OBJECT, object_arn(repository, path))
    meta = staging_metadata
    return _link_written(ctx.services, repository, branch, path, meta.staging.physical_address,
                         size=meta.size_bytes, checksum=meta.checksum,
                         content_type=meta.content_type, metadata=meta.user_metadata,
                         conditions=write_conditions(if_none_match, if_match))


def _link_written(services: Services, repository: str, branch: str, path: str,
                  address: str | None, *, size: int, checksum: str, content_type: str | None,
                  metadata: Mapping[str, str] | None,
                  conditions: WriteConditions = WriteConditions()) -> ObjectStats:
    """Stage at ``path`` an object written directly to ``address``, an address the
    server handed out (see :meth:`Catalog.claim_address`)."""
    validate_path(path)
    repo = _check_writable_branch(services, repository, branch)
    address = address or ""
    relative = relative_to_namespace(repo, address)
    content_type = content_type_of(content_type)
    # the token first: nothing is said of what is stored at an address not handed out
    services.catalog.check_address(repo, address)
    try:
        stat = services.catalog.store_of(repo).stat(address)
    except NotFoundError:
        raise ValidationError(f"no object at physical address {address!r}") from None
    if stat.size != size:
        raise ValidationError(f"size mismatch: {size} declared, {stat.size} at {address!r}")
    services.catalog.claim_address(repo, address)
    entry = Entry(address=relative, size=stat.size, etag=checksum or stat.etag,
                  mtime=time.time(), address_type=AddressType.RELATIVE,
                  content_type=content_type, metadata=dict(metadata or {}))
    services.catalog.link(repository, branch, path, entry, if_absent=conditions.if_absent,
                          if_match=conditions.if_match)
    return object_stats(services, repo, path, entry)


def relative_to_namespace(repo: Repository, address: str) -> str:
    """The address of client-written data relative to the repository's namespace.

    Raises:
        ValidationError: the address is outside the namespace, or inside ``_lakefs/``.
    """
    namespace = repo.storage_namespace.rstrip("/") + "/"
    relative = address[len(namespace):] if address.startswith(namespace) else ""
    if not relative or relative.startswith("_lakefs/") or "/../" in f"/{relative}/":
        raise ValidationError(
            f"physical address {address!r} is not in the storage namespace {namespace!r}")
    return relative


# --- internal API: stage an object, upload preflight --------------------------------------
class ObjectStageCreation(BaseModel):
    physical_address: str
    checksum: str
    size_bytes: int = Field(ge=0)
    mtime: int | None = None
    metadata: dict[str, str] | None = None
    content_type: str | None = None
    force: bool | None = False


@router.put("/repositories/{repository}/branches/{branch}/objects", status_code=201,
            response_model=ObjectStats, response_model_exclude_none=True, tags=["internal"],
            summary="stage an object written to the storage namespace")
def stage_object(
    repository: str,
    branch: str,
    object_stage_creation: ObjectStageCreation,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the branch")],
) -> ObjectStats:
    """Stage an object already in the store, as lakeFS: an address inside the
    repository's namespace must be one that ``GET .../staging/backing`` handed out (as
    linking it); one outside every namespace is staged by its full address if the
    store imports from there and the user may import from it
    (``fs:ImportFromStorage``)."""
    body = object_stage_creation
    repo = ctx.services.catalog.graveler.get_repository(repository)
    if not body.physical_address.startswith(repo.storage_namespace.rstrip("/") + "/"):
        ctx.check_requirement(rbac.all_of(
            rbac.Permission(rbac.WRITE_OBJECT, object_arn(repository, path)),
            rbac.Permission(rbac.IMPORT_FROM_STORAGE, namespace_arn(body.physical_address))))
        validate_path(path)
        repo, entry = ctx.services.catalog.link_external(
            repository, branch, path, body.physical_address, size=body.size_bytes,
            checksum=body.checksum, content_type=content_type_of(body.content_type),
            metadata=body.metadata, mtime=body.mtime)
        return object_stats(ctx.services, repo, path, entry)
    ctx.check(rbac.WRITE_OBJECT, object_arn(repository, path))
    return _link_written(ctx.services, repository, branch, path, body.physical_address,
                         size=body.size_bytes, checksum=body.checksum,
                         content_type=body.content_type, metadata=body.metadata)


@router.get("/repositories/{repository}/branches/{branch}/objects/stage_allowed",
            status_code=204, response_class=Response, tags=["internal"],
            summary="check that an upload to this path would be allowed")
def upload_object_preflight(
    repository: str,
    branch: str,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the branch")],
) -> Response:
    ctx.check(rbac.WRITE_OBJECT, object_arn(repository, path))
    validate_path(path)
    _check_writable_branch(ctx.services, repository, branch)
    return Response(status_code=204)


__all__ = [
    "ObjectStats",
    "ObjectStatsList",
    "content_type_of",
    "metadata_from_headers",
    "object_stats",
    "preflight_upload",
    "relative_to_namespace",
    "router",
    "store_object",
]
