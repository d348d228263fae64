"""Ref routes: diff two refs, merge a ref into a branch, find a merge base."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal

from fastapi import APIRouter, Body, Depends, Query
from pydantic import BaseModel

from lakefs_core.api.routes import (
    AfterQuery,
    AmountQuery,
    Pagination,
    PrefixQuery,
    page_size,
    pagination,
)
from lakefs_core.api.security import Ctx, authenticated, branch_arn, repo_arn
from lakefs_core.auth import rbac
from lakefs_core.errors import NotFoundError
from lakefs_core.graveler.model import Difference, DiffType

router = APIRouter()

#: sorts after every path: resuming a listing after ``<common prefix><this>`` skips the prefix
_MAX_PATH_CHAR = "\U0010ffff"

DiffFetch = Callable[[str, int], tuple[list[Difference], bool]]


# --- models ------------------------------------------------------------------------
class DiffObjectStat(BaseModel):
    checksum: str
    mtime: int
    content_type: str
    metadata: dict[str, str]


class DiffModel(BaseModel):
    """lakeFS's Diff: one changed path, or a common prefix with changes under it."""

    type: str
    path: str
    path_type: Literal["object", "common_prefix"]
    size_bytes: int | None = None
    right: DiffObjectStat | None = None


class DiffList(BaseModel):
    pagination: Pagination
    results: list[DiffModel]


class MergeRequest(BaseModel):
    """lakeFS's Merge."""

    message: str | None = None
    metadata: dict[str, str] | None = None
    strategy: str | None = None
    force: bool | None = False
    allow_empty: bool | None = False
    squash_merge: bool | None = False


class MergeResult(BaseModel):
    reference: str


class FindMergeBaseResult(BaseModel):
    source_commit_id: str
    destination_commit_id: str
    base_commit_id: str


# --- diff pages --------------------------------------------------------------------
def _diff_model(d: Difference, right_stats: bool) -> DiffModel:
    entry = d.left if d.type is DiffType.REMOVED else d.right
    right = None
    if right_stats and d.right is not None:
        right = DiffObjectStat(checksum=d.right.etag, mtime=int(d.right.mtime),
                               content_type=d.right.content_type,
                               metadata=dict(d.right.metadata))
    return DiffModel(type=d.type.value, path=d.path, path_type="object",
                     size_bytes=entry.size if entry is not None else 0, right=right)


def diff_page(fetch: DiffFetch, *, prefix: str, delimiter: str, after: str, amount: int,
              right_stats: bool = False) -> DiffList:
    """A page of differences; with a ``delimiter``, paths below the next delimiter after
    ``prefix`` collapse into one ``common_prefix`` item (type ``prefix_changed``).

    Args:
        fetch: ``fetch(after, k)`` returns up to ``k`` differences under ``prefix``
            after the path ``after``, and whether more follow.
    """
    items: list[DiffModel] = []
    has_more = False
    cursor = after
    while True:
        diffs, more = fetch(cursor, amount - len(items) + (1 if delimiter else 0))
        restart: str | None = None
        for d in diffs:
            if len(items) == amount:
                has_more = True
                break
            cut = d.path.find(delimiter, len(prefix)) if delimiter else -1
            if cut < 0:
                items.append(_diff_model(d, right_stats))
                continue
            common = d.path[: cut + len(delimiter)]
            if common > after:
                items.append(DiffModel(type="prefix_changed", path=common,
                                       path_type="common_prefix"))
            restart = common + _MAX_PATH_CHAR
            break
        if restart is None or has_more:
            has_more = has_more or (more and len(items) == amount)
            break
        cursor = restart
    return DiffList(
        pagination=pagination(len(items), has_more, items[-1].path if items else "", amount),
        results=items)


# --- routes ------------------------------------------------------------------------
@router.get("/repositories/{repository}/refs/{leftRef:path}/diff/{rightRef:path}",
            response_model=DiffList, tags=["refs"])
def diff_refs(
    repository: str,
    leftRef: str,  # noqa: N803 - lakeFS's parameter names
    rightRef: str,  # noqa: N803
    after: AfterQuery = "",
    amount: AmountQuery = 100,
    prefix: PrefixQuery = "",
    delimiter: Annotated[str, Query(description="group common prefixes by this")] = "",
    type: Annotated[Literal["two_dot", "three_dot"], Query(description="diff type")
                    ] = "three_dot",
    include_right_stats: Annotated[bool, Query(description="add the right side's stats")
                                   ] = False,
    ctx: Ctx = Depends(authenticated),
) -> DiffList:
    """Committed differences from ``leftRef`` to ``rightRef`` (three-dot: from their merge
    base)."""
    ctx.check(rbac.LIST_OBJECTS, repo_arn(repository))
    graveler = ctx.services.graveler

    def fetch(cursor: str, k: int) -> tuple[list[Difference], bool]:
        return graveler.diff(repository, leftRef, rightRef, prefix=prefix, after=cursor,
                             amount=k, three_dot=type == "three_dot")

    return diff_page(fetch, prefix=prefix, delimiter=delimiter, after=after,
                     amount=page_size(amount), right_stats=include_right_stats)


@router.post("/repositories/{repository}/refs/{sourceRef:path}/merge/{destinationBranch}",
             response_model=MergeResult, tags=["refs"])
def merge_into_branch(
    repository: str,
    sourceRef: str,  # noqa: N803 - lakeFS's parameter names
    destinationBranch: str,  # noqa: N803
    body: Annotated[MergeRequest | None, Body()] = None,
    ctx: Ctx = Depends(authenticated),
) -> MergeResult:
    """Three-way merge with a merge commit: 409 on conflict, 400 "no changes".

    ``squash_merge`` makes a commit with the destination as its only parent;
    ``allow_empty`` (or ``force``) commits even when the destination's content would
    not change.
    """
    ctx.check(rbac.CREATE_COMMIT, branch_arn(repository, destinationBranch))
    merge = body or MergeRequest()
    rec = ctx.services.graveler.merge(
        repository, sourceRef, destinationBranch, ctx.user.username,
        message=merge.message or "", metadata=merge.metadata or {}, strategy=merge.strategy,
        squash=bool(merge.squash_merge), allow_empty=bool(merge.allow_empty or merge.force))
    return MergeResult(reference=rec.id)


@router.get("/repositories/{repository}/refs/{sourceRef:path}/merge/{destinationBranch}",
            response_model=FindMergeBaseResult, tags=["refs"])
def find_merge_base(
    repository: str,
    sourceRef: str,  # noqa: N803 - lakeFS's parameter names
    destinationBranch: str,  # noqa: N803
    ctx: Ctx = Depends(authenticated),
) -> FindMergeBaseResult:
    """The commits a merge of ``sourceRef`` into ``destinationBranch`` would start from."""
    ctx.check(rbac.LIST_COMMITS, repo_arn(repository))
    graveler = ctx.services.graveler
    source = graveler.resolve_ref(repository, sourceRef).commit_id
    dest = graveler.resolve_ref(repository, destinationBranch).commit_id
    base = graveler.find_merge_base(repository, source, dest)
    if base is None:
        raise NotFoundError(f"no merge base for {sourceRef!r} and {destinationBranch!r}")
    return FindMergeBaseResult(source_commit_id=source, destination_commit_id=dest,
                               base_commit_id=base)
