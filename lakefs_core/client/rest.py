"""The transport of every REST call: pooling, retries, typed errors, pagination."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import httpx
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random_exponential

from lakefs_core.client.errors import ApiError, error_for

#: the lakeFS API's path prefix
API_PREFIX = "/api/v1"
#: statuses worth another try: throttled, or a proxy/server that may come back
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})

ErrorFactory = Callable[[str, str, int, str, str], Exception]


class _Retryable(Exception):
    """An answer with a retryable status (carried out of the retry loop)."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, httpx.TransportError | _Retryable)


def message_of(response: httpx.Response) -> str:
    """The server's ``message`` (lakeFS's error shape), or the start of the body."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body, dict) and "message" in body:
        return str(body["message"])
    return response.text[:200]


class RestClient:
    """A pooled HTTP client of one server with basic auth, bounded retries, typed errors.

    Args:
        endpoint: ``http://host:port`` of the server (paths are absolute, e.g.
            ``/api/v1/repositories``).
        access_key_id, secret_access_key: basic auth credentials.
        timeout: seconds per request.
        attempts: tries per request for transport errors and retryable statuses.
        max_connections: the pool's size.
        error_factory: builds the error raised for a failed request, from
            ``(method, path, status, message, what)``; :func:`error_for` by default.
        transport: an httpx transport (tests use ``httpx.MockTransport``).
    """

    def __init__(self, endpoint: str, access_key_id: str, secret_access_key: str, *,
                 timeout: float = 30.0, attempts: int = 3, max_connections: int = 16,
                 error_factory: ErrorFactory = error_for,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.attempts = max(1, attempts)
        self._errors = error_factory
        self._http = httpx.Client(base_url=self.endpoint, auth=(access_key_id,
                                                                secret_access_key),
                                  timeout=timeout, transport=transport,
                                  limits=httpx.Limits(max_connections=max_connections))
        #: requests sent (retries included), for status views and benchmarks
        self.requests = 0

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RestClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, *, ok: Sequence[int] = (200,),
                retry: bool = True, what: str = "", **kwargs: Any) -> httpx.Response:
        """Send a request; retry what may succeed later; raise a typed error otherwise.

        Args:
            ok: the statuses that are success.
            retry: False for a request that must not be repeated.
            what: what the request does, for the error message.
            kwargs: httpx request arguments (params, json, content, headers).

        Raises:
            ApiError (or what ``error_factory`` makes): a status not in ``ok``, or no
            answer after the bounded retries (status 0).
        """
        def once() -> httpx.Response:
            self.requests += 1
            resp = self._http.request(method, path, **kwargs)
            if resp.status_code in RETRYABLE_STATUSES and resp.status_code not in ok:
                raise _Retryable(resp)
            return resp

        try:
            for attempt in Retrying(retry=retry_if_exception(_retryable),
                                    stop=stop_after_attempt(self.attempts if retry else 1),
                                    wait=wait_random_exponential(multiplier=0.1, max=2),
                                    reraise=True):
                with attempt:
                    resp = once()
        except _Retryable as e:
            resp = e.response
        except httpx.TransportError as e:
            raise self._errors(method, path, 0, f"server {self.endpoint} unreachable: {e}",
                               what) from e
        if resp.status_code not in ok:
            raise self._errors(method, path, resp.status_code, message_of(resp), what)
        return resp

    @contextlib.contextmanager
    def stream(self, method: str, path: str, *, ok: Sequence[int] = (200,), what: str = "",
               **kwargs: Any) -> Iterator[httpx.Response]:
        """Send one request (no retry) and yield the response with its body unread.

        For bodies too large to hold in memory either way: an upload from a generator, a
        download read with ``iter_bytes``.

        Raises:
            ApiError (or what ``error_factory`` makes): a status not in ``ok``, or no answer.
        """
        self.requests += 1
        try:
            with self._http.stream(method, path, **kwargs) as resp:
                if resp.status_code not in ok:
                    resp.read()
                    raise self._errors(method, path, resp.status_code, message_of(resp), what)
                yield resp
        except httpx.TransportError as e:
            raise self._errors(method, path, 0, f"server {self.endpoint} unreachable: {e}",
                               what) from e

    def pages(self, path: str, *, params: Mapping[str, Any] | None = None,
              page_size: int = 1000, what: str = "") -> Iterator[dict[str, Any]]:
        """Every result of a paginated listing (lakeFS's ``Pagination``), page by page."""
        after = ""
        while True:
            query = {**(params or {}), "amount": page_size}
            if after:
                query["after"] = after
            body = self.request("GET", path, what=what, params=query).json()
            yield from body.get("results", [])
            pagination = body.get("pagination") or {}
            if not pagination.get("has_more"):
                return
            after = pagination.get("next_offset", "")


__all__ = ["API_PREFIX", "RETRYABLE_STATUSES", "ApiError", "RestClient", "message_of"]
