"""Symlink export: Hive-style manifests of a ref's objects, for engines that read the
data straight from the object store (Athena, Glue, Trino, Hive).

``POST /repositories/{repo}/refs/{branch}/symlink?location=<prefix>`` writes, for each
directory under ``location``, ``<namespace>/symlinks/<repo>/<branch>/<directory>/
symlink.txt`` listing its objects' physical addresses, and answers lakeFS's
``StorageURI`` with ``<namespace>/symlinks`` (201).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query

from lakefs_core.api.routes.metadata import StorageURI
from lakefs_core.api.security import Ctx, authenticated, object_arn, repo_arn
from lakefs_core.auth import rbac

router = APIRouter(tags=["internal"])


@router.post("/repositories/{repository}/refs/{branch}/symlink", status_code=201,
             response_model=StorageURI)
def create_symlink_file(
    repository: str,
    branch: str,
    location: Annotated[str, Query(description="export only the objects under this path")
                        ] = "",
    ctx: Ctx = Depends(authenticated),
) -> StorageURI:
    """Write the symlink manifests of ``branch`` (any ref) under ``location``."""
    # lakeFS asks fs:WriteObject on the branch's object ARN; the manifests also reveal
    # where every object is, so listing them is asked too
    ctx.check_requirement(rbac.all_of(
        rbac.Permission(rbac.WRITE_OBJECT, object_arn(repository, branch)),
        rbac.Permission(rbac.LIST_OBJECTS, repo_arn(repository))))
    return StorageURI(location=ctx.services.catalog.export_symlinks(repository, branch,
                                                                    location))
