"""Typed errors of the versioning server.

Every failure that a caller can act on has its own class. The REST API and the S3
gateway map these to status codes in one place; nothing below them knows HTTP.
"""

from __future__ import annotations

import math


class LakeFSError(Exception):
    """Base of every error raised by lakefs_core."""


# --- bad input -----------------------------------------------------------------
class ValidationError(LakeFSError, ValueError):
    """An argument is malformed (a name, a ref expression, a path, a config value)."""


class RangeNotSatisfiableError(ValidationError):
    """A byte range outside the object (HTTP 416)."""


class PayloadTooLargeError(ValidationError):
    """A request body larger than the server reads for that request (HTTP 413)."""


class RequestTimeoutError(ValidationError):
    """A request body stopped arriving, or arrived too slowly (HTTP 408; S3's
    ``RequestTimeout``)."""


class IncompleteBodyError(ValidationError):
    """The client went away before its request body ended."""


class NonEmptyRepositoryError(ValidationError):
    """A restore's target repository already has commits, tags or branch heads."""


class OperationNotSupportedError(ValidationError):
    """The blockstore cannot do this (such as pre-signing on the local store): 400, as
    lakeFS answers for its adapters' unsupported operations."""


class LinkAddressError(ValidationError):
    """A physical address to link that the server did not hand out for the repository,
    or whose handout expired or was already linked (lakeFS's bad address token)."""

    def __init__(self, message: str = "bad address token (expired or invalid)") -> None:
        super().__init__(message)


class InvalidRefError(ValidationError):
    """A ref expression cannot be parsed."""


# --- not found -----------------------------------------------------------------
class NotFoundError(LakeFSError):
    """Something that was asked for does not exist."""


class RepositoryNotFoundError(NotFoundError):
    pass


class BranchNotFoundError(NotFoundError):
    pass


class TagNotFoundError(NotFoundError):
    pass


class CommitNotFoundError(NotFoundError):
    pass


class RefNotFoundError(NotFoundError):
    """A ref expression names no branch, tag or commit."""


class ObjectNotFoundError(NotFoundError):
    """No object at this path (in the ref) or at this physical address (in the store)."""


class PullRequestNotFoundError(NotFoundError):
    pass


class RangeNotFoundError(NotFoundError):
    """A range or metarange file is missing from the storage namespace."""


class ImportNotFoundError(NotFoundError):
    def __init__(self, message: str = "import not found") -> None:
        super().__init__(message)


class StorageNotFoundError(NotFoundError):
    """No blockstore is configured with this storage id."""


