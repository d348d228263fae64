"""The S3 gateway's ASGI application (served on the API's port; see api/app.py).

Each request is served in a worker thread of the gateway's own pool: SigV4 verification
with the lakeFS access key's secret, the user's effective policies, then the operation
(see :mod:`lakefs_core.gateway.operations`). Request bodies stream from the event loop
into the worker as the operation reads them, each piece within a deadline (see
:mod:`lakefs_core.protocol.bodies`); responses stream back out. Every
failure is answered as an S3 XML ``<Error>`` with the code S3 clients expect.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from starlette.responses import Response

from lakefs_core.auth.service import AuthView
from lakefs_core.errors import (
    AuthenticationError,
    InvalidAccessKeyIdError,
    SignatureMismatchError,
)
from lakefs_core.gateway import sigv2, sigv4, xml
from lakefs_core.gateway.errors import s3_error_of
from lakefs_core.gateway.operations import Operations
from lakefs_core.gateway.request import (
    S3Request,
    header_dict,
    query_dict,
    resolve_address,
    virtual_host_bucket,
)
from lakefs_core.protocol.bodies import BodyReader, has_body
from lakefs_core.services import Services

log = logging.getLogger("lakefs_core.gateway")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass(frozen=True)
class _Incoming:
    """What the gateway reads of a request before serving it."""

    request_id: str
    method: str
    raw_path: str
    raw_query: str
    header_pairs: list[tuple[str, str]]
    headers: dict[str, str]
    bucket: str
    key: str
    query_pairs: list[tuple[str, str]]
    presigned: bool
    #: the client's address (what failed signatures are counted by)
    address: str

    @property
    def resource(self) -> str:
        return "/" + "/".join(p for p in (self.bucket, self.key) if p)


class Gateway:
    """An ASGI app serving the S3 protocol over the server's repositories.

    Requests are served by worker threads of the gateway's own pool
    (``http.transfer_threads``), never by those of the REST API. A request with a
    body is authenticated before its body is read; its first piece is then gathered on
    the event loop, so a slow sender holds no thread, and every piece must arrive
    within ``http.request_body_timeout``.

    Args:
        services: The server's services.
    """

    def __init__(self, services: Services) -> None:
        self.services = services
        self.operations = Operations(services)
        self.domains = [d.lower() for d in services.config.gateways.s3.domain_name]
        self.region = services.config.gateways.s3.region
        http = services.config.http
        self.body_timeout = http.request_body_timeout.total_seconds()
        self.limiter = anyio.CapacityLimiter(http.transfer_threads)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        incoming = self._incoming(scope)
        body = BodyReader(receive, timeout=self.body_timeout,
                          expect_body=has_body(scope["headers"]))
        try:
            if body.more:
                # authenticate first: nothing of the body is read for a stranger
                identity = await anyio.to_thread.run_sync(self._authenticate, incoming,
                                                          limiter=self.limiter)
                await body.prefetch()
                response = await anyio.to_thread.run_sync(self._serve, incoming, body,
                                                          identity, limiter=self.limiter)
            else:
                response = await anyio.to_thread.run_sync(self._serve, incoming, body, None,
                                                          limiter=self.limiter)
        except Exception as exc:  # every failure becomes an S3 error document
            response = self._error(exc, incoming)
        response.headers["x-amz-request-id"] = incoming.request_id
        if body.more:
            # answered before the body was read (a refusal, or a client still waiting
            # for "100 Continue"): the connection cannot carry another request
            response.headers["connection"] = "close"
        await response(scope, receive, send)

    def _incoming(self, scope: Scope) -> _Incoming:
        raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("utf-8", "replace")
        raw_query = scope.get("query_string", b"").decode("latin-1")
        header_pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]]
        headers = header_dict(header_pairs)
        bucket, key = resolve_address(headers.get("host", ""), raw_path.partition("?")[0],
                                      self.domains)
        query_pairs = sigv4.parse_query(raw_query)
        return _Incoming(
            request_id=uuid.uuid4().hex[:16].upper(), method=scope["method"].upper(),
            raw_path=raw_path.partition("?")[0], raw_query=raw_query,
            header_pairs=header_pairs, headers=headers, bucket=bucket, key=key,
            query_pairs=query_pairs,
            presigned=any(name in ("X-Amz-Algorithm", "AWSAccessKeyId")
                          for name, _ in query_pairs),
            address=(scope.get("client") or ("",))[0])

    def _serve(self, incoming: _Incoming, body: BodyReader,
               identity: tuple[sigv4.SignedRequest, str, AuthView] | None) -> Response:
        try:
            signed, user, view = identity or self._authenticate(incoming)
            request = S3Request(
                method=incoming.method, bucket=incoming.bucket, key=incoming.key,
                query=query_dict(incoming.query_pairs), headers=incoming.headers,
                signed=signed, user=user, principal=lambda: view.principal(user),
                pull=body.pull, host=incoming.headers.get("host", ""))
            return self.operations.handle(request)
        except Exception as exc:  # every failure becomes an S3 error document
            return self._error(exc, incoming)

    def _authenticate(self, incoming: _Incoming) -> tuple[sigv4.SignedRequest, str, AuthView]:
        """Verify the request's signature; the signer, and the auth tables as of now
        for the request's authorization. A client that failed too often of late
        waits (``SlowDown``) before its signature is even checked; see
        :mod:`lakefs_core.auth.throttle`."""
        owners: dict[str, str] = {}
        method, headers = incoming.method, incoming.headers
        sign_ins, address = self.services.sign_ins, incoming.address
        key_ids: list[str] = []
        view = self.services.access.view()

        def secret_for(access_key_id: str) -> str:
            if not key_ids:
                sign_ins.check(address, access_key_id)
                key_ids.append(access_key_id)
            credential = view.credential(access_key_id)
            owners[access_key_id] = credential.user
            return credential.secret

        try:
            if sigv4.is_signed(incoming.header_pairs, incoming.query_pairs):
                signed = sigv4.verify_request(method, incoming.raw_path, incoming.raw_query,
                                              incoming.header_pairs, secret_for,
                                              region=self.region, service=sigv4.SERVICE)
            elif sigv2.is_v2_signed(headers, incoming.query_pairs):
                vhost = virtual_host_bucket(headers.get("host", ""), self.domains)
                signed = sigv2.verify_v2(
                    method, incoming.raw_path, incoming.raw_query, headers, secret_for,
                    bucket_prefix=f"/{vhost}" if vhost is not None else "")
            else:
                raise AuthenticationError("Anonymous access is not allowed: sign requests")
        except (InvalidAccessKeyIdError, SignatureMismatchError):
            sign_ins.failed(address, key_ids[0] if key_ids else "")
            raise
        sign_ins.succeeded(address, signed.access_key_id)
        return signed, owners[signed.access_key_id], view

    @staticmethod
    def _error(exc: Exception, incoming: _Incoming) -> Response:
        info = s3_error_of(exc, presigned=incoming.presigned)
        method, resource, request_id = incoming.method, incoming.resource, incoming.request_id
        if info.status >= 500 and info.code not in ("NotImplemented", "SlowDown"):
            log.error("gateway %s %s failed: %s", method, resource, exc, exc_info=exc,
                      extra={"request_id": request_id, "resource": resource,
                             "s3_code": info.code})
        if method == "HEAD":
            return Response(status_code=info.status, headers=info.headers)
        body = xml.error_document(info.code, info.message, resource, request_id,
                                  extra=info.extra)
        return Response(body, status_code=info.status, headers=info.headers,
                        media_type=xml.CONTENT_TYPE)


def create_gateway(services: Services) -> Gateway:
    """The S3 gateway over ``services`` (an ASGI app)."""
    return Gateway(services)
