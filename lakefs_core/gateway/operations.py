"""The S3 operations of the gateway, on top of the engine and the catalog.

Bucket = repository, key = ``<ref>/<path>``. Every operation authorizes first (the
user's policies, lakeFS actions on lakeFS ARNs), then checks that the target can be
written (read-only repositories and protected branches refuse) before it reads any
request body, so a refused request changes nothing. Writes go through the catalog,
exactly as the REST API's, so objects land in the same layout from either door.

Handlers are synchronous (the engine is): the ASGI layer runs each request in a
worker thread and streams bodies in and out.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import replace
from urllib.parse import unquote

from starlette.responses import Response, StreamingResponse

from lakefs_core.auth import rbac
from lakefs_core.catalog import DEFAULT_CONTENT_TYPE, SMALL_OBJECT, Catalog
from lakefs_core.errors import (
    BranchNotFoundError,
    CommitNotFoundError,
    LakeFSError,
    ObjectNotFoundError,
    RangeNotSatisfiableError,
    RefNotFoundError,
    RepositoryNotFoundError,
    StorageError,
    TagNotFoundError,
    ValidationError,
)
from lakefs_core.gateway import xml
from lakefs_core.gateway.errors import S3Error, s3_error_of
from lakefs_core.gateway.multipart import MultipartUpload, MultipartUploads, check_part_number
from lakefs_core.gateway.request import S3Request, split_key
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.graveler.model import Entry, Repository
from lakefs_core.protocol.http import (
    ReadOutcome,
    UnsupportedConditionError,
    content_range,
    header_value_safe,
    http_date,
    metadata_headers,
    object_content_headers,
    parse_range,
    read_outcome,
    unsatisfied_range,
    write_conditions,
)
from lakefs_core.services import Services

log = logging.getLogger("lakefs_core.gateway")

META_PREFIX = "x-amz-meta-"
MAX_KEYS = 1000
#: query parameters of GetObject that override response headers (presigned links)
_RESPONSE_OVERRIDES = {
    "response-content-type": "content-type",
    "response-content-language": "content-language",
    "response-expires": "expires",
    "response-cache-control": "cache-control",
    "response-content-disposition": "content-disposition",
    "response-content-encoding": "content-encoding",
}
#: bucket configurations lakeFS never has: GET answers as S3 does for a bucket without
#: one (404 with the code S3 clients look for), DELETE has nothing to remove (204)
_ABSENT_BUCKET_CONFIGURATIONS = {
    "policy": ("NoSuchBucketPolicy", "The bucket policy does not exist"),
    "cors": ("NoSuchCORSConfiguration", "The CORS configuration does not exist"),
    "lifecycle": ("NoSuchLifecycleConfiguration", "The lifecycle configuration does not exist"),
    "tagging": ("NoSuchTagSet", "The TagSet does not exist"),
    "website": ("NoSuchWebsiteConfiguration",
                "The specified bucket does not have a website configuration"),
    "replication": ("ReplicationConfigurationNotFoundError",
                    "The replication configuration was not found"),
    "encryption": ("ServerSideEncryptionConfigurationNotFoundError",
                   "The server side encryption configuration was not found"),
    "object-lock": ("ObjectLockConfigurationNotFoundError",
                    "Object Lock configuration does not exist for this bucket"),
    "publicAccessBlock": ("NoSuchPublicAccessBlockConfiguration",
                          "The public access block configuration was not found"),
    "ownershipControls": ("OwnershipControlsNotFoundError",
                          "The bucket ownership controls were not found"),
}
#: bucket configurations whose unset state S3 answers as an empty document (200)
_EMPTY_BUCKET_CONFIGURATIONS: dict[str, tuple[str, dict[str, str]]] = {
    "logging": ("BucketLoggingStatus", {}),
    "notification": ("NotificationConfiguration", {}),
    "accelerate": ("AccelerateConfiguration", {}),
    "requestPayment": ("RequestPaymentConfiguration", {"Payer": "BucketOwner"}),
}
#: bucket sub-resources with no lakeFS counterpart (501, in S3's XML)
_UNSUPPORTED_BUCKET_QUERIES = ("versions", "inventory", "analytics", "metrics",
                               "intelligent-tiering")
#: object sub-resources read with an empty answer (GET) or not implemented (other methods)
_OBJECT_QUERIES = ("acl", "tagging", "attributes", "legal-hold", "retention", "torrent",
                   "restore", "select")
#: the largest number of uploads one ListMultipartUploads page shows
MAX_UPLOADS = 1000


def _xml_response(body: bytes, status: int = 200) -> Response:
    return Response(body, status_code=status, media_type=xml.CONTENT_TYPE)


def _not_implemented(what: str) -> S3Error:
    return S3Error("NotImplemented", f"{what} is not implemented by this gateway", 501)


def user_metadata(headers: dict[str, str]) -> dict[str, str]:
    """``x-amz-meta-*`` headers as user metadata (names without the prefix)."""
    return {name[len(META_PREFIX):]: value for name, value in headers.items()
            if name.startswith(META_PREFIX) and len(name) > len(META_PREFIX)}


def _write_conditions(req: S3Request) -> tuple[bool, str | None]:
    """``(if_absent, if_match)`` of a write's ``If-None-Match: *`` and ``If-Match``."""
    try:
        conditions = write_conditions(req.headers.get("if-none-match"),
                                      req.headers.get("if-match"))
    except UnsupportedConditionError:
        raise _not_implemented("If-None-Match other than '*' on a write") from None
    return conditions.if_absent, conditions.if_match


