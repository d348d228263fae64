"""Garbage collection routes: a repository's rules, preparing a run, and the GC config.

The rules live at ``/repositories/{repository}/settings/gc_rules`` (and at lakeFS's
older internal ``/repositories/{repository}/gc/rules``); ``gc/prepare_commits`` writes
the commits CSV a garbage collection run reads (``gc/prepare_commits/async`` in the
background, its progress at ``gc/prepare_commits/status?id=``), and
``gc/prepare_uncommited`` (lakeFS's spelling) the run's uncommitted objects.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, BackgroundTasks, Body, Depends, Query, Response
from pydantic import BaseModel, Field, StrictInt

from lakefs_core.api.security import Ctx, authenticated, repo_arn
from lakefs_core.auth import rbac
from lakefs_core.errors import ValidationError
from lakefs_core.graveler.model import GarbageCollectionRules
from lakefs_core.graveler.retention import (
    GC_GRACE_PERIOD_SECONDS,
    GarbageCollectionService,
    validate_gc_rules,
)

router = APIRouter()


class GarbageCollectionRule(BaseModel):
    """lakeFS's GarbageCollectionRule."""

    branch_id: str
    retention_days: StrictInt


class GarbageCollectionRulesModel(BaseModel):
    """lakeFS's GarbageCollectionRules."""

    default_retention_days: StrictInt
    branches: list[GarbageCollectionRule]


class GarbageCollectionPrepareResponse(BaseModel):
    """lakeFS's GarbageCollectionPrepareResponse (no presigned URL: the stores here
    sign none)."""

    run_id: str = Field(description="a unique identifier generated for this GC job")
    gc_commits_location: str = Field(description="location of the commits CSV of the run")
    gc_addresses_location: str = Field(description="location for the expired addresses")
    gc_commits_presigned_url: str | None = None


class TaskCreation(BaseModel):
    """lakeFS's TaskCreation."""

    id: str = Field(description="the id of the task")


class TaskError(BaseModel):
    """lakeFS's Error, as a task status carries it."""

    message: str


class PrepareGarbageCollectionCommitsStatus(BaseModel):
    """lakeFS's PrepareGarbageCollectionCommitsStatus."""

    task_id: str
    completed: bool
    update_time: datetime
    result: GarbageCollectionPrepareResponse | None = None
    error: TaskError | None = None


class PrepareGCUncommittedRequest(BaseModel):
    """lakeFS's PrepareGCUncommittedRequest."""

    continuation_token: str | None = None


class PrepareGCUncommittedResponse(BaseModel):
    """lakeFS's PrepareGCUncommittedResponse: one file holds all the objects, so no
    continuation token is ever returned."""

    run_id: str
    gc_uncommitted_location: str = Field(description="location of uncommitted information data")
    continuation_token: str | None = None


class GarbageCollectionConfig(BaseModel):
    """lakeFS's GarbageCollectionConfig."""

    grace_period: int = Field(description="seconds: objects created more recently are kept")


def _service(ctx: Ctx) -> GarbageCollectionService:
    return GarbageCollectionService(ctx.services.graveler)


def _rules_model(rules: GarbageCollectionRules) -> GarbageCollectionRulesModel:
    return GarbageCollectionRulesModel(
        default_retention_days=rules.default_retention_days,
        branches=[GarbageCollectionRule(branch_id=b, retention_days=d)
                  for b, d in sorted(rules.branch_retention_days.items())])


# --- rules ----------------------------------------------------------------------------
@router.get("/repositories/{repository}/settings/gc_rules",
            response_model=GarbageCollectionRulesModel, tags=["repositories"])
def get_gc_rules(repository: str,
                 ctx: Ctx = Depends(authenticated)) -> GarbageCollectionRulesModel:
    """The repository's garbage collection rules (404 when none are set)."""
    ctx.check(rbac.GET_GARBAGE_COLLECTION_RULES, repo_arn(repository))
    return _rules_model(_service(ctx).get_rules(repository))


@router.put("/repositories/{repository}/settings/gc_rules", status_code=204,
            response_class=Response, tags=["repositories"])
def set_gc_rules(repository: str, body: GarbageCollectionRulesModel,
                 ctx: Ctx = Depends(authenticated)) -> Response:
    """Replace the repository's garbage collection rules (a mirror refuses: 403)."""
    ctx.check(rbac.SET_GARBAGE_COLLECTION_RULES, repo_arn(repository))
    rules = validate_gc_rules(body.default_retention_days,
                              ((r.branch_id, r.retention_days) for r in body.branches))
    _service(ctx).set_rules(repository, rules)
    return Response(status_code=204)


@router.delete("/repositories/{repository}/settings/gc_rules", status_code=204,
               response_class=Response, tags=["repositories"])
def delete_gc_rules(repository: str, ctx: Ctx = Depends(authenticated)) -> Response:
    """Remove the repository's garbage collection rules."""
    ctx.check(rbac.SET_GARBAGE_COLLECTION_RULES, repo_arn(repository))
    _service(ctx).delete_rules(repository)
    return Response(status_code=204)


@router.get("/repositories/{repository}/gc/rules", response_model=GarbageCollectionRulesModel,
            tags=["internal"])
