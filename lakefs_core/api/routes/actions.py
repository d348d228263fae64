"""Action runs: lakeFS's ``actions`` operations over the runs the server recorded.

Runs list newest first, filtered by branch or commit; a run's hooks by hook run id;
a hook's output is its log as text.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel

from lakefs_core.api.routes import AfterQuery, AmountQuery, Pagination, page_size, pagination
from lakefs_core.api.security import Ctx, authenticated, repo_arn
from lakefs_core.auth import rbac
from lakefs_core.graveler.model import ActionRun as ActionRunRecord
from lakefs_core.graveler.model import HookRun as HookRunRecord

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


def _time(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def _run_model(r: ActionRunRecord) -> ActionRun:
    return ActionRun(run_id=r.run_id, branch=r.branch, start_time=_time(r.start_time),
                     end_time=_time(r.end_time), event_type=r.event_type, status=r.status,
                     commit_id=r.commit_id)


def _hook_model(h: HookRunRecord) -> HookRun:
    return HookRun(hook_run_id=h.hook_run_id, action=h.action, hook_id=h.hook_id,
                   start_time=_time(h.start_time), end_time=_time(h.end_time),
                   status=h.status)


@router.get("/repositories/{repository}/actions/runs", response_model=ActionRunList)
def list_repository_runs(
    repository: str,
    after: AfterQuery = "",
    amount: AmountQuery = 100,
    branch: Annotated[str | None, Query(description="runs of this branch")] = None,
    commit: Annotated[str | None, Query(description="runs of this commit")] = None,
    ctx: Ctx = Depends(authenticated),
) -> ActionRunList:
    """The repository's action runs, newest first."""
    _readable(ctx, repository)
    size = page_size(amount)
    runs = ctx.services.refstore.list_action_runs(
        repository, after=after, amount=size + 1, branch=branch or None,
        commit_id=commit or None)
    more = len(runs) > size
    runs = runs[:size]
    return ActionRunList(
        pagination=pagination(len(runs), more, runs[-1].run_id if more else "", size),
        results=[_run_model(r) for r in runs])


@router.get("/repositories/{repository}/actions/runs/{run_id}", response_model=ActionRun)
def get_run(repository: str, run_id: str, ctx: Ctx = Depends(authenticated)) -> ActionRun:
    _readable(ctx, repository)
    return _run_model(ctx.services.refstore.get_action_run(repository, run_id))


@router.get("/repositories/{repository}/actions/runs/{run_id}/hooks",
            response_model=HookRunList)
def list_run_hooks(repository: str, run_id: str, after: AfterQuery = "",
                   amount: AmountQuery = 100,
                   ctx: Ctx = Depends(authenticated)) -> HookRunList:
    _readable(ctx, repository)
    refstore = ctx.services.refstore
    refstore.get_action_run(repository, run_id)  # 404 for an unknown run
    size = page_size(amount)
    hooks = refstore.list_hook_runs(repository, run_id, after=after, amount=size + 1)
    more = len(hooks) > size
    hooks = hooks[:size]
    return HookRunList(
        pagination=pagination(len(hooks), more, hooks[-1].hook_run_id if more else "", size),
        results=[_hook_model(h) for h in hooks])


@router.get("/repositories/{repository}/actions/runs/{run_id}/hooks/{hook_run_id}/output",
            response_class=Response)
def get_run_hook_output(repository: str, run_id: str, hook_run_id: str,
                        ctx: Ctx = Depends(authenticated)) -> Response:
    """The hook's log: the request it sent and the answer it got."""
    _readable(ctx, repository)
    hook = ctx.services.refstore.get_hook_run(repository, run_id, hook_run_id)
    return Response(hook.output.encode(), media_type="application/octet-stream")
