"""One place that maps typed errors to HTTP status codes and lakeFS's JSON shape.

Every HTTP front door of the product (the REST API, the replication service) installs
these handlers; :mod:`lakefs_core.api` re-exports them as ``lakefs_core.api.errors``.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from lakefs_core import errors

log = logging.getLogger("lakefs_core.api")

__all__ = ["STATUS", "error_response", "exception_response", "failure_response",
           "install_error_handlers", "status_of"]

# most specific first: the first matching class decides
STATUS: list[tuple[type[BaseException], int]] = [
    (errors.TooManySignInsError, 429),
    (errors.RangeNotSatisfiableError, 416),
    (errors.PayloadTooLargeError, 413),
    (errors.RequestTimeoutError, 408),
    (errors.ObjectExistsError, 412),
    (errors.PreconditionFailedError, 412),
    (errors.ValidationError, 400),
    (errors.NoChangesError, 400),
    (errors.DirtyBranchError, 400),
    (errors.CannotDeleteDefaultBranchError, 400),
    (errors.AuthenticationError, 401),
    (errors.ForbiddenError, 403),
    (errors.NotFoundError, 404),
    (errors.AlreadyExistsError, 409),
    (errors.ConflictError, 409),
    (errors.SecretDecryptionError, 500),
    (errors.NotImplementedByServerError, 501),
    (errors.StorageError, 503),
    (errors.DatabaseError, 503),
]


def status_of(exc: BaseException) -> int:
    for cls, status in STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def error_response(status: int, message: str, *, retry_after: int | None = None,
                   ) -> JSONResponse:
    # a message may quote input that is no valid text (a lone surrogate): escape it
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    headers = {"WWW-Authenticate": 'Basic realm="lakefs"'} if status == 401 else {}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    return JSONResponse({"message": message}, status_code=status, headers=headers)


def exception_response(exc: errors.LakeFSError, message: str | None = None) -> JSONResponse:
    """The answer to ``exc``: its status, ``message`` (its own by default) and, for a
    client that must wait, when to try again."""
    return error_response(status_of(exc), message or str(exc) or type(exc).__name__,
                          retry_after=exc.retry_after
                          if isinstance(exc, errors.TooManySignInsError) else None)


def failure_response(exc: errors.LakeFSError) -> JSONResponse:
    """The answer of a request that failed with ``exc`` (logged when it is the server's
    fault)."""
    if status_of(exc) >= 500:
        log.error("request failed: %s", exc, exc_info=exc)
    message = None
    if isinstance(exc, errors.MergeConflictError):
        message = "conflict found" if not exc.paths else f"conflict found: {exc.paths[:10]}"
    return exception_response(exc, message)


#: lakeFS's error body
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["message"],
    "properties": {"message": {"type": "string", "description": "what went wrong"}},
}
#: error answers documented on every operation, besides ``default`` (any other status)
DOCUMENTED_ERRORS = {"400": "Bad Request", "401": "Unauthorized", "403": "Forbidden",
                     "404": "Resource Not Found"}


def document_errors(app: FastAPI) -> None:
    """Document the error answers in the app's OpenAPI document as lakeFS's does: an
    ``Error`` body for 400, 401, 403, 404 and (``default``) any other status, on every
    operation; and no 422, which the handlers below answer with 400."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = generate()
        document.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
        error = {"content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/Error"}}}}
        for operations in document.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.setdefault("responses", {})
                responses.pop("422", None)
                for status, text in DOCUMENTED_ERRORS.items():
                    responses.setdefault(status, {"description": text, **error})
                responses.setdefault("default", {"description": "Internal Server Error",
                                                 **error})
        for unused in ("HTTPValidationError", "ValidationError"):
            document["components"]["schemas"].pop(unused, None)
        app.openapi_schema = document
        return document

    app.openapi = openapi  # type: ignore[method-assign]


def install_error_handlers(app: FastAPI) -> None:
    """Answer errors with lakeFS's JSON error shape, and document them so."""
    document_errors(app)

    @app.exception_handler(errors.LakeFSError)
    async def _lakefs_error(_request: Request, exc: errors.LakeFSError) -> JSONResponse:
        return failure_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(_request: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
            parts.append(f"{loc}: {err.get('msg')}" if loc else str(err.get("msg")))
        return error_response(400, "; ".join(parts) or "bad request")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, str(exc.detail))
