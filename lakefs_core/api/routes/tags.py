"""Tag routes: create, list, get and delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, Field

from lakefs_core.api.routes import (
    AfterQuery,
    AmountQuery,
    PrefixQuery,
    page_size,
)
from lakefs_core.api.routes.branches import RefList, RefModel, ref_list
from lakefs_core.api.security import Ctx, authenticated, repo_arn, tag_arn
from lakefs_core.auth import rbac

router = APIRouter()


class TagCreation(BaseModel):
    id: str = Field(description="name of the tag")
    ref: str = Field(description="ref whose commit the tag points at")
    force: bool | None = False


@router.post("/repositories/{repository}/tags", status_code=201, response_model=RefModel,
             tags=["tags"])
def create_tag(repository: str, body: TagCreation,
               ctx: Ctx = Depends(authenticated)) -> RefModel:
    """Create a tag at ``ref``'s commit (409 when the tag exists)."""
    ctx.check(rbac.CREATE_TAG, tag_arn(repository, body.id))
    tag = ctx.services.graveler.create_tag(repository, body.id, body.ref,
                                           user=ctx.user.username)
    return RefModel(id=tag.name, commit_id=tag.commit_id)


@router.get("/repositories/{repository}/tags", response_model=RefList, tags=["tags"])
def list_tags(
    repository: str,
    prefix: PrefixQuery = "",
    after: AfterQuery = "",
    amount: AmountQuery = 100,
    ctx: Ctx = Depends(authenticated),
) -> RefList:
    ctx.check(rbac.LIST_TAGS, repo_arn(repository))
    n = page_size(amount)
    tags = ctx.services.graveler.list_tags(repository, prefix=prefix, after=after, amount=n + 1)
    return ref_list([(t.name, t.commit_id) for t in tags[:n]], len(tags) > n, n)


@router.get("/repositories/{repository}/tags/{tag:path}", response_model=RefModel,
            tags=["tags"])
def get_tag(repository: str, tag: str, ctx: Ctx = Depends(authenticated)) -> RefModel:
    ctx.check(rbac.READ_TAG, tag_arn(repository, tag))
    t = ctx.services.graveler.get_tag(repository, tag)
    return RefModel(id=t.name, commit_id=t.commit_id)


@router.delete("/repositories/{repository}/tags/{tag:path}", status_code=204,
               response_class=Response, tags=["tags"])
def delete_tag(
    repository: str,
    tag: str,
    force: Annotated[bool, Query(description="accepted for compatibility")] = False,
    ctx: Ctx = Depends(authenticated),
) -> Response:
    ctx.check(rbac.DELETE_TAG, tag_arn(repository, tag))
    ctx.services.graveler.delete_tag(repository, tag, user=ctx.user.username)
    return Response(status_code=204)
