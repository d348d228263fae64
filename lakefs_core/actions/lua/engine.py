"""lakeFS's ``lakefs`` Lua module over this server's engine, run in the server process.

A script's ``lakefs.*`` calls arrive from its worker process (see
:mod:`lakefs_core.actions.lua.pool`) with their arguments as plain values (Lua strings
as ``bytes``, tables as dicts and lists). Each call answers what the REST call of the
same name would: its status code and body (a table, or a string where lakeFS gives
one).

A call acts as the user whose request made the event (``HookRecord.acting_user``), as
lakeFS runs it with that user's credentials: it needs the permission the REST route
checks, on the same resource (``fs:ReadObject`` on the object for ``get_object``,
``fs:CreateTag`` on the tag for ``create_tag``...), and a refused call answers 403
``{"message": "insufficient permissions"}``, never the data. An event the server made
itself (no acting user, such as the branch housekeeping's deletions) and an engine
with no authorizer get 403 for every call: nobody's permissions cover them. Calls are
also limited to the hook's own repository.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from lakefs_core.actions.lua.sandbox import integer, text
from lakefs_core.auth import rbac
from lakefs_core.block.base import join_address
from lakefs_core.errors import (
    AlreadyExistsError,
    ConflictError,
    ForbiddenError,
    LakeFSError,
    NotFoundError,
    PreconditionFailedError,
    ValidationError,
)
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.graveler.model import AddressType, Difference, Entry, Repository

#: the body of a refused call, as lakeFS answers it
DENIED = {"message": "insufficient permissions"}


class Grantee(Protocol):
    """A user's effective policies (:class:`~lakefs_core.auth.service.Principal`)."""

    def allowed(self, requirement: rbac.Requirement) -> bool:
        """Whether the policies allow ``requirement``."""
        ...


class HookAuthorizer(Protocol):
    """Where a hook's calls find the acting user's policies
    (:class:`~lakefs_core.auth.service.AuthService`)."""

    def principal(self, username: str) -> Grantee:
        """The user's policies. Raises NotFoundError for an unknown user."""
        ...


def _status(exc: LakeFSError) -> int:
    for cls, code in ((NotFoundError, 404), (ValidationError, 400), (ForbiddenError, 403),
                      (AlreadyExistsError, 409), (ConflictError, 409),
                      (PreconditionFailedError, 412)):
        if isinstance(exc, cls):
            return code
    return 500


def _opt(args: tuple[Any, ...], i: int) -> Any:
    return args[i] if len(args) > i else None


def _amount(value: Any) -> int:
    return integer(value) if value is not None else 1000


