"""The UI's ASGI application: login, logout, the pages, and its static files."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated
from urllib.parse import unquote, urlsplit

from fastapi import FastAPI, Form, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from lakefs_core.errors import (
    AuthenticationError,
    LakeFSError,
    NotFoundError,
    TooManySignInsError,
)
from lakefs_core.services import Services
from lakefs_core.ui.backend import ApiError, ASGIApp, Backend
from lakefs_core.ui.context import (
    TEMPLATES,
    UI_PREFIX,
    LoginRequired,
    UIState,
    page,
    redirect,
    ui_state,
    url,
)
from lakefs_core.ui.guard import UIGuard
from lakefs_core.ui.headers import PageHeaders
from lakefs_core.ui.session import (
    COOKIE,
    LOGIN_COOKIE,
    SESSION_SECONDS,
    RevokedSessions,
    SessionCodec,
)

#: page modules under lakefs_core.ui.pages; each defines ``router``
PAGE_MODULES = ("repositories", "refs", "objects", "mirrors", "auth")


def _safe_next(target: str | None) -> str:
    """Where to go after login: a normalized UI address only, never another site nor a
    path that a browser would resolve out of the UI (``..`` or ``.`` segments, encoded or
    not, empty segments, backslashes, blanks or control characters)."""
    fallback = url("/repositories")
    if not target or any(c <= " " or c in "\\\x7f" for c in target):
        return fallback
    parts = urlsplit(target)
    path = unquote(parts.path)
    segments = path.split("/")
    if (parts.scheme or parts.netloc or "\\" in path or segments[:2] != ["", UI_PREFIX[1:]]
            or any(seg in (".", "..") for seg in segments) or "" in segments[2:-1]):
        return fallback
    return target


def _error_page(request: Request, status: int, message: str) -> HTMLResponse:
    return TEMPLATES.TemplateResponse(request, "error.html", {
        "status": status, "message": message, "url": url, "session": None},
        status_code=status)


def create_ui(services: Services, api: ASGIApp) -> FastAPI:
    """The web UI over ``api`` (the server's REST API application, called in-process)."""
    secret = services.config.auth.encrypt.secret_key
    assert secret is not None  # the config model fills the embedded default
    # in-process calls: the client holds no connection, so it needs no closing
    backend = Backend(api)
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    codec = SessionCodec(secret.get_secret_value(),
                         RevokedSessions(store=services.auth))
    app.state.ui = UIState(services, backend, codec)
    app.add_middleware(UIGuard, codec=codec, prefix=UI_PREFIX)
    app.add_middleware(PageHeaders)
    app.mount(f"{UI_PREFIX}/static", StaticFiles(directory=Path(__file__).parent / "static"),
              name="static")

    @app.exception_handler(LoginRequired)
    async def _login(request: Request, exc: LoginRequired) -> Response:
        resp = RedirectResponse(url("/login", next=exc.next_url), status_code=303)
        resp.delete_cookie(COOKIE, path=UI_PREFIX)
        return resp

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> Response:
        if exc.status == 401:  # the key was deleted, or the user: sign in again
            return await _login(request, LoginRequired(request.url.path))
        return _error_page(request, exc.status, exc.message)

    @app.exception_handler(LakeFSError)
    async def _lakefs_error(request: Request, exc: LakeFSError) -> Response:
        status = 404 if isinstance(exc, NotFoundError) else 400
        return _error_page(request, status, str(exc))

    @app.exception_handler(RequestValidationError)
    async def _bad_form(request: Request, exc: RequestValidationError) -> Response:
        missing = sorted({str(e["loc"][-1]) for e in exc.errors() if e.get("loc")})
        return _error_page(request, 400, "the request lacks or garbles: " + ", ".join(missing))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return _error_page(request, exc.status_code, str(exc.detail))

    @app.get("/", include_in_schema=False)
    @app.get(UI_PREFIX, include_in_schema=False)
    @app.get(f"{UI_PREFIX}/", include_in_schema=False)
    async def home() -> Response:
        return RedirectResponse(url("/repositories"), status_code=303)

    def login_page(request: Request, next_url: str, *, error: str = "", access_key_id: str = "",
                   status: int = 200) -> Response:
        """The sign-in form, with the token of this browser's login cookie (set anew if
        the browser has none)."""
        nonce = request.cookies.get(LOGIN_COOKIE) or codec.login_nonce()
        resp = TEMPLATES.TemplateResponse(request, "login.html", {
            "next": _safe_next(next_url), "url": url, "session": None, "error": error,
            "access_key_id": access_key_id, "login_token": codec.login_token(nonce)},
            status_code=status)
        resp.set_cookie(LOGIN_COOKIE, nonce, path=f"{UI_PREFIX}/login", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")
        return resp

    @app.get(f"{UI_PREFIX}/login", response_class=HTMLResponse)
    async def login_form(request: Request, next: str = "") -> Response:  # noqa: A002
        return login_page(request, next)

    @app.post(f"{UI_PREFIX}/login", response_class=HTMLResponse)
    async def login(request: Request, access_key_id: Annotated[str, Form()] = "",
                    secret_access_key: Annotated[str, Form()] = "",
                    login_token: Annotated[str, Form()] = "",
                    next: Annotated[str, Form()] = "") -> Response:  # noqa: A002
        state = ui_state(request)
        key = access_key_id.strip()
        address = request.client.host if request.client else ""
        if not codec.login_token_valid(request.cookies.get(LOGIN_COOKIE), login_token):
            return login_page(request, next, access_key_id=key, status=400, error=(
                "the sign-in form is stale or comes from another site: try again"))
        try:
            principal = await run_in_threadpool(
                state.services.sign_ins.attempt, address, key,
                lambda: state.services.access.authenticate(key, secret_access_key))
        except TooManySignInsError as e:
            resp = login_page(request, next, access_key_id=key, status=429, error=str(e))
            resp.headers["retry-after"] = str(e.retry_after)
            return resp
        except (AuthenticationError, NotFoundError):
            return login_page(request, next, access_key_id=key, status=401,
                              error="invalid access key ID or secret access key")
        session = state.codec.new(key, secret_access_key, principal.username)
        resp = RedirectResponse(_safe_next(next), status_code=303)
        resp.delete_cookie(LOGIN_COOKIE, path=f"{UI_PREFIX}/login")
        resp.set_cookie(COOKIE, state.codec.seal(session), max_age=SESSION_SECONDS,
                        path=UI_PREFIX, httponly=True, samesite="lax",
                        secure=request.url.scheme == "https")
        return resp

    @app.post(f"{UI_PREFIX}/logout")
    async def logout(request: Request, csrf: Annotated[str, Form()] = "") -> Response:
        p = page(request)
        p.check_form(csrf)
        # a copy of the cookie ends with it, in every server process
        await run_in_threadpool(p.state.codec.revoke, p.session)
        resp = redirect(url("/login"), notice="signed out")
        resp.delete_cookie(COOKIE, path=UI_PREFIX)
        return resp

    for name in PAGE_MODULES:
        module = importlib.import_module(f"lakefs_core.ui.pages.{name}")
        app.include_router(module.router, prefix=UI_PREFIX)
    return app