class OrphanedRepositoriesError(StorageNotFoundError):
    """At start: repositories are bound to storage ids that the configuration no longer
    has, so the server refuses to start (as lakeFS) rather than fail on their first use.

    Attributes:
        repositories: ``(repository id, storage id)`` of each such repository.
    """

    def __init__(self, message: str, repositories: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.repositories = repositories


class BranchProtectionRuleNotFoundError(NotFoundError):
    """The repository has no protection rule with that pattern."""

    def __init__(self, message: str = "branch protection rule does not exist: not found"
                 ) -> None:
        super().__init__(message)


class ActionRunNotFoundError(NotFoundError):
    """No action run (or hook run) by that id."""


# --- already exists / conflicts ------------------------------------------------
class AlreadyExistsError(LakeFSError):
    pass


class RepositoryExistsError(AlreadyExistsError):
    pass


class BranchExistsError(AlreadyExistsError):
    pass


class TagExistsError(AlreadyExistsError):
    pass


class CommitExistsError(AlreadyExistsError):
    pass


class BranchProtectionRuleExistsError(AlreadyExistsError):
    """The repository already has a protection rule with that pattern."""

    def __init__(self, message: str = "branch protection rule already exists: not unique"
                 ) -> None:
        super().__init__(message)


class ObjectExistsError(AlreadyExistsError):
    """A conditional write (If-None-Match: *) found an object at the path."""


class PreconditionFailedError(LakeFSError):
    """A conditional write (If-Match) found no object at the path, or another ETag."""


class ConflictError(LakeFSError):
    """The operation conflicts with the current state."""


class BranchChangedError(ConflictError):
    """A compare-and-swap on a branch lost the race: the branch moved meanwhile."""


class PullRequestChangedError(ConflictError):
    """A pull request changed status between reading and updating it."""


class MergeConflictError(ConflictError):
    """A merge or cherry-pick found paths changed differently on both sides."""

    def __init__(self, message: str = "conflict", paths: list[str] | None = None) -> None:
        super().__init__(message)
        self.paths = paths or []


class NoChangesError(LakeFSError):
    """Nothing to commit or merge."""

    def __init__(self, message: str = "no changes") -> None:
        super().__init__(message)


class DirtyBranchError(LakeFSError):
    """The branch has uncommitted changes and the operation needs a clean branch."""

    def __init__(self, message: str = "uncommitted changes (dirty branch)") -> None:
        super().__init__(message)


class CannotDeleteDefaultBranchError(LakeFSError):
    pass


# --- refused ---------------------------------------------------------------------
class ForbiddenError(LakeFSError):
    """The operation is not allowed on this resource."""


class ReadOnlyRepositoryError(ForbiddenError):
    """The repository is read-only (for example a mirror)."""

    def __init__(self, message: str = "read-only repository") -> None:
        super().__init__(message)


class ProtectedBranchError(ForbiddenError):
    """The branch is protected: direct writes and commits are refused."""

    def __init__(self, message: str = "cannot write to protected branch") -> None:
        super().__init__(message)


class StorageError(LakeFSError):
    """The object store failed (network, permissions, corrupt data)."""


class NotImplementedByServerError(LakeFSError):
    """An API this server's configuration does not offer (501), such as the pre-signed
    multipart upload on a store that cannot pre-sign."""


# --- authentication and authorization --------------------------------------------
class AuthenticationError(LakeFSError):
    """The caller's credentials are missing, unknown or wrong."""


class TooManySignInsError(LakeFSError):
    """A client failed to sign in too often of late: it may try again in ``retry_after``
    seconds (429; S3 ``SlowDown``). Its secret is not checked meanwhile."""

    def __init__(self, retry_after: float) -> None:
        self.retry_after = max(1, math.ceil(retry_after))
        super().__init__(f"too many failed sign-ins: try again in {self.retry_after} seconds")


class InvalidAccessKeyIdError(AuthenticationError):
    """A signed request names an access key id that does not exist."""


class SignatureMismatchError(AuthenticationError):
    """A request's signature differs from the one computed with the key's secret."""


class MalformedAuthorizationError(AuthenticationError):
    """The signature fields of a request (header or query) cannot be parsed."""


class HeadersNotSignedError(AuthenticationError):
    """A request carries ``x-amz-*`` headers (or a host) that its signature does not
    cover, so they could have been added by anyone (S3's "HeadersNotSigned")."""


class WrongSigningScopeError(MalformedAuthorizationError):
    """A signature's credential scope names another region or service than this
    endpoint's.

    Attributes:
        region: the region this endpoint expects (S3 clients may retry with it).
    """

    def __init__(self, message: str, region: str) -> None:
        super().__init__(message)
        self.region = region


class RequestExpiredError(AuthenticationError):
    """A presigned request is past its expiry (or not valid yet)."""


class RequestTimeTooSkewedError(AuthenticationError):
    """A signed request's date is too far from the server's clock."""


class PermissionDeniedError(ForbiddenError):
    """The authenticated user's policies do not allow the operation."""

    def __init__(self, message: str = "insufficient permissions") -> None:
        super().__init__(message)


class SecretDecryptionError(LakeFSError):
    """A stored secret cannot be decrypted: ``auth.encrypt.secret_key`` differs from the
    key it was encrypted with, or the stored value is corrupt."""


class DatabaseError(LakeFSError):
    """The metadata database (the refstore's SQLite file or PostgreSQL) failed or is
    unreachable."""
