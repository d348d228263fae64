"""A repository's metadata files: lakeFS's ``metadata`` operations and
``getMetadataObject``.

``GET /repositories/{repo}/metadata/meta_range/{id}`` and ``.../range/{id}`` answer the
physical address of a metarange or range file (``<namespace>/_lakefs/<id>``) in a
``StorageURI`` body and a ``Location`` header, as lakeFS does, so that tools read the
file straight from the object store. ``GET .../metadata/object/{type}/{id}`` (type
``range`` or ``meta_range``) answers the file itself: Parquet here (see
:mod:`lakefs_core.graveler.rangefile`), where lakeFS's are SSTables.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from lakefs_core.api.security import Ctx, authenticated, repo_arn
from lakefs_core.auth import rbac
from lakefs_core.errors import ObjectNotFoundError, RangeNotFoundError, ValidationError
from lakefs_core.graveler.rangefile import file_type
from lakefs_core.graveler.ranges import RangeManager
from lakefs_core.graveler.refs import is_commit_id

router = APIRouter(tags=["metadata"])


class StorageURI(BaseModel):
    """lakeFS's StorageURI: a location in an object store."""

    location: str


def _ranges(ctx: Ctx, repository: str, file_id: str, what: str) -> RangeManager:
    """The repository's range manager, once the caller may read its metadata."""
    ctx.check_requirement(rbac.all_of(rbac.Permission(rbac.LIST_OBJECTS, repo_arn(repository)),
                                      rbac.Permission(rbac.READ_REPOSITORY,
                                                      repo_arn(repository))))
    if not is_commit_id(file_id):
        raise ValidationError(f"invalid {what} id {file_id!r}")
    graveler = ctx.services.graveler
    return graveler.ranges_for(graveler.get_repository(repository))


def _located(address: str) -> JSONResponse:
    return JSONResponse(StorageURI(location=address).model_dump(),
                        headers={"Location": address})


@router.get("/repositories/{repository}/metadata/meta_range/{meta_range}",
            response_model=StorageURI)
def get_meta_range(repository: str, meta_range: str,
                   ctx: Ctx = Depends(authenticated)) -> JSONResponse:
    """The address of a metarange file (404 when the repository has none by this id)."""
    rm = _ranges(ctx, repository, meta_range, "metarange")
    rm.get_metarange(meta_range)
    return _located(rm.range_address(meta_range))


@router.get("/repositories/{repository}/metadata/range/{range}", response_model=StorageURI)
def get_range(repository: str, range: str,  # noqa: A002 - lakeFS's parameter name
              ctx: Ctx = Depends(authenticated)) -> JSONResponse:
    """The address of a range file (404 when the repository has none by this id)."""
    rm = _ranges(ctx, repository, range, "range")
    address = rm.range_address(range)
    if not rm.store.exists(address):
        raise RangeNotFoundError(f"range not found: {range}")
    return _located(address)


#: the ``type`` of getMetadataObject -> the file type it names
_OBJECT_TYPES = {"range": "range", "meta_range": "metarange"}


@router.get("/repositories/{repository}/metadata/object/{type}/{object_id}",
            response_class=Response, tags=["internal"],
            responses={200: {"content": {"application/octet-stream": {}}}})
def get_metadata_object(repository: str, type: Literal["range", "meta_range"],  # noqa: A002
                        object_id: str, presign: bool | None = None,
                        ctx: Ctx = Depends(authenticated)) -> Response:
    """The bytes of a range or metarange file (404 when there is none of that type)."""
    rm = _ranges(ctx, repository, object_id, type)
    if presign:
        raise ValidationError("pre-signed URLs are not supported for metadata objects")
    try:
        data = rm.store.get(rm.range_address(object_id))
    except ObjectNotFoundError:
        data = b""
    if file_type(data) != _OBJECT_TYPES[type]:
        raise RangeNotFoundError(f"{type} not found: {object_id}")
    return Response(content=data, media_type="application/octet-stream")