@dataclass
class LakeFSModule:
    """One hook run's ``lakefs`` calls (see module doc).

    Args:
        graveler: the engine.
        repository: the hook's repository; calls on any other answer 403.
        user: the acting user's id ("" when nobody's request made the event).
        authorizer: the users' policies; None refuses every call.
    """

    graveler: Graveler
    repository: Repository
    user: str = ""
    authorizer: HookAuthorizer | None = None
    _grantee: Grantee | None = field(default=None, init=False, repr=False)

    def call(self, name: str, args: list[Any]) -> list[Any]:
        """Run ``lakefs.<name>(*args)``; the values it returns to the script.

        Raises:
            LookupError: no such function.
            TypeError / ValueError: malformed arguments (a Lua error in the script).
        """
        spec = _FUNCTIONS.get(name)
        if spec is None:
            raise LookupError(f"lakefs.{name}: no such function")
        if not args:
            raise TypeError(f"lakefs.{name}: repository_id expected")
        repo_id, rest = text(args[0], "repository_id"), tuple(args[1:])
        if repo_id != self.repository.id:
            code, body = 403, {"message": "a hook may only use its own repository"}
        else:
            try:
                permission = spec.permission(self.repository.id, rest)
                if not self._allowed(permission):
                    code, body = 403, DENIED
                else:
                    code, body = spec.run(self, rest)
                    if spec.no_body:
                        return [code]
                    return [code, body]
            except LakeFSError as exc:
                code, body = _status(exc), {"message": str(exc)}
        return [code, json.dumps(body) if spec.string_body else body]

    def _allowed(self, permission: rbac.Permission) -> bool:
        if not self.user or self.authorizer is None:
            return False
        if self._grantee is None:
            try:
                self._grantee = self.authorizer.principal(self.user)
            except NotFoundError:
                return False
        return self._grantee.allowed(permission)

    # -- the calls -----------------------------------------------------------------------
    def _address(self, entry: Entry) -> str:
        if entry.address_type is AddressType.FULL:
            return entry.address
        return join_address(self.repository.storage_namespace, entry.address)

    def _stats(self, path: str, entry: Entry, user_metadata: bool = True) -> dict[str, Any]:
        stats: dict[str, Any] = {
            "path": path, "path_type": "object", "physical_address": self._address(entry),
            "checksum": entry.etag, "size_bytes": entry.size, "mtime": int(entry.mtime),
            "content_type": entry.content_type}
        if user_metadata:
            stats["metadata"] = dict(entry.metadata)
        return stats

    @staticmethod
    def _page(results: list[dict[str, Any]], more: bool, amount: int) -> dict[str, Any]:
        return {"pagination": {"has_more": more, "max_per_page": amount,
                               "results": len(results),
                               "next_offset": results[-1]["path"] if more else ""},
                "results": results}

    def list_objects(self, args: tuple[Any, ...]) -> tuple[int, Any]:
        ref, after, prefix, delimiter, amount, user_md = (_opt(args, i) for i in range(6))
        n = _amount(amount)
        items, more = self.graveler.list_entries(
            self.repository.id, text(ref), prefix=text(prefix or b""),
            after=text(after or b""), amount=n, delimiter=text(delimiter or b""))
        results = [self._stats(i.path, i.entry, user_md is not False) if i.entry else
                   {"path": i.path, "path_type": "common_prefix", "physical_address": "",
                    "checksum": "", "mtime": 0} for i in items]
        return 200, self._page(results, more, n)

    def get_object(self, args: tuple[Any, ...]) -> tuple[int, Any]:
        ref, path = _opt(args, 0), _opt(args, 1)
        entry = self.graveler.get_entry(self.repository.id, text(ref), text(path))
        store = self.graveler.store_for(self.repository.storage_id)
        return 200, store.get(self._address(entry))

    def stat_object(self, args: tuple[Any, ...]) -> tuple[int, Any]:
        ref, path, user_metadata = _opt(args, 0), _opt(args, 1), _opt(args, 2)
        entry = self.graveler.get_entry(self.repository.id, text(ref), text(path))
        return 200, json.dumps(self._stats(text(path), entry, user_metadata is not False))

    def _diffs(self, diffs: list[Difference], more: bool, amount: int) -> dict[str, Any]:
        results = [{"path": d.path, "path_type": "object", "type": d.type.value,
                    **({"size_bytes": (d.right or d.left).size}  # type: ignore[union-attr]
                       if (d.right or d.left) else {})} for d in diffs]
        return self._page(results, more, amount)

    def diff_refs(self, args: tuple[Any, ...]) -> tuple[int, Any]:
        left, right, after, prefix, _delimiter, amount = (_opt(args, i) for i in range(6))
        n = _amount(amount)
        # the API's default diff: three-dot, from the refs' merge base
        diffs, more = self.graveler.diff(self.repository.id, text(left), text(right),
                                         prefix=text(prefix or b""),
                                         after=text(after or b""), amount=n, three_dot=True)
        return 200, self._diffs(diffs, more, n)

    def diff_branch(self, args: tuple[Any, ...]) -> tuple[int, Any]:
        branch, after, amount, prefix = (_opt(args, i) for i in range(4))
        n = _amount(amount)
        diffs, more = self.graveler.diff_uncommitted(
            self.repository.id, text(branch), prefix=text(prefix or b""),
            after=text(after or b""), amount=n)
        return 200, self._diffs(diffs, more, n)

    def update_object_user_metadata(self, args: tuple[Any, ...]) -> tuple[int, Any]:
        """Replace the object's user metadata on the branch (staged, as the API does)."""
        branch, path, metadata = (_opt(args, i) for i in range(3))
        md = metadata if metadata not in (None, []) else {}
        if not isinstance(md, dict) or not all(isinstance(v, str) for v in md.values()):
            raise TypeError("metadata: a table of strings expected")
        b, p = text(branch), text(path)
        entry = self.graveler.get_entry(self.repository.id, b, p)
        self.graveler.set_entry(self.repository.id, b, p, replace(entry, metadata=md))
        return 201, None

    def create_tag(self, args: tuple[Any, ...]) -> tuple[int, Any]:
        ref, tag_id = _opt(args, 0), _opt(args, 1)
        tag = self.graveler.create_tag(self.repository.id, text(tag_id), text(ref),
                                       user=self.user)
        return 201, {"id": tag.name, "commit_id": tag.commit_id}


@dataclass(frozen=True, slots=True)
class _Function:
    run: Callable[[LakeFSModule, tuple[Any, ...]], tuple[int, Any]]
    #: the permission the matching REST route checks, from (repository, arguments)
    permission: Callable[[str, tuple[Any, ...]], rbac.Permission]
    #: the body as JSON text (lakeFS gives these as strings)
    string_body: bool = False
    #: a success answers the status code alone (an empty response)
    no_body: bool = False


def _on_repo(action: str) -> Callable[[str, tuple[Any, ...]], rbac.Permission]:
    return lambda repo, _args: rbac.Permission(action, rbac.repository_arn(repo))


def _on_object(action: str, path_index: int) -> Callable[[str, tuple[Any, ...]],
                                                         rbac.Permission]:
    return lambda repo, args: rbac.Permission(
        action, rbac.object_arn(repo, text(_opt(args, path_index) or b"", "path")))


_FUNCTIONS: Mapping[str, _Function] = {
    "list_objects": _Function(LakeFSModule.list_objects, _on_repo(rbac.LIST_OBJECTS)),
    "get_object": _Function(LakeFSModule.get_object, _on_object(rbac.READ_OBJECT, 1),
                            string_body=True),
    "stat_object": _Function(LakeFSModule.stat_object, _on_object(rbac.READ_OBJECT, 1),
                             string_body=True),
    "diff_refs": _Function(LakeFSModule.diff_refs, _on_repo(rbac.LIST_OBJECTS)),
    "diff_branch": _Function(LakeFSModule.diff_branch, _on_repo(rbac.LIST_OBJECTS)),
    "update_object_user_metadata": _Function(
        LakeFSModule.update_object_user_metadata, _on_object(rbac.WRITE_OBJECT, 1),
        no_body=True),
    "create_tag": _Function(LakeFSModule.create_tag, lambda repo, args: rbac.Permission(
        rbac.CREATE_TAG, rbac.tag_arn(repo, text(_opt(args, 1) or b"", "tag_id")))),
}

#: the functions of the ``lakefs`` module
FUNCTIONS = tuple(_FUNCTIONS)
