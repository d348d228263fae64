"""The product's REST client: retries, typed errors and paging."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from lakefs_core import errors
from lakefs_core.client import ApiError, RestClient, ServerRequestError

Handler = Callable[[httpx.Request], httpx.Response]


def client(handler: Handler, attempts: int = 3) -> RestClient:
    return RestClient("http://lakefs.test", "key", "secret", attempts=attempts,
                      transport=httpx.MockTransport(handler))


def answers(*responses: httpx.Response) -> tuple[Handler, list[httpx.Request]]:
    """A handler giving these answers in turn, and the requests it saw."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return responses[min(len(seen), len(responses)) - 1]

    return handle, seen


def error(status: int, message: str) -> httpx.Response:
    return httpx.Response(status, json={"message": message})


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_retryable_statuses_are_retried(status: int) -> None:
    handle, seen = answers(error(status, "busy"), httpx.Response(200, json={"ok": True}))
    with client(handle) as c:
        assert c.request("GET", "/api/v1/x").json() == {"ok": True}
    assert len(seen) == 2 and seen[0].headers["authorization"].startswith("Basic ")


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 412, 500])
def test_other_statuses_are_not_retried(status: int) -> None:
    handle, seen = answers(error(status, "nope"))
    with client(handle) as c, pytest.raises(ApiError) as caught:
        c.request("GET", "/api/v1/x")
    assert len(seen) == 1
    assert (caught.value.status, caught.value.message) == (status, "nope")


def test_retries_are_bounded_and_end_in_a_typed_error() -> None:
    handle, seen = answers(error(503, "down"))
    with client(handle, attempts=3) as c, pytest.raises(ServerRequestError) as caught:
        c.request("GET", "/api/v1/x")
    assert len(seen) == 3 and caught.value.unreachable
    handle, seen = answers(error(503, "down"))
    with client(handle) as c, pytest.raises(ServerRequestError):
        c.request("POST", "/api/v1/x", retry=False)
    assert len(seen) == 1


def test_transport_errors_are_retried_then_status_zero() -> None:
    calls: list[int] = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.ConnectError("refused", request=request)

    with client(handle, attempts=2) as c, pytest.raises(ServerRequestError) as caught:
        c.request("GET", "/api/v1/x")
    assert len(calls) == 2 and caught.value.status == 0 and "unreachable" in str(caught.value)


@pytest.mark.parametrize(("status", "message", "typed"), [
    (400, "bad", errors.ValidationError),
    (400, "no changes", errors.NoChangesError),
    (400, "commit: no changes", errors.NoChangesError),
    (401, "who", errors.AuthenticationError),
    (403, "insufficient permissions", errors.ForbiddenError),
    (403, "repository 'm' is read-only", errors.ReadOnlyRepositoryError),
    (404, "not found", errors.NotFoundError),
    (409, "conflict", errors.ConflictError),
    (412, "exists", errors.ObjectExistsError),
])
def test_errors_are_typed_by_status(status: int, message: str,
                                    typed: type[errors.LakeFSError]) -> None:
    handle, _ = answers(error(status, message))
    with client(handle) as c, pytest.raises(typed) as caught:
        c.request("GET", "/api/v1/x", what="read x")
    assert isinstance(caught.value, ApiError)
    assert str(caught.value) == f"read x: {message}"


def test_pages_follow_next_offset() -> None:
    pages = {
        "": {"results": [{"id": "a"}, {"id": "b"}],
             "pagination": {"has_more": True, "next_offset": "b"}},
        "b": {"results": [{"id": "c"}], "pagination": {"has_more": False, "next_offset": ""}},
    }
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=pages[request.url.params.get("after", "")])

    with client(handle) as c:
        ids = [r["id"] for r in c.pages("/api/v1/things", params={"prefix": "p"}, page_size=2)]
    assert ids == ["a", "b", "c"]
    assert [dict(r.url.params) for r in seen] == [
        {"prefix": "p", "amount": "2"}, {"prefix": "p", "amount": "2", "after": "b"}]
    assert c.requests == 2
