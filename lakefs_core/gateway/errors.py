"""S3 error codes: the gateway's one mapping from typed errors to S3 answers.

Engine, catalog and auth failures are the typed errors of :mod:`lakefs_core.errors`;
:func:`s3_error_of` turns each into the status and ``<Code>`` S3 clients expect.
Conditions that exist only in the S3 protocol (an unknown multipart upload id, a
malformed XML body, a part too small) are raised as :class:`S3Error` with their code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lakefs_core import errors


class S3Error(errors.LakeFSError):
    """A failure stated directly in S3 terms (the gateway's HTTP-level answer).

    Args:
        code: The S3 error code (``NoSuchUpload``, ``MalformedXML``, ...).
        message: Human-readable text for ``<Message>``.
        status: The HTTP status.
        headers: Extra response headers (``Content-Range`` of a 416).
    """

    def __init__(self, code: str, message: str, status: int = 400,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.status = status
        self.headers = dict(headers or {})


@dataclass(frozen=True)
class S3ErrorInfo:
    """How one failure is answered: HTTP status, S3 code and message."""

    status: int
    code: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)
    #: further elements of the ``<Error>`` document (``Region``), in order
    extra: tuple[tuple[str, str], ...] = ()


# most specific first: the first matching class decides
_CODES: list[tuple[type[BaseException], int, str]] = [
    (errors.InvalidAccessKeyIdError, 403, "InvalidAccessKeyId"),
    (errors.SignatureMismatchError, 403, "SignatureDoesNotMatch"),
    (errors.RequestTimeTooSkewedError, 403, "RequestTimeTooSkewed"),
    (errors.RequestExpiredError, 403, "AccessDenied"),
    (errors.HeadersNotSignedError, 403, "AccessDenied"),
    (errors.MalformedAuthorizationError, 400, "AuthorizationHeaderMalformed"),
    (errors.AuthenticationError, 403, "AccessDenied"),
    (errors.ReadOnlyRepositoryError, 403, "AccessDenied"),
    (errors.ProtectedBranchError, 403, "AccessDenied"),
    (errors.ForbiddenError, 403, "AccessDenied"),
    (errors.RangeNotSatisfiableError, 416, "InvalidRange"),
    (errors.RequestTimeoutError, 400, "RequestTimeout"),
    (errors.IncompleteBodyError, 400, "IncompleteBody"),
    (errors.PayloadTooLargeError, 400, "MaxMessageLengthExceeded"),
    (errors.ObjectExistsError, 412, "PreconditionFailed"),
    (errors.PreconditionFailedError, 412, "PreconditionFailed"),
    (errors.ValidationError, 400, "InvalidArgument"),
    (errors.RepositoryNotFoundError, 404, "NoSuchBucket"),
    (errors.StorageNotFoundError, 404, "NoSuchBucket"),
    (errors.NotFoundError, 404, "NoSuchKey"),
    (errors.AlreadyExistsError, 409, "OperationAborted"),
    (errors.ConflictError, 409, "OperationAborted"),
    (errors.StorageError, 503, "ServiceUnavailable"),
    (errors.DatabaseError, 503, "ServiceUnavailable"),
]


def s3_error_of(exc: BaseException, *, presigned: bool = False) -> S3ErrorInfo:
    """The S3 answer to ``exc`` (500 ``InternalError`` for anything unexpected).

    Args:
        exc: The failure.
        presigned: Whether the request was presigned (malformed query signatures are
            ``AuthorizationQueryParametersError`` rather than a header error).
    """
    if isinstance(exc, S3Error):
        return S3ErrorInfo(exc.status, exc.code, str(exc), exc.headers)
    if isinstance(exc, errors.TooManySignInsError):
        return S3ErrorInfo(503, "SlowDown", f"Please reduce your request rate: {exc}",
                           {"retry-after": str(exc.retry_after)})
    if isinstance(exc, errors.WrongSigningScopeError):
        code = "AuthorizationQueryParametersError" if presigned else "AuthorizationHeaderMalformed"
        return S3ErrorInfo(400, code, str(exc), extra=(("Region", exc.region),))
    if presigned and isinstance(exc, errors.MalformedAuthorizationError):
        return S3ErrorInfo(400, "AuthorizationQueryParametersError", str(exc))
    for cls, status, code in _CODES:
        if isinstance(exc, cls):
            return S3ErrorInfo(status, code, str(exc) or code)
    return S3ErrorInfo(500, "InternalError", "We encountered an internal error. Please try again.")
