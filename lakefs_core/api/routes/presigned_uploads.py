"""The pre-signed multipart upload (lakeFS's experimental ``staging/pmpu`` API).

A client uploads a large object straight to the store in parts:

1. ``POST .../staging/pmpu?path=&parts=N`` starts a multipart upload at a fresh
   address in the repository's namespace and answers with the upload id, the
   address and N pre-signed part URLs (a part URL takes one ``PUT`` of that part);
2. the client PUTs each part to its URL and keeps the ETag each answer carries;
3. ``PUT .../staging/pmpu/{uploadId}?path=`` with the address and the
   ``(part_number, etag)`` list completes the upload and stages the object at
   ``path`` (``DELETE`` with the address aborts it instead). The address must be the
   one step 1 handed out for the repository, not used yet and not expired (else 400
   "bad address token (expired or invalid)"), as for linking an address.

Between the first and the last step, ``PUT .../pmpu/{uploadId}/parts/{partNumber}``
pre-signs the URL of one more part, and ``PUT .../parts/{partNumber}/copy`` fills a
part with (a byte range of) an object of a lakeFS ref in the same store, answering
204 with the part's ``ETag`` header (the copy also needs ``fs:ReadObject`` on the
source).

Every step needs ``fs:WriteObject`` on the path and a branch that takes direct
writes (read-only mirror repositories and protected branches refuse). A store that
offers no pre-signed multipart upload answers 501, as lakeFS does.
"""

from __future__ import annotations

import re
import time
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, Response
from pydantic import BaseModel

from lakefs_core.api.routes.objects import (
    ObjectStats,
    content_type_of,
    object_stats,
    relative_to_namespace,
)
from lakefs_core.api.security import Ctx, authenticated, object_arn
from lakefs_core.auth import rbac
from lakefs_core.block.base import BlockStore
from lakefs_core.errors import NotImplementedByServerError, ValidationError
from lakefs_core.graveler.model import AddressType, Entry, Repository
from lakefs_core.graveler.refs import validate_path

router = APIRouter(tags=["experimental"])

#: S3's cap on the parts of one upload (lakeFS's bound on ``parts``)
MAX_UPLOAD_PARTS = 10_000
_NOT_SUPPORTED = "presign multipart upload API is not supported"


class PresignMultipartUpload(BaseModel):
    upload_id: str
    physical_address: str
    presigned_urls: list[str] | None = None


class UploadPart(BaseModel):
    part_number: int
    etag: str


class CompletePresignMultipartUpload(BaseModel):
    physical_address: str
    parts: list[UploadPart]
    user_metadata: dict[str, str] | None = None
    content_type: str | None = None


class AbortPresignMultipartUpload(BaseModel):
    physical_address: str


class UploadPartFrom(BaseModel):
    physical_address: str


class UploadTo(BaseModel):
    presigned_url: str


class CopyPartSource(BaseModel):
    repository: str
    ref: str
    path: str
    range: str | None = None


class UploadPartCopyFrom(BaseModel):
    physical_address: str
    copy_source: CopyPartSource


PartNumber = Annotated[int, Path(ge=1, le=MAX_UPLOAD_PARTS,
                                 description="the part's number (1-based)")]
_BYTE_RANGE = re.compile(r"bytes=(\d+)-(\d+)")


def _byte_range(value: str | None) -> tuple[int, int] | None:
    """``bytes=first-last`` (inclusive) as a pair; one range only, as S3 copies."""
    if value is None:
        return None
    match = _BYTE_RANGE.fullmatch(value)
    if match is None or int(match[2]) < int(match[1]):
        raise ValidationError(f"invalid range {value!r}: expected bytes=first-last")
    return int(match[1]), int(match[2])


def _writable_store(ctx: Ctx, repository: str, branch: str, path: str
                    ) -> tuple[Repository, BlockStore]:
    """Authorize a write of ``path``, check the branch takes it and the repository's
    store offers pre-signed multipart uploads."""
    ctx.check(rbac.WRITE_OBJECT, object_arn(repository, path))
    validate_path(path)
    catalog = ctx.services.catalog
    repo, _ = catalog.writable(repository, branch)
    store = catalog.store_of(repo)
    if not store.presign_support().pre_sign_multipart_upload:
        raise NotImplementedByServerError(_NOT_SUPPORTED)
    return repo, store


@router.post("/repositories/{repository}/branches/{branch}/staging/pmpu", status_code=201,
             response_model=PresignMultipartUpload, response_model_exclude_none=True,
             summary="start a multipart upload with pre-signed part URLs")