def internal_get_garbage_collection_rules(
        repository: str, ctx: Ctx = Depends(authenticated)) -> GarbageCollectionRulesModel:
    return get_gc_rules(repository, ctx)


@router.post("/repositories/{repository}/gc/rules", status_code=204, response_class=Response,
             tags=["internal"])
def internal_set_garbage_collection_rules(repository: str, body: GarbageCollectionRulesModel,
                                          ctx: Ctx = Depends(authenticated)) -> Response:
    return set_gc_rules(repository, body, ctx)


@router.delete("/repositories/{repository}/gc/rules", status_code=204,
               response_class=Response, tags=["internal"])
def internal_delete_garbage_collection_rules(repository: str,
                                             ctx: Ctx = Depends(authenticated)) -> Response:
    return delete_gc_rules(repository, ctx)


@router.get("/repositories/{repository}/gc/rules/set_allowed", status_code=204,
            response_class=Response, tags=["internal"])
def set_garbage_collection_rules_preflight(repository: str,
                                           ctx: Ctx = Depends(authenticated)) -> Response:
    """204 when the user may change the repository's garbage collection rules."""
    ctx.check(rbac.SET_GARBAGE_COLLECTION_RULES, repo_arn(repository))
    return Response(status_code=204)


# --- a run ----------------------------------------------------------------------------
@router.post("/repositories/{repository}/gc/prepare_commits", status_code=201,
             response_model=GarbageCollectionPrepareResponse, response_model_exclude_none=True,
             tags=["internal"])
def prepare_garbage_collection_commits(
        repository: str, ctx: Ctx = Depends(authenticated)) -> GarbageCollectionPrepareResponse:
    """Write the commits CSV of a new run from the repository's rules (404 without rules)."""
    ctx.check(rbac.PREPARE_GARBAGE_COLLECTION_COMMITS, repo_arn(repository))
    run = _service(ctx).prepare_commits(repository)
    return GarbageCollectionPrepareResponse(run_id=run.run_id,
                                            gc_commits_location=run.commits_location,
                                            gc_addresses_location=run.addresses_location)


@router.post("/repositories/{repository}/gc/prepare_commits/async", status_code=202,
             response_model=TaskCreation, tags=["internal"])
def prepare_garbage_collection_commits_async(
        repository: str, background: BackgroundTasks,
        ctx: Ctx = Depends(authenticated)) -> TaskCreation:
    """Start writing the commits CSV of a new run (404 without rules); the task's id is
    the run's."""
    ctx.check(rbac.PREPARE_GARBAGE_COLLECTION_COMMITS, repo_arn(repository))
    service = _service(ctx)
    task = service.submit_prepare_commits(repository)
    background.add_task(service.run_prepare_commits, repository, task)
    return TaskCreation(id=task.id)


@router.get("/repositories/{repository}/gc/prepare_commits/status",
            response_model=PrepareGarbageCollectionCommitsStatus,
            response_model_exclude_none=True, tags=["internal"])
def prepare_garbage_collection_commits_status(
        repository: str,
        id: Annotated[str, Query(description="the task's id, as its submission returned it")],
        ctx: Ctx = Depends(authenticated)) -> PrepareGarbageCollectionCommitsStatus:
    ctx.check(rbac.PREPARE_GARBAGE_COLLECTION_COMMITS, repo_arn(repository))
    task, where = _service(ctx).prepare_commits_status(repository, id)
    result = None
    if task.done and not task.error:
        result = GarbageCollectionPrepareResponse(
            run_id=task.id, gc_commits_location=where.commits_location,
            gc_addresses_location=where.addresses_location)
    return PrepareGarbageCollectionCommitsStatus(
        task_id=task.id, completed=task.done,
        update_time=datetime.fromtimestamp(task.update_time, UTC), result=result,
        error=TaskError(message=task.error) if task.error else None)


@router.post("/repositories/{repository}/gc/prepare_uncommited", status_code=201,
             response_model=PrepareGCUncommittedResponse, response_model_exclude_none=True,
             tags=["internal"])
def prepare_garbage_collection_uncommitted(
        repository: str,
        body: Annotated[PrepareGCUncommittedRequest | None, Body()] = None,
        ctx: Ctx = Depends(authenticated)) -> PrepareGCUncommittedResponse:
    """Write the staged objects of every branch for a garbage collection run."""
    ctx.check(rbac.PREPARE_GARBAGE_COLLECTION_UNCOMMITTED, repo_arn(repository))
    if body is not None and body.continuation_token:
        # every answer holds all the objects: no token was ever handed out
        raise ValidationError("invalid continuation_token")
    run_id, location = _service(ctx).prepare_uncommitted(repository)
    return PrepareGCUncommittedResponse(run_id=run_id, gc_uncommitted_location=location)


@router.get("/config/garbage-collection", response_model=GarbageCollectionConfig,
            tags=["internal"])
def get_garbage_collection_config(
        ctx: Ctx = Depends(authenticated)) -> GarbageCollectionConfig:
    """What a garbage collection run must respect."""
    return GarbageCollectionConfig(grace_period=GC_GRACE_PERIOD_SECONDS)
