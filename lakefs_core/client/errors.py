"""Errors of a REST call, typed by the answer's status.

Each one is an :class:`ApiError` (status, method, path and the server's message) and
also the error of :mod:`lakefs_core.errors` that the status stands for, so callers
catch what they mean (``NotFoundError``, ``NoChangesError``, ...) whichever client
raised it.
"""

from __future__ import annotations

from lakefs_core import errors


class ApiError(errors.LakeFSError):
    """The server answered with an error status, or could not be reached (status 0).

    Attributes:
        method, path: the request.
        status: the HTTP status, 0 when no answer came.
        message: the server's ``message`` field, or the response text.
    """

    def __init__(self, method: str, path: str, status: int, message: str,
                 what: str = "") -> None:
        prefix = what or f"{method} {path}"
        super().__init__(f"{prefix}: {message}" if status in (0, *_TYPED)
                         else f"{prefix}: {message} (HTTP {status})")
        self.method = method
        self.path = path
        self.status = status
        self.message = message

    @property
    def unreachable(self) -> bool:
        """The server did not answer, or answered that what is behind it did not."""
        return self.status in (0, 502, 503, 504)


class ServerRequestError(ApiError):
    """The server could not be reached, or failed (5xx) after bounded retries."""


class ApiValidationError(ApiError, errors.ValidationError):
    pass


class ApiNoChangesError(ApiError, errors.NoChangesError):
    pass


class ApiAuthenticationError(ApiError, errors.AuthenticationError):
    pass


class ApiForbiddenError(ApiError, errors.ForbiddenError):
    pass


class ApiReadOnlyError(ApiError, errors.ReadOnlyRepositoryError):
    pass


class ApiNotFoundError(ApiError, errors.NotFoundError):
    pass


class ApiConflictError(ApiError, errors.ConflictError):
    pass


class ApiPreconditionFailedError(ApiError, errors.ObjectExistsError):
    pass


_TYPED: dict[int, type[ApiError]] = {
    400: ApiValidationError,
    401: ApiAuthenticationError,
    403: ApiForbiddenError,
    404: ApiNotFoundError,
    409: ApiConflictError,
    412: ApiPreconditionFailedError,
}


def error_for(method: str, path: str, status: int, message: str, what: str = "") -> ApiError:
    """The typed error of an answer (``status`` 0: no answer at all)."""
    if status == 400 and message.endswith("no changes"):  # lakeFS: "commit: no changes"
        return ApiNoChangesError(method, path, status, message, what)
    if status == 403 and "read-only" in message:
        return ApiReadOnlyError(method, path, status, message, what)
    cls = _TYPED.get(status)
    if cls is not None:
        return cls(method, path, status, message, what)
    if status == 0 or status >= 500:
        return ServerRequestError(method, path, status, message, what)
    return ApiError(method, path, status, message, what)
