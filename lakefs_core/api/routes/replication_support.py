"""Endpoints the replication sidecars use beyond the public lakeFS API.

``GET /repositories/{repo}/metadata/files/{id}`` streams a range or metarange file of
a repository, so that the builtin copier of another region can fetch it through the
API when it cannot reach the source store directly.
"""

from __future__ import annotations

import re

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from lakefs_core.api.security import Ctx, authenticated, repo_arn
from lakefs_core.auth import rbac
from lakefs_core.errors import ObjectNotFoundError, RangeNotFoundError, ValidationError

router = APIRouter(tags=["internal"])

_FILE_ID = re.compile(r"^[a-f0-9]{64}\Z")


@router.get("/repositories/{repository}/metadata/files/{file_id}",
            response_class=Response, summary="read a range or metarange file")
def get_metadata_file(repository: str, file_id: str,
                      ctx: Ctx = Depends(authenticated)) -> Response:  # noqa: B008
    ctx.check(rbac.READ_REPOSITORY, repo_arn(repository))
    if not _FILE_ID.match(file_id):
        raise ValidationError("file id must be 64 lowercase hex characters")
    graveler = ctx.services.graveler
    repo = graveler.get_repository(repository)
    rm = graveler.ranges_for(repo)
    try:
        data = rm.store.get(rm.range_address(file_id))
    except ObjectNotFoundError as e:
        raise RangeNotFoundError(f"file {file_id} not found") from e
    return Response(content=data, media_type="application/octet-stream")
