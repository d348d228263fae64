"""Usage and statistics: what lakeFS clients report and ask about an installation.

``POST /statistics`` takes the events that lakeFS's web UI and clients send; this
server sends no usage data anywhere, so they are checked and dropped (204).
``GET /usage-report/summary`` answers the installation id and the monthly counts it
keeps: none, for the same reason.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, ConfigDict, Field

from lakefs_core.api.security import Ctx, authenticated
from lakefs_core.auth import rbac

router = APIRouter(tags=["internal"])


class StatsEvent(BaseModel):
    """lakeFS's StatsEvent."""

    model_config = ConfigDict(populate_by_name=True)

    class_: str = Field(alias="class", description='event class (e.g. "ui-event")')
    name: str
    count: int = Field(ge=0)


class StatsEventsList(BaseModel):
    events: list[StatsEvent]


class UsageReport(BaseModel):
    year: int
    month: int
    count: int


class InstallationUsageReport(BaseModel):
    installation_id: str
    reports: list[UsageReport]


@router.post("/statistics", status_code=204, response_class=Response)
def post_stats_events(body: StatsEventsList, ctx: Ctx = Depends(authenticated)) -> Response:
    """Accept usage events (and keep none)."""
    return Response(status_code=204)


@router.get("/usage-report/summary", response_model=InstallationUsageReport)
def get_usage_report_summary(ctx: Ctx = Depends(authenticated)) -> InstallationUsageReport:
    """The installation's id and its monthly usage counts (none are kept)."""
    ctx.check(rbac.READ_CONFIG, rbac.ALL)
    return InstallationUsageReport(installation_id=ctx.services.auth.installation_id(),
                                   reports=[])
