"""The S3 gateway's ASGI application (served on the API's port; see api/app.py).

Each request is served in a worker thread: SigV4 verification with the lakeFS access
key's secret, the user's effective policies, then the operation (see
:mod:`lakefs_core.gateway.operations`). Request bodies stream from the event loop
into the worker as the operation reads them; responses stream back out. Every
failure is answered as an S3 XML ``<Error>`` with the code S3 clients expect.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import anyio.from_thread
import anyio.to_thread
from starlette.responses import Response

from lakefs_core.errors import AuthenticationError, SignatureMismatchError
from lakefs_core.gateway import sigv2, sigv4, xml
from lakefs_core.gateway.authcache import AuthCache
from lakefs_core.gateway.errors import S3Error, s3_error_of
from lakefs_core.gateway.operations import Operations
from lakefs_core.gateway.request import (
    S3Request,
    header_dict,
    query_dict,
    resolve_address,
    virtual_host_bucket,
)
from lakefs_core.services import Services

log = logging.getLogger("lakefs_core.gateway")

#: how much request body one trip from the worker thread to the event loop fetches
PULL_SIZE = 1 << 20

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class Gateway:
    """An ASGI app serving the S3 protocol over the server's repositories.

    Args:
        services: The server's services.
    """

    def __init__(self, services: Services) -> None:
        self.services = services
        self.operations = Operations(services)
        self.domains = [d.lower() for d in services.config.gateways.s3.domain_name]
        self.auth = AuthCache(services.access, services.config.auth.cache)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        response = await anyio.to_thread.run_sync(self._serve, scope, receive)
        await response(scope, receive, send)

    def _serve(self, scope: Scope, receive: Receive) -> Response:
        request_id = uuid.uuid4().hex[:16].upper()
        method: str = scope["method"].upper()
        raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("utf-8", "replace")
        raw_path = raw_path.partition("?")[0]
        raw_query = scope.get("query_string", b"").decode("latin-1")
        header_pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        headers = header_dict(header_pairs)
        bucket, key = resolve_address(headers.get("host", ""), raw_path, self.domains)
        query_pairs = sigv4.parse_query(raw_query)
        presigned = any(name in ("X-Amz-Algorithm", "AWSAccessKeyId") for name, _ in query_pairs)

        async def next_chunk() -> tuple[bytes, bool]:
            # gather up to PULL_SIZE bytes per trip from the worker thread to the loop
            parts: list[bytes] = []
            size, more = 0, True
            while more and size < PULL_SIZE:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise S3Error("IncompleteBody", "the client disconnected during the upload")
                parts.append(message.get("body", b""))
                size += len(parts[-1])
                more = bool(message.get("more_body", False))
            return b"".join(parts), more

        body_left = [_has_body(headers)]

        def pull() -> tuple[bytes, bool]:
            chunk, more = anyio.from_thread.run(next_chunk)
            body_left[0] = more
            return chunk, more

        try:
            signed, user = self._authenticate(method, raw_path, raw_query, header_pairs,
                                              headers, query_pairs)
            request = S3Request(
                method=method, bucket=bucket, key=key, query=query_dict(query_pairs),
                headers=headers, signed=signed, user=user,
                policies=lambda fresh: self.auth.policies(user, fresh=fresh), pull=pull,
                host=headers.get("host", ""))
            response = self.operations.handle(request)
        except Exception as exc:  # every failure becomes an S3 error document
            response = self._error(exc, method, "/" + "/".join(p for p in (bucket, key) if p),
                                   request_id, presigned)
        response.headers["x-amz-request-id"] = request_id
        if body_left[0]:
            # answered before the body was read (a refusal, or a client still waiting
            # for "100 Continue"): the connection cannot carry another request
            response.headers["connection"] = "close"
        return response

    def _authenticate(self, method: str, raw_path: str, raw_query: str,
                      header_pairs: list[tuple[str, str]], headers: dict[str, str],
                      query_pairs: list[tuple[str, str]]) -> tuple[sigv4.SignedRequest, str]:
        owners: dict[str, str] = {}

        def verify(fresh: bool) -> sigv4.SignedRequest:
            def secret_for(access_key_id: str) -> str:
                credential = self.auth.credential(access_key_id, fresh=fresh)
                owners[access_key_id] = credential.user
                return credential.secret

            if sigv4.is_signed(header_pairs, query_pairs):
                return sigv4.verify_request(method, raw_path, raw_query, header_pairs,
                                            secret_for)
            if sigv2.is_v2_signed(headers, query_pairs):
                vhost = virtual_host_bucket(headers.get("host", ""), self.domains)
                return sigv2.verify_v2(method, raw_path, raw_query, headers, secret_for,
                                       bucket_prefix=f"/{vhost}" if vhost is not None else "")
            raise AuthenticationError("Anonymous access is not allowed: sign requests")

        try:
            signed = verify(fresh=False)
        except SignatureMismatchError:
            signed = verify(fresh=True)  # the key may have been re-created meanwhile
        return signed, owners[signed.access_key_id]

    @staticmethod
    def _error(exc: Exception, method: str, resource: str, request_id: str,
               presigned: bool) -> Response:
        info = s3_error_of(exc, presigned=presigned)
        if info.status >= 500:
            log.error("gateway %s %s failed: %s", method, resource, exc, exc_info=exc,
                      extra={"request_id": request_id, "resource": resource,
                             "s3_code": info.code})
        if method == "HEAD":
            return Response(status_code=info.status, headers=info.headers)
        body = xml.error_document(info.code, info.message, resource, request_id)
        return Response(body, status_code=info.status, headers=info.headers,
                        media_type=xml.CONTENT_TYPE)


def _has_body(headers: dict[str, str]) -> bool:
    return "transfer-encoding" in headers or headers.get("content-length", "0").strip() != "0"


def create_gateway(services: Services) -> Gateway:
    """The S3 gateway over ``services`` (an ASGI app)."""
    return Gateway(services)
