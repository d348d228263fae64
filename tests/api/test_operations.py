"""Every operation of lakeFS's REST API, as its official SDK (``lakefs_sdk``) calls
it, is served: the SDK's ``*Api`` classes give each operation's HTTP method and path
template, and the live server's OpenAPI document must have a route for each.

Only the operations that need an external identity provider are left out (the list
below says which and why); any other operation the SDK gains or a route the server
loses fails the test.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import lakefs_sdk.api
import pytest

from lakefs_testing.live_server import LiveServer, live_server

API_PREFIX = "/api/v1"

#: Operations served by lakeFS only with an external identity provider, which this
#: server does not integrate with: principals of an external IdP (AWS IAM roles)
#: attached to users, logging in as one, and logging in with a token from an OIDC
#: provider (STS). Keyed by (SDK operation, HTTP method, path template).
EXTERNAL_IDENTITY_OPERATIONS = frozenset({
    # external principals attached to users (lakeFS Enterprise, AWS IAM)
    ("create_user_external_principal", "POST", "/auth/users/{userId}/external/principals"),
    ("delete_user_external_principal", "DELETE", "/auth/users/{userId}/external/principals"),
    ("list_user_external_principals", "GET", "/auth/users/{userId}/external/principals/ls"),
    ("get_external_principal", "GET", "/auth/external/principals"),
    # logging in as an external principal (a pre-signed AWS STS GetCallerIdentity)
    ("external_principal_login", "POST", "/auth/external/principal/login"),
    # logging in with an OIDC provider's token (STS)
    ("sts_login", "POST", "/sts/login"),
})

_CALL = re.compile(r"call_api\(\s*'(?P<path>/[^']*)',\s*'(?P<method>[A-Z]+)'")


@dataclass(frozen=True, order=True)
class Operation:
    api: str
    name: str
    method: str
    path: str

    @property
    def key(self) -> tuple[str, str, str]:
        return self.name, self.method, self.path


def sdk_operations() -> Iterator[Operation]:
    """Every operation of every ``*Api`` class of the installed ``lakefs_sdk``."""
    for api_name, api in inspect.getmembers(lakefs_sdk.api, inspect.isclass):
        if not api_name.endswith("Api"):
            continue
        for name, method in inspect.getmembers(api, inspect.isfunction):
            if name.startswith("_") or not name.endswith("_with_http_info"):
                continue
            call = _CALL.search(inspect.getsource(method))
            assert call is not None, f"{api_name}.{name}: no call_api found"
            yield Operation(api_name, name.removesuffix("_with_http_info"),
                            call["method"], call["path"])


def template(path: str) -> str:
    """A path template with its parameter names erased: ``/a/{}/b``."""
    return re.sub(r"\{[^}]*\}", "{}", path)


def served_routes(openapi: dict[str, dict[str, object]]) -> set[tuple[str, str]]:
    """(method, template) of every route of an OpenAPI document's ``paths``."""
    return {(method.upper(), template(path.removeprefix(API_PREFIX)))
            for path, item in openapi.items() for method in item
            if method in ("get", "put", "post", "delete", "patch", "head", "options")}


def unserved(operations: list[Operation], routes: set[tuple[str, str]]) -> list[Operation]:
    """The operations no route serves, the external-identity ones aside."""
    return sorted(op for op in operations
                  if op.key not in EXTERNAL_IDENTITY_OPERATIONS
                  and (op.method, template(op.path)) not in routes)


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> set[tuple[str, str]]:
    server: LiveServer
    with live_server(str(tmp_path_factory.mktemp("operations"))) as server:
        doc = httpx.get(f"{server.api}/openapi.json").raise_for_status().json()
    return served_routes(doc["paths"])


@pytest.fixture(scope="module")
def operations() -> list[Operation]:
    return sorted(set(sdk_operations()))


def test_the_sdk_is_read_whole(operations: list[Operation]) -> None:
    """The listing finds lakeFS's API as the SDK has it (a parser that found nothing
    would pass the next test)."""
    apis = {op.api for op in operations}
    assert {"ObjectsApi", "BranchesApi", "CommitsApi", "AuthApi", "InternalApi",
            "ExperimentalApi", "RepositoriesApi"} <= apis
    names = {op.name for op in operations}
    assert len(names) > 120
    assert Operation("ObjectsApi", "upload_object", "POST",
                     "/repositories/{repository}/branches/{branch}/objects") in operations
    # the exclusions are all operations the SDK has (a rename would leave one stale)
    assert {op.key for op in operations} >= EXTERNAL_IDENTITY_OPERATIONS


def test_every_sdk_operation_is_served(operations: list[Operation],
                                       routes: set[tuple[str, str]]) -> None:
    missing = unserved(operations, routes)
    assert not missing, "not served:\n" + "\n".join(
        f"{op.api}.{op.name}: {op.method} {op.path}" for op in missing)


def test_a_removed_route_is_reported(operations: list[Operation],
                                     routes: set[tuple[str, str]]) -> None:
    removed = ("PUT", "/repositories/{}/branches/{}/staging/pmpu/{}/parts/{}")
    assert removed in routes
    missing = unserved(operations, routes - {removed})
    assert [op.name for op in missing] == ["upload_part"]
