"""What every page handler gets: the session, the API, the templates, permissions."""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from lakefs_core.auth import rbac
from lakefs_core.auth.service import AuthService, Principal
from lakefs_core.errors import NotFoundError, ValidationError
from lakefs_core.services import Services
from lakefs_core.ui.backend import API, REPLICATION, ApiError, Backend
from lakefs_core.ui.session import COOKIE, Session, SessionCodec

UI_PREFIX = "/ui"
TEMPLATES = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))


def _timestamp(value: object) -> str:
    """Seconds since the epoch (as the API gives dates) as UTC time."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return "" if value is None else str(value)


def _filesize(value: object) -> str:
    if not isinstance(value, int | float):
        return ""
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return str(value)


TEMPLATES.env.filters["timestamp"] = _timestamp
TEMPLATES.env.filters["filesize"] = _filesize


class LoginRequired(Exception):
    """No valid session: the browser goes to the login page."""

    def __init__(self, next_url: str) -> None:
        super().__init__(next_url)
        self.next_url = next_url


@dataclass
class UIState:
    """The UI application's shared handles (in ``app.state.ui``)."""

    services: Services
    backend: Backend
    codec: SessionCodec


def ui_state(request: Request) -> UIState:
    state: UIState = request.app.state.ui
    return state


def url(where: str, /, **params: Any) -> str:
    """A UI address: ``where`` under the UI prefix, with the non-empty query parameters."""
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"{UI_PREFIX}{where}" + (f"?{query}" if query else "")


@dataclass
class Page:
    """One request of a signed-in user."""

    request: Request
    state: UIState
    session: Session
    _principal: Principal | None = field(default=None, repr=False)

    # --- the API, as this user -------------------------------------------------------
    @property
    def auth(self) -> tuple[str, str]:
        return (self.session.access_key_id, self.session.secret_access_key)

    async def api(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer of ``/api/v1<path>``."""
        return await self.state.backend.json(self.auth, method, API + path, **kwargs)

    async def api_raw(self, method: str, path: str, **kwargs: Any) -> Any:
        return await self.state.backend.request(self.auth, method, API + path, **kwargs)

    async def replication(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer of the replication service's ``/service/replication/v1<path>``."""
        return await self.state.backend.json(self.auth, method, REPLICATION + path, **kwargs)

    async def all_pages(self, path: str, params: dict[str, Any] | None = None,
                        limit: int = 10_000) -> list[dict[str, Any]]:
        """Every result of a paginated listing (at most ``limit``)."""
        results: list[dict[str, Any]] = []
        after = ""
        while len(results) < limit:
            page = await self.api("GET", path, params={**(params or {}), "after": after,
                                                        "amount": 1000})
            results.extend(page["results"])
            if not page["pagination"]["has_more"]:
                break
            after = page["pagination"]["next_offset"]
        return results[:limit]

    # --- permissions, to decide which actions a page offers ---------------------------
    @property
    def access(self) -> AuthService:
        return self.state.services.access

    def can(self, action: str, resource: str) -> bool:
        """Whether the user's policies allow ``action`` (the API checks again)."""
        if self._principal is None:
            try:
                self._principal = self.access.principal(self.session.username)
            except NotFoundError:
                raise LoginRequired(self.request.url.path) from None
        return self._principal.allowed(rbac.Permission(action, resource))

    # --- answers ---------------------------------------------------------------------
    def render(self, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return TEMPLATES.TemplateResponse(self.request, template, {
            "session": self.session, "url": url, "can": self.can, "rbac": rbac,
            "notice": self.request.query_params.get("notice", ""),
            "error": self.request.query_params.get("error", ""), **context},
            status_code=status_code)

    def check_form(self, form_token: object) -> None:
        """Refuse a form that does not carry this session's token."""
        if not isinstance(form_token, str) or not hmac.compare_digest(
                form_token.encode(), self.session.csrf.encode()):
            raise ValidationError("the form is stale or comes from another site: reload the "
                                  "page and try again")


def redirect(location: str, *, notice: str = "", error: str = "") -> RedirectResponse:
    """303 to ``location`` (a UI address), with a message shown there."""
    extra = urlencode({k: v for k, v in (("notice", notice), ("error", error)) if v})
    if extra:
        location += ("&" if "?" in location else "?") + extra
    return RedirectResponse(location, status_code=303)


def page(request: Request) -> Page:
    """FastAPI dependency: the signed-in user's page, or a redirect to the login page."""
    state = ui_state(request)
    session = state.codec.open(request.cookies.get(COOKIE))
    if session is None:
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise LoginRequired(target)
    return Page(request, state, session)


__all__ = ["ApiError", "LoginRequired", "Page", "UIState", "UI_PREFIX", "page", "redirect",
           "url"]
