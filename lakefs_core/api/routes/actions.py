"""Action runs: lakeFS's ``actions`` operations, for an installation that runs no hooks.

This server runs no actions (hooks under ``_lakefs_actions/`` are not executed), so a
repository has no runs: the listing is empty, and a run, its hooks and their output
are 404. Clients that show runs (lakectl, the web UI) get lakeFS's shapes all the same.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from lakefs_core.api.routes import AfterQuery, AmountQuery, Pagination, page_size, pagination
from lakefs_core.api.security import Ctx, authenticated, repo_arn
from lakefs_core.auth import rbac
from lakefs_core.errors import NotFoundError

router = APIRouter(tags=["actions"])


class ActionRun(BaseModel):
    """lakeFS's ActionRun."""

    run_id: str
    branch: str
    start_time: datetime
    end_time: datetime | None = None
    event_type: str
    status: str
    commit_id: str


class ActionRunList(BaseModel):
    pagination: Pagination
    results: list[ActionRun]


class HookRun(BaseModel):
    """lakeFS's HookRun."""

    hook_run_id: str
    action: str
    hook_id: str
    start_time: datetime
    end_time: datetime | None = None
    status: str


class HookRunList(BaseModel):
    pagination: Pagination
    results: list[HookRun]


def _readable(ctx: Ctx, repository: str) -> None:
    ctx.check(rbac.READ_ACTIONS, repo_arn(repository))
    ctx.services.graveler.get_repository(repository)  # 404 for an unknown repository


def _no_run(run_id: str) -> NotFoundError:
    return NotFoundError(f"run {run_id!r} not found: this server runs no actions")


@router.get("/repositories/{repository}/actions/runs", response_model=ActionRunList)
def list_repository_runs(
    repository: str,
    after: AfterQuery = "",
    amount: AmountQuery = 100,
    branch: Annotated[str | None, Query(description="runs of this branch")] = None,
    commit: Annotated[str | None, Query(description="runs of this commit")] = None,
    ctx: Ctx = Depends(authenticated),
) -> ActionRunList:
    """The repository's action runs: none."""
    _readable(ctx, repository)
    return ActionRunList(pagination=pagination(0, False, "", page_size(amount)), results=[])


@router.get("/repositories/{repository}/actions/runs/{run_id}", response_model=ActionRun)
def get_run(repository: str, run_id: str, ctx: Ctx = Depends(authenticated)) -> ActionRun:
    _readable(ctx, repository)
    raise _no_run(run_id)


@router.get("/repositories/{repository}/actions/runs/{run_id}/hooks",
            response_model=HookRunList)
def list_run_hooks(repository: str, run_id: str, after: AfterQuery = "",
                   amount: AmountQuery = 100,
                   ctx: Ctx = Depends(authenticated)) -> HookRunList:
    _readable(ctx, repository)
    raise _no_run(run_id)


@router.get("/repositories/{repository}/actions/runs/{run_id}/hooks/{hook_run_id}/output",
            response_model=None)
def get_run_hook_output(repository: str, run_id: str, hook_run_id: str,
                        ctx: Ctx = Depends(authenticated)) -> None:
    _readable(ctx, repository)
    raise _no_run(run_id)