def create_presign_multipart_upload(
    repository: str,
    branch: str,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the branch")],
    parts: Annotated[int | None, Query(description="how many part URLs to pre-sign")] = None,
) -> PresignMultipartUpload:
    count = parts or 0
    if not 0 <= count <= MAX_UPLOAD_PARTS:
        raise ValidationError(f"parts can be between 0 and {MAX_UPLOAD_PARTS}")
    repo, store = _writable_store(ctx, repository, branch, path)
    address = ctx.services.catalog.hand_out_address(repo)
    upload_id = store.create_multipart_upload(address)
    urls = [store.presign_upload_part(address, upload_id, n).url for n in range(1, count + 1)]
    return PresignMultipartUpload(upload_id=upload_id, physical_address=address,
                                  presigned_urls=urls or None)


@router.put("/repositories/{repository}/branches/{branch}/staging/pmpu/{uploadId}",
            response_model=ObjectStats, response_model_exclude_none=True,
            summary="complete a pre-signed multipart upload and stage the object")
def complete_presign_multipart_upload(
    repository: str,
    branch: str,
    uploadId: str,  # noqa: N803 - lakeFS's path parameter name
    complete: CompletePresignMultipartUpload,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the branch")],
) -> ObjectStats:
    repo, store = _writable_store(ctx, repository, branch, path)
    if not complete.parts:
        raise ValidationError("parts are required")
    relative = relative_to_namespace(repo, complete.physical_address)
    content_type = content_type_of(complete.content_type)
    ctx.services.catalog.claim_address(repo, complete.physical_address)
    stat = store.complete_multipart_upload(
        complete.physical_address, uploadId,
        [(part.part_number, part.etag) for part in complete.parts])
    entry = Entry(address=relative, size=stat.size, etag=stat.etag, mtime=time.time(),
                  address_type=AddressType.RELATIVE, content_type=content_type,
                  metadata=dict(complete.user_metadata or {}))
    ctx.services.catalog.link(repository, branch, path, entry)
    return object_stats(ctx.services, repo, path, entry)


@router.delete("/repositories/{repository}/branches/{branch}/staging/pmpu/{uploadId}",
               status_code=204, response_class=Response,
               summary="abort a pre-signed multipart upload")
def abort_presign_multipart_upload(
    repository: str,
    branch: str,
    uploadId: str,  # noqa: N803 - lakeFS's path parameter name
    abort: AbortPresignMultipartUpload,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the branch")],
) -> Response:
    repo, store = _writable_store(ctx, repository, branch, path)
    relative_to_namespace(repo, abort.physical_address)
    store.abort_multipart_upload(abort.physical_address, uploadId)
    return Response(status_code=204)


@router.put("/repositories/{repository}/branches/{branch}/staging/pmpu/{uploadId}"
            "/parts/{partNumber}", response_model=UploadTo,
            summary="pre-sign the URL of one part of a multipart upload")
def upload_part(
    repository: str,
    branch: str,
    uploadId: str,  # noqa: N803 - lakeFS's path parameter name
    partNumber: PartNumber,  # noqa: N803 - lakeFS's path parameter name
    body: UploadPartFrom,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the branch")],
) -> UploadTo:
    repo, store = _writable_store(ctx, repository, branch, path)
    relative_to_namespace(repo, body.physical_address)
    url = store.presign_upload_part(body.physical_address, uploadId, partNumber)
    return UploadTo(presigned_url=url.url)


@router.put("/repositories/{repository}/branches/{branch}/staging/pmpu/{uploadId}"
            "/parts/{partNumber}/copy", status_code=204, response_class=Response,
            summary="fill one part of a multipart upload from an object of a ref")
def upload_part_copy(
    repository: str,
    branch: str,
    uploadId: str,  # noqa: N803 - lakeFS's path parameter name
    partNumber: PartNumber,  # noqa: N803 - lakeFS's path parameter name
    body: UploadPartCopyFrom,
    ctx: Annotated[Ctx, Depends(authenticated)],
    path: Annotated[str, Query(description="relative to the branch")],
) -> Response:
    source = body.copy_source
    ctx.check(rbac.READ_OBJECT, object_arn(source.repository, source.path))
    byte_range = _byte_range(source.range)
    repo, store = _writable_store(ctx, repository, branch, path)
    relative_to_namespace(repo, body.physical_address)
    catalog = ctx.services.catalog
    source_repo, entry = catalog.stat(source.repository, source.ref, source.path)
    if source_repo.storage_id != repo.storage_id:
        raise ValidationError("the copy source is in another storage than the upload")
    etag = store.upload_part_copy(body.physical_address, uploadId, partNumber,
                                  catalog.physical_address(source_repo, entry), byte_range)
    return Response(status_code=204, headers={"ETag": f'"{etag}"'})