def _declares_empty_body(headers: dict[str, str]) -> bool:
    """Whether a request declares an empty payload (``aws-chunked`` ones by their decoded
    length)."""
    declared = headers.get("x-amz-decoded-content-length", headers.get("content-length"))
    return declared is not None and declared.strip() == "0"


def _split_object_or_root(key: str) -> tuple[str, str]:
    """``(ref, path)`` of a key to delete: ``<ref>/`` (the branch root's directory
    marker) gives an empty path.

    Raises:
        S3Error: ``NoSuchKey`` when the key names no ref.
    """
    ref, sep, path = key.partition("/")
    if ref and sep and not path:
        return ref, ""
    return split_key(key)


def _encode_token(marker: str) -> str:
    return base64.urlsafe_b64encode(marker.encode()).decode()


def _decode_token(token: str) -> str:
    try:
        return base64.b64decode(token.encode(), altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise S3Error("InvalidArgument", "The continuation token provided is incorrect") from None


class Operations:
    """Every S3 operation the gateway serves, dispatched by :meth:`handle`.

    Args:
        services: The server's services (engine, catalog, auth, config).
    """

    def __init__(self, services: Services) -> None:
        self.services = services
        self.graveler: Graveler = services.graveler
        self.catalog: Catalog = services.catalog
        self.uploads = MultipartUploads(services.catalog)
        self.region = services.config.gateways.s3.region

    # ------------------------------------------------------------------ dispatch
    def handle(self, req: S3Request) -> Response:
        """Serve one authenticated request."""
        return self._route(req)(req)

    def _route(self, req: S3Request) -> Callable[[S3Request], Response]:
        method = req.method
        if not req.bucket:
            if method in ("GET", "HEAD"):
                return self.list_buckets
            raise S3Error("MethodNotAllowed", "The specified method is not allowed", 405)
        if not req.key:
            return self._route_bucket(req)
        for name in _OBJECT_QUERIES:
            if req.has(name):
                return self._route_object_query(req, name)
        if method == "GET":
            return self.list_parts if req.has("uploadId") else self.get_object
        if method == "HEAD":
            return self.head_object
        if method == "PUT":
            if req.has("uploadId") or req.has("partNumber"):
                return self.upload_part
            return self.copy_object if "x-amz-copy-source" in req.headers else self.put_object
        if method == "POST":
            if req.has("uploads"):
                return self.create_multipart_upload
            if req.has("uploadId"):
                return self.complete_multipart_upload
            raise _not_implemented("POST object")
        if method == "DELETE":
            return self.abort_multipart_upload if req.has("uploadId") else self.delete_object
        raise S3Error("MethodNotAllowed", "The specified method is not allowed", 405)

    def _route_bucket(self, req: S3Request) -> Callable[[S3Request], Response]:
        method = req.method
        for name in _UNSUPPORTED_BUCKET_QUERIES:
            if req.has(name):
                raise _not_implemented(f"bucket sub-resource {name!r}")
        if method == "HEAD":
            return self.head_bucket
        if method == "GET":
            if req.has("location"):
                return self.get_bucket_location
            if req.has("versioning"):
                return self.get_bucket_versioning
            if req.has("uploads"):
                return self.list_multipart_uploads
            if req.has("acl"):
                return self.get_bucket_acl
            if any(req.has(name) for name in _ABSENT_BUCKET_CONFIGURATIONS):
                return self.get_absent_bucket_configuration
            if any(req.has(name) for name in _EMPTY_BUCKET_CONFIGURATIONS):
                return self.get_empty_bucket_configuration
            return self.list_objects
        if method == "POST" and req.has("delete"):
            return self.delete_objects
        if method == "PUT" and not set(req.query) - {"x-id"}:
            return self.create_bucket
        if method == "DELETE" and any(req.has(name) for name in _ABSENT_BUCKET_CONFIGURATIONS):
            return self.delete_absent_bucket_configuration
        if method == "PUT":
            raise _not_implemented(f"setting bucket sub-resource {sorted(req.query)[0]!r}")
        if method == "DELETE":
            raise _not_implemented("deleting buckets (use the lakeFS API)")
        raise S3Error("MethodNotAllowed", "The specified method is not allowed", 405)

    def _route_object_query(self, req: S3Request,
                            name: str) -> Callable[[S3Request], Response]:
        if req.method == "GET" and name == "tagging":
            return self.get_object_tagging
        if req.method == "GET" and name == "acl":
            return self.get_object_acl
        if req.method == "DELETE" and name == "tagging":
            return self.delete_object_tagging
        raise _not_implemented(f"{req.method} of object sub-resource {name!r}")

    # -------------------------------------------------------------------- helpers
    def _repository(self, req: S3Request) -> Repository:
        return self.graveler.get_repository(req.bucket)

    def _writable(self, repo_id: str, branch: str) -> Repository:
        """The repository, if ``branch`` exists and may be written directly.

        Raises:
            ReadOnlyRepositoryError, ProtectedBranchError, BranchNotFoundError.
        """
        repo, _ = self.catalog.writable(repo_id, branch)
        return repo

    @staticmethod
    def _object_permission(action: str, repo: str, path: str) -> rbac.Permission:
        return rbac.Permission(action, rbac.object_arn(repo, path))

    # ------------------------------------------------------------------- service
    def list_buckets(self, req: S3Request) -> Response:
        """ListBuckets: the repositories."""
        req.check(rbac.Permission(rbac.LIST_REPOSITORIES, rbac.ALL))
        buckets: list[tuple[str, int]] = []
        after = ""
        while True:
            page = self.graveler.list_repositories(after=after, amount=1000)
            buckets += [(repo.id, repo.creation_date) for repo in page]
            if len(page) < 1000:
                break
            after = page[-1].id
        return _xml_response(xml.list_buckets_document(buckets))

    # -------------------------------------------------------------------- bucket
    def head_bucket(self, req: S3Request) -> Response:
        """HeadBucket: 200 if the repository exists."""
        req.check(rbac.Permission(rbac.READ_REPOSITORY, rbac.repository_arn(req.bucket)))
        self._repository(req)
        return Response(status_code=200, headers={"x-amz-bucket-region": self.region})

    def create_bucket(self, req: S3Request) -> Response:
        """CreateBucket: repositories are created through the lakeFS API. An existing
        one is answered ``409 BucketAlreadyOwnedByYou``, which clients that create the
        bucket before writing (rclone, ``aws s3 mb``) take as "it is there already"."""
        req.check(rbac.Permission(rbac.READ_REPOSITORY, rbac.repository_arn(req.bucket)))
        try:
            self._repository(req)
        except RepositoryNotFoundError:
            raise _not_implemented("creating buckets (create a repository with the lakeFS "
                                   "API)") from None
        raise S3Error("BucketAlreadyOwnedByYou",
                      "Your previous request to create the named bucket succeeded and you "
                      "already own it.", 409)

    def _bucket_configuration(self, req: S3Request) -> None:
        """Check that the repository exists and may be read (configuration probes)."""
        req.check(rbac.Permission(rbac.READ_REPOSITORY, rbac.repository_arn(req.bucket)))
        self._repository(req)

    def get_bucket_acl(self, req: S3Request) -> Response:
        """GetBucketAcl: the owner has full control (lakeFS policies decide access)."""
        self._bucket_configuration(req)
        return _xml_response(xml.acl_document())

    def get_absent_bucket_configuration(self, req: S3Request) -> Response:
        """GetBucketPolicy, GetBucketCors, ...: S3's answer for a configuration never set."""
        self._bucket_configuration(req)
        name = next(name for name in _ABSENT_BUCKET_CONFIGURATIONS if req.has(name))
        code, message = _ABSENT_BUCKET_CONFIGURATIONS[name]
        raise S3Error(code, message, 404)

    def get_empty_bucket_configuration(self, req: S3Request) -> Response:
        """GetBucketLogging, GetBucketNotificationConfiguration, ...: empty documents."""
        self._bucket_configuration(req)
        name = next(name for name in _EMPTY_BUCKET_CONFIGURATIONS if req.has(name))
        tag, children = _EMPTY_BUCKET_CONFIGURATIONS[name]
        return _xml_response(xml.empty_configuration_document(tag, **children))

    def delete_absent_bucket_configuration(self, req: S3Request) -> Response:
        """DeleteBucketPolicy, DeleteBucketCors, ...: nothing is set, nothing to remove."""
        self._bucket_configuration(req)
        return Response(status_code=204)

    def get_bucket_location(self, req: S3Request) -> Response:
        """GetBucketLocation: the gateway's configured region."""
        req.check(rbac.Permission(rbac.READ_REPOSITORY, rbac.repository_arn(req.bucket)))
        self._repository(req)
        return _xml_response(xml.location_document(self.region))

    def get_bucket_versioning(self, req: S3Request) -> Response:
        """GetBucketVersioning: never enabled (versions are commits)."""
        req.check(rbac.Permission(rbac.READ_REPOSITORY, rbac.repository_arn(req.bucket)))
        self._repository(req)
        return _xml_response(xml.versioning_document())

    def list_objects(self, req: S3Request) -> Response:
        """ListObjects (v1) and ListObjectsV2.

        Below a ref (``prefix`` = ``<ref>/...``) the listing is the ref's objects; at
        the root of the bucket the "folders" are the branches, as lakeFS answers.
        """
        q = req.query
        version = 2 if q.get("list-type") == "2" else 1
        if q.get("list-type", "1") not in ("1", "2"):
            raise S3Error("InvalidArgument", f"unknown list-type {q['list-type']!r}")
        try:
            max_keys = min(int(q.get("max-keys", MAX_KEYS)), MAX_KEYS)
        except ValueError:
            raise S3Error("InvalidArgument", "max-keys must be an integer") from None
        if max_keys < 0:
            raise S3Error("InvalidArgument", "max-keys must not be negative")
        encoding = q.get("encoding-type", "")
        if encoding not in ("", "url"):
            raise S3Error("InvalidArgument", f"invalid encoding-type {encoding!r}")
        listing = xml.ListingRequest(
            bucket=req.bucket, prefix=q.get("prefix", ""), delimiter=q.get("delimiter", ""),
            max_keys=max_keys, url_encoded=encoding == "url", version=version,
            marker=q.get("marker", ""), start_after=q.get("start-after", ""),
            continuation_token=q.get("continuation-token", ""),
            fetch_owner=q.get("fetch-owner", "") == "true")
        if version == 2:
            after = (_decode_token(listing.continuation_token) if listing.continuation_token
                     else listing.start_after)
        else:
            after = listing.marker
        repo_arn = rbac.repository_arn(req.bucket)
        if "/" not in listing.prefix:
            req.check(rbac.Permission(rbac.LIST_BRANCHES, repo_arn))
            self._repository(req)
            page = self._list_branches(req.bucket, listing, after)
        else:
            req.check(rbac.Permission(rbac.LIST_OBJECTS, repo_arn))
            self._repository(req)
            page = self._list_entries(req.bucket, listing, after)
        if version == 2 and page.truncated:
            page.next_token = _encode_token(page.next_marker)
        return _xml_response(xml.list_objects_document(listing, page))

    def _list_branches(self, repo_id: str, listing: xml.ListingRequest,
                       after: str) -> xml.ListingPage:
        page = xml.ListingPage()
        if listing.max_keys == 0:
            return page
        # "main/" comes after "main" but also after "main-x": continue from the name
        after_name = after[:-1] if after.endswith("/") else after
        branches = self.graveler.list_branches(repo_id, prefix=listing.prefix, after=after_name,
                                               amount=listing.max_keys + 1)
        page.prefixes = [b.name + "/" for b in branches[: listing.max_keys]]
        page.truncated = len(branches) > listing.max_keys
        page.next_marker = page.prefixes[-1] if page.prefixes else ""
        return page

    def _list_entries(self, repo_id: str, listing: xml.ListingRequest,
                      after: str) -> xml.ListingPage:
        page = xml.ListingPage()
        ref, _, path_prefix = listing.prefix.partition("/")
        after_path = ""
        if after:
            after_ref, sep, after_path = after.partition("/")
            if after_ref != ref or not sep:
                raise S3Error("InvalidArgument",
                              f"the listing position {after!r} is not inside ref {ref!r}")
        if listing.max_keys == 0:
            return page
        try:
            items, has_more = self.graveler.list_entries(
                repo_id, ref, prefix=path_prefix, after=after_path, amount=listing.max_keys,
                delimiter=listing.delimiter)
        except (RefNotFoundError, BranchNotFoundError, TagNotFoundError, CommitNotFoundError):
            return page  # no such ref: nothing below it
        for item in items:
            key = f"{ref}/{item.path}"
            if item.entry is None:
                page.prefixes.append(key)
            else:
                page.objects.append(xml.ListedObject(key, item.entry.size, item.entry.etag,
                                                     item.entry.mtime))
        page.truncated = has_more
        if items:
            page.next_marker = f"{ref}/{items[-1].path}"
        return page

    def delete_objects(self, req: S3Request) -> Response:
        """DeleteObjects: stage deletes of up to 1000 keys; report each outcome."""
        keys, quiet = xml.parse_delete_request(req.body().read(xml.MAX_XML_BODY))
        deleted: list[str] = []
        failures: list[xml.DeleteFailure] = []
        for key in keys:
            try:
                ref, path = _split_object_or_root(key)
                req.check(self._object_permission(rbac.DELETE_OBJECT, req.bucket, path))
                self._delete_entry(req.bucket, ref, path)
            except LakeFSError as exc:
                info = s3_error_of(exc)
                if info.status >= 500:
                    log.error("delete %s/%s failed: %s", req.bucket, key, exc, exc_info=exc)
                failures.append(xml.DeleteFailure(key, info.code, info.message))
            else:
                deleted.append(key)
        return _xml_response(xml.delete_result_document(deleted, failures, quiet=quiet))

    def _delete_entry(self, repo_id: str, branch: str, path: str) -> None:
        self._writable(repo_id, branch)
        if not path:
            return  # the branch root's directory marker: nothing is stored for it
        # deleting what is not there succeeds, as in S3
        with contextlib.suppress(ObjectNotFoundError):
            self.graveler.delete_entry(repo_id, branch, path)

    # -------------------------------------------------------------------- object
    def _stat(self, req: S3Request) -> tuple[Repository, str, str, Entry]:
        ref, path = split_key(req.key)
        req.check(self._object_permission(rbac.READ_OBJECT, req.bucket, path))
        repo, entry = self.catalog.stat(req.bucket, ref, path)
        return repo, ref, path, entry

    def _object_headers(self, req: S3Request, entry: Entry) -> dict[str, str]:
        content_type = entry.content_type or DEFAULT_CONTENT_TYPE
        headers = {
            "etag": xml.quote_etag(entry.etag),
            "last-modified": http_date(entry.mtime),
            "content-type": (content_type if header_value_safe(content_type)
                             else DEFAULT_CONTENT_TYPE),
            "accept-ranges": "bytes",
        }
        for name, value in metadata_headers(entry.metadata):  # the rule of every front door
            headers[META_PREFIX + name] = value
        for param, header in _RESPONSE_OVERRIDES.items():
            if param in req.query:
                headers[header] = req.query[param]
        # a link a browser opens carries its signature in the query: what is active
        # there becomes a download; an S3 client signing headers gets S3's answer
        headers.update(object_content_headers(
            headers["content-type"], headers.get("content-disposition"),
            attach_active="authorization" not in req.headers))
        return headers

    @staticmethod
    def _not_modified(req: S3Request, entry: Entry) -> Response | None:
        outcome = read_outcome(req.headers.get("if-match"), req.headers.get("if-none-match"),
                               entry.etag)
        if outcome is ReadOutcome.PRECONDITION_FAILED:
            raise S3Error("PreconditionFailed",
                          "At least one of the pre-conditions you specified did not hold", 412)
        if outcome is ReadOutcome.NOT_MODIFIED:
            return Response(status_code=304, headers={"etag": xml.quote_etag(entry.etag)})
        return None

    def _range(self, req: S3Request, entry: Entry) -> tuple[int, int] | None:
        header = req.headers.get("range", "")
        try:
            return parse_range(header, entry.size)
        except RangeNotSatisfiableError as exc:
            raise S3Error("InvalidRange", str(exc), 416,
                          {"content-range": unsatisfied_range(entry.size)}) from None
        except ValidationError:
            return None  # a range the gateway cannot parse is ignored, as HTTP allows

    def head_object(self, req: S3Request) -> Response:
        """HeadObject: the object's headers (Range gives the part's length)."""
        _repo, _ref, _path, entry = self._stat(req)
        if (not_modified := self._not_modified(req, entry)) is not None:
            return not_modified
        headers = self._object_headers(req, entry)
        byte_range = self._range(req, entry)
        status = 200
        length = entry.size
        if byte_range is not None:
            first, last = byte_range
            headers["content-range"] = content_range(first, last, entry.size)
            length, status = last - first + 1, 206
        headers["content-length"] = str(length)
        return Response(status_code=status, headers=headers)

    def get_object(self, req: S3Request) -> Response:
        """GetObject, whole (streamed) or one byte range (206; 416 outside)."""
        repo, _ref, _path, entry = self._stat(req)
        if (not_modified := self._not_modified(req, entry)) is not None:
            return not_modified
        headers = self._object_headers(req, entry)
        byte_range = self._range(req, entry)
        content = self.catalog.open_entry(repo, entry, byte_range)
        status = 200
        if byte_range is not None:
            headers["content-range"] = content_range(content.first, content.last, entry.size)
            status = 206
        headers["content-length"] = str(content.last - content.first + 1)
        if content.last - content.first < SMALL_OBJECT:  # one chunk: no stream to set up
            return Response(b"".join(content.chunks), status_code=status, headers=headers)
        return StreamingResponse(content.chunks, status_code=status, headers=headers)

    def put_object(self, req: S3Request) -> Response:
        """PutObject: store the body and stage it (412 when ``If-None-Match: *`` finds an
        object, or ``If-Match`` does not find the one it names)."""
        if req.key.endswith("/") and _declares_empty_body(req.headers):
            return self.put_directory_marker(req)
        branch, path = split_key(req.key)
        req.check(self._object_permission(rbac.WRITE_OBJECT, req.bucket, path))
        if_absent, if_match = _write_conditions(req)
        # the catalog refuses read-only repositories, protected branches and failed
        # conditions before it reads the body
        entry = self.catalog.upload(
            req.bucket, branch, path, iter(req.body()),
            content_type=req.headers.get("content-type") or DEFAULT_CONTENT_TYPE,
            metadata=user_metadata(req.headers), if_absent=if_absent, if_match=if_match)
        return Response(status_code=200, headers={"etag": xml.quote_etag(entry.etag)})

    def put_directory_marker(self, req: S3Request) -> Response:
        """PutObject of an empty ``<ref>/<dir>/`` (``<ref>/`` included): a directory
        marker, which tools write before the files of a directory (pyarrow, the Hadoop
        connectors). lakeFS directories exist through their objects, so the marker is
        accepted on a writable branch and nothing is stored."""
        branch, _, path = req.key.partition("/")
        if not branch:
            raise S3Error("NoSuchKey", f"key {req.key!r} is not <ref>/<path>", 404)
        req.check(self._object_permission(rbac.WRITE_OBJECT, req.bucket, path))
        self._writable(req.bucket, branch)
        body = req.body(want_md5=True)
        body.read(0)  # verified like any payload; one longer than declared is refused
        assert body.md5 is not None
        return Response(status_code=200, headers={"etag": xml.quote_etag(body.md5)})

    def _copy_source(self, req: S3Request) -> tuple[str, str, str]:
        """``(repository, ref, path)`` of ``x-amz-copy-source`` (read permission checked)."""
        source = unquote(req.headers["x-amz-copy-source"])
        source, _, version = source.partition("?versionId=")
        if version:
            raise _not_implemented("copying object versions")
        bucket, _, key = source.lstrip("/").partition("/")
        if not bucket or not key:
            raise S3Error("InvalidArgument", "x-amz-copy-source must be /bucket/<ref>/<path>")
        ref, path = split_key(key)
        req.check(self._object_permission(rbac.READ_OBJECT, bucket, path))
        return bucket, ref, path

    def copy_object(self, req: S3Request) -> Response:
        """CopyObject, within or across repositories (metadata COPY or REPLACE)."""
        branch, path = split_key(req.key)
        req.check(self._object_permission(rbac.WRITE_OBJECT, req.bucket, path))
        src_repo, src_ref, src_path = self._copy_source(req)
        directive = req.headers.get("x-amz-metadata-directive", "COPY").upper()
        if directive not in ("COPY", "REPLACE"):
            raise S3Error("InvalidArgument", f"invalid x-amz-metadata-directive {directive!r}")
        self._writable(req.bucket, branch)
        entry = self.catalog.copy(req.bucket, src_ref, src_path, branch, path,
                                  src_repo_id=src_repo)
        if directive == "REPLACE":
            entry = replace(entry, metadata=user_metadata(req.headers),
                            content_type=req.headers.get("content-type") or entry.content_type)
            self.catalog.link(req.bucket, branch, path, entry)
        return _xml_response(xml.copy_result_document(entry.etag, entry.mtime))

    def get_object_tagging(self, req: S3Request) -> Response:
        """GetObjectTagging: objects carry no tags, so the TagSet is empty."""
        self._stat(req)
        return _xml_response(xml.tagging_document())

    def delete_object_tagging(self, req: S3Request) -> Response:
        """DeleteObjectTagging: there are no tags to remove."""
        self._stat(req)
        return Response(status_code=204)

    def get_object_acl(self, req: S3Request) -> Response:
        """GetObjectAcl: the owner has full control (lakeFS policies decide access)."""
        self._stat(req)
        return _xml_response(xml.acl_document())

    def delete_object(self, req: S3Request) -> Response:
        """DeleteObject: stage a delete (204 even when nothing was there)."""
        branch, path = _split_object_or_root(req.key)
        req.check(self._object_permission(rbac.DELETE_OBJECT, req.bucket, path))
        self._delete_entry(req.bucket, branch, path)
        return Response(status_code=204)

    # ----------------------------------------------------------------- multipart
    def _upload_target(self, req: S3Request) -> tuple[Repository, str, str]:
        branch, path = split_key(req.key)
        req.check(self._object_permission(rbac.WRITE_OBJECT, req.bucket, path))
        return self._writable(req.bucket, branch), branch, path

    def create_multipart_upload(self, req: S3Request) -> Response:
        """CreateMultipartUpload: record the upload in the repository's namespace."""
        repo, branch, path = self._upload_target(req)
        upload = self.uploads.create(
            repo, branch, path,
            content_type=req.headers.get("content-type") or DEFAULT_CONTENT_TYPE,
            metadata=user_metadata(req.headers), initiator=req.user)
        return _xml_response(xml.initiate_multipart_document(req.bucket, req.key,
                                                             upload.upload_id))

    def upload_part(self, req: S3Request) -> Response:
        """UploadPart (and UploadPartCopy with ``x-amz-copy-source``)."""
        if "uploadId" not in req.query or "partNumber" not in req.query:
            raise S3Error("InvalidArgument", "UploadPart needs both uploadId and partNumber")
        number = check_part_number(req.query["partNumber"])
        repo, branch, path = self._upload_target(req)
        upload = self.uploads.get(repo, req.query["uploadId"], branch, path)
        if "x-amz-copy-source" in req.headers:
            return self._upload_part_copy(req, repo, upload, number)
        body = req.body(want_md5=True)
        self.uploads.put_part(repo, upload, number, iter(body))
        assert body.md5 is not None
        return Response(status_code=200, headers={"etag": xml.quote_etag(body.md5)})

    def _upload_part_copy(self, req: S3Request, repo: Repository, upload: MultipartUpload,
                          number: int) -> Response:
        src_repo_id, src_ref, src_path = self._copy_source(req)
        src_repo, entry = self.catalog.stat(src_repo_id, src_ref, src_path)
        spec = req.headers.get("x-amz-copy-source-range", "")
        md5 = hashlib.md5()
        if spec:
            chunks: Iterator[bytes] = self.catalog.open_entry(
                src_repo, entry, parse_range(spec, entry.size)).chunks
        else:
            chunks = self.catalog.open_entry(src_repo, entry).chunks

        def hashed() -> Iterator[bytes]:
            for chunk in chunks:
                md5.update(chunk)
                yield chunk

        stat = self.uploads.put_part(repo, upload, number, hashed())
        return _xml_response(xml.copy_result_document(md5.hexdigest(), stat.mtime, part=True))

    def complete_multipart_upload(self, req: S3Request) -> Response:
        """CompleteMultipartUpload: concatenate the parts, stage the object."""
        repo, branch, path = self._upload_target(req)
        upload = self.uploads.get(repo, req.query["uploadId"], branch, path)
        parts = xml.parse_complete_request(req.body().read(xml.MAX_XML_BODY))
        if_absent, if_match = _write_conditions(req)
        self.graveler.check_write_conditions(repo, branch, path, if_absent=if_absent,
                                             if_match=if_match)
        entry = self.uploads.complete(repo, upload, parts)
        self.catalog.link(req.bucket, branch, path, entry, if_absent=if_absent,
                          if_match=if_match)
        try:
            self.uploads.remove(repo, upload)
        except StorageError as exc:  # the object is staged; leftovers are only garbage
            log.warning("multipart upload %s: clean-up failed: %s", upload.upload_id, exc)
        location = f"http://{req.host}/{req.bucket}/{req.key}"
        return _xml_response(xml.complete_multipart_document(location, req.bucket, req.key,
                                                             entry.etag))

    def list_multipart_uploads(self, req: S3Request) -> Response:
        """ListMultipartUploads: the uploads in progress in the repository, by key."""
        req.check(rbac.Permission(rbac.LIST_OBJECTS, rbac.repository_arn(req.bucket)))
        repo = self._repository(req)
        q = req.query
        try:
            max_uploads = min(int(q.get("max-uploads", MAX_UPLOADS)), MAX_UPLOADS)
        except ValueError:
            raise S3Error("InvalidArgument", "max-uploads must be an integer") from None
        if max_uploads < 0:
            raise S3Error("InvalidArgument", "max-uploads must not be negative")
        prefix, delimiter = q.get("prefix", ""), q.get("delimiter", "")
        key_marker, upload_id_marker = q.get("key-marker", ""), q.get("upload-id-marker", "")
        page = xml.UploadsPage()
        for upload in self.uploads.in_progress(repo):
            key = f"{upload.branch}/{upload.path}"
            if not key.startswith(prefix) or key < key_marker or (
                    key == key_marker and (not upload_id_marker
                                           or upload.upload_id <= upload_id_marker)):
                continue
            cut = key.find(delimiter, len(prefix)) if delimiter else -1
            if cut >= 0:
                common = key[:cut + len(delimiter)]
                if page.prefixes and page.prefixes[-1] == common:
                    continue
                entry: xml.ListedUpload | str = common
            else:
                entry = xml.ListedUpload(key, upload.upload_id, upload.initiated)
            if len(page.uploads) + len(page.prefixes) == max_uploads:
                page.truncated = True
                break
            if isinstance(entry, str):
                page.prefixes.append(entry)
            else:
                page.uploads.append(entry)
        return _xml_response(xml.list_multipart_uploads_document(
            req.bucket, prefix=prefix, delimiter=delimiter, key_marker=key_marker,
            upload_id_marker=upload_id_marker, max_uploads=max_uploads, page=page))

    def abort_multipart_upload(self, req: S3Request) -> Response:
        """AbortMultipartUpload: drop the record and the parts."""
        branch, path = split_key(req.key)
        req.check(self._object_permission(rbac.WRITE_OBJECT, req.bucket, path))
        repo = self._repository(req)
        upload = self.uploads.get(repo, req.query["uploadId"], branch, path)
        self.uploads.remove(repo, upload)
        return Response(status_code=204)

    def list_parts(self, req: S3Request) -> Response:
        """ListParts of an upload in progress."""
        branch, path = split_key(req.key)
        req.check(self._object_permission(rbac.WRITE_OBJECT, req.bucket, path))
        repo = self._repository(req)
        upload = self.uploads.get(repo, req.query["uploadId"], branch, path)
        try:
            max_parts = min(int(req.query.get("max-parts", 1000)), 1000)
            marker = int(req.query.get("part-number-marker", 0))
        except ValueError:
            raise S3Error("InvalidArgument", "max-parts and part-number-marker are integers") \
                from None
        parts = [p for p in self.uploads.list_parts(repo, upload) if p.number > marker]
        return _xml_response(xml.list_parts_document(
            req.bucket, req.key, upload.upload_id, parts[:max_parts], marker=marker,
            max_parts=max_parts, truncated=len(parts) > max_parts))
