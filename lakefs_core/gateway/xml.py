"""S3 XML documents: the gateway's response bodies and the request bodies it parses."""

from __future__ import annotations

import xml.etree.ElementTree as ET
import xml.parsers.expat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote

from lakefs_core.gateway.errors import S3Error
from lakefs_core.protocol.http import quote_etag

S3_NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"
CONTENT_TYPE = "application/xml"
#: the most keys one DeleteObjects request may name (as S3)
MAX_DELETE_KEYS = 1000
#: the largest XML request body the gateway parses
MAX_XML_BODY = 2 << 20
_OWNER_ID = "lakefs"


def iso_timestamp(seconds: float) -> str:
    """``2024-01-31T12:00:00.000Z``, the timestamp form of S3 XML bodies."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _root(tag: str) -> ET.Element:
    return ET.Element(tag, xmlns=S3_NAMESPACE)


def _add(parent: ET.Element, tag: str, text: str | int | bool | None = None) -> ET.Element:
    child = ET.SubElement(parent, tag)
    if isinstance(text, bool):
        child.text = "true" if text else "false"
    elif text is not None:
        child.text = str(text)
    return child


def _serialize(root: ET.Element) -> bytes:
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="utf-8",
                                                                     xml_declaration=False)


def _owner(parent: ET.Element, tag: str = "Owner") -> None:
    owner = _add(parent, tag)
    _add(owner, "ID", _OWNER_ID)
    _add(owner, "DisplayName", _OWNER_ID)


# --- responses ------------------------------------------------------------------------
def error_document(code: str, message: str, resource: str, request_id: str, *,
                   extra: Iterable[tuple[str, str]] = ()) -> bytes:
    """``<Error>`` with code, message, any ``extra`` elements, resource and request id."""
    root = ET.Element("Error")
    _add(root, "Code", code)
    _add(root, "Message", message)
    for name, value in extra:
        _add(root, name, value)
    _add(root, "Resource", resource)
    _add(root, "RequestId", request_id)
    return _serialize(root)


def list_buckets_document(buckets: Iterable[tuple[str, int]]) -> bytes:
    """ListAllMyBucketsResult of ``(name, creation time in seconds)`` pairs."""
    root = _root("ListAllMyBucketsResult")
    _owner(root)
    holder = _add(root, "Buckets")
    for name, created in buckets:
        bucket = _add(holder, "Bucket")
        _add(bucket, "Name", name)
        _add(bucket, "CreationDate", iso_timestamp(created))
    return _serialize(root)


def location_document(region: str) -> bytes:
    """LocationConstraint (empty for us-east-1, as S3 answers)."""
    root = _root("LocationConstraint")
    if region != "us-east-1":
        root.text = region
    return _serialize(root)


def versioning_document() -> bytes:
    """VersioningConfiguration of a bucket that never had versioning."""
    return _serialize(_root("VersioningConfiguration"))


@dataclass(frozen=True)
class ListedObject:
    """One object in a listing."""

    key: str
    size: int
    etag: str
    mtime: float


@dataclass
class ListingPage:
    """The outcome of one ListObjects call, before encoding.

    ``next_marker`` is the last key or common prefix returned (the position to
    continue from) when the listing is truncated; ``next_token`` is the opaque v2
    continuation token for it.
    """

    objects: list[ListedObject] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    truncated: bool = False
    next_marker: str = ""
    next_token: str = ""


@dataclass(frozen=True)
class ListingRequest:
    """The echoed parameters of a ListObjects request."""

    bucket: str
    prefix: str
    delimiter: str
    max_keys: int
    url_encoded: bool
    version: int
    marker: str = ""
    start_after: str = ""
    continuation_token: str = ""
    fetch_owner: bool = False


def list_objects_document(request: ListingRequest, page: ListingPage) -> bytes:
    """ListBucketResult for ListObjects v1 (``version=1``) or v2."""
    encode: Callable[[str], str] = (lambda s: quote(s, safe="/")) if request.url_encoded else str
    root = _root("ListBucketResult")
    _add(root, "Name", request.bucket)
    _add(root, "Prefix", encode(request.prefix))
    if request.version == 1:
        _add(root, "Marker", encode(request.marker))
        if page.truncated and request.delimiter:
            _add(root, "NextMarker", encode(page.next_marker))
    else:
        if request.start_after:
            _add(root, "StartAfter", encode(request.start_after))
        if request.continuation_token:
            _add(root, "ContinuationToken", request.continuation_token)
        if page.truncated:
            _add(root, "NextContinuationToken", page.next_token)
        _add(root, "KeyCount", len(page.objects) + len(page.prefixes))
    _add(root, "MaxKeys", request.max_keys)
    if request.delimiter:
        _add(root, "Delimiter", encode(request.delimiter))
    if request.url_encoded:
        _add(root, "EncodingType", "url")
    _add(root, "IsTruncated", page.truncated)
    for obj in page.objects:
        contents = _add(root, "Contents")
        _add(contents, "Key", encode(obj.key))
        _add(contents, "LastModified", iso_timestamp(obj.mtime))
        _add(contents, "ETag", quote_etag(obj.etag))
        _add(contents, "Size", obj.size)
        _add(contents, "StorageClass", "STANDARD")
        if request.version == 1 or request.fetch_owner:
            _owner(contents)
    for prefix in page.prefixes:
        _add(_add(root, "CommonPrefixes"), "Prefix", encode(prefix))
    return _serialize(root)


def copy_result_document(etag: str, mtime: float, *, part: bool = False) -> bytes:
    """CopyObjectResult (or CopyPartResult for UploadPartCopy)."""
    root = _root("CopyPartResult" if part else "CopyObjectResult")
    _add(root, "LastModified", iso_timestamp(mtime))
    _add(root, "ETag", quote_etag(etag))
    return _serialize(root)


def initiate_multipart_document(bucket: str, key: str, upload_id: str) -> bytes:
    """InitiateMultipartUploadResult."""
    root = _root("InitiateMultipartUploadResult")
    _add(root, "Bucket", bucket)
    _add(root, "Key", key)
    _add(root, "UploadId", upload_id)
    return _serialize(root)


def complete_multipart_document(location: str, bucket: str, key: str, etag: str) -> bytes:
    """CompleteMultipartUploadResult."""
    root = _root("CompleteMultipartUploadResult")
    _add(root, "Location", location)
    _add(root, "Bucket", bucket)
    _add(root, "Key", key)
    _add(root, "ETag", quote_etag(etag))
    return _serialize(root)


@dataclass(frozen=True)
class PartInfo:
    """One uploaded part of a multipart upload."""

    number: int
    etag: str
    size: int
    mtime: float


def list_parts_document(bucket: str, key: str, upload_id: str, parts: Sequence[PartInfo],
                        *, marker: int, max_parts: int, truncated: bool) -> bytes:
    """ListPartsResult."""
    root = _root("ListPartsResult")
    _add(root, "Bucket", bucket)
    _add(root, "Key", key)
    _add(root, "UploadId", upload_id)
    _owner(root, "Initiator")
    _owner(root)
    _add(root, "StorageClass", "STANDARD")
    _add(root, "PartNumberMarker", marker)
    if parts:
        _add(root, "NextPartNumberMarker", parts[-1].number)
    _add(root, "MaxParts", max_parts)
    _add(root, "IsTruncated", truncated)
    for info in parts:
        part = _add(root, "Part")
        _add(part, "PartNumber", info.number)
        _add(part, "LastModified", iso_timestamp(info.mtime))
        _add(part, "ETag", quote_etag(info.etag))
        _add(part, "Size", info.size)
    return _serialize(root)


@dataclass(frozen=True)
class ListedUpload:
    """One multipart upload in progress, as ListMultipartUploads shows it."""

    key: str
    upload_id: str
    initiated: float


@dataclass
class UploadsPage:
    """One page of ListMultipartUploads."""

    uploads: list[ListedUpload] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    truncated: bool = False


def list_multipart_uploads_document(bucket: str, *, prefix: str, delimiter: str,
                                    key_marker: str, upload_id_marker: str, max_uploads: int,
                                    page: UploadsPage) -> bytes:
    """ListMultipartUploadsResult."""
    root = _root("ListMultipartUploadsResult")
    _add(root, "Bucket", bucket)
    _add(root, "KeyMarker", key_marker)
    _add(root, "UploadIdMarker", upload_id_marker)
    if page.truncated and page.uploads:
        _add(root, "NextKeyMarker", page.uploads[-1].key)
        _add(root, "NextUploadIdMarker", page.uploads[-1].upload_id)
    if prefix:
        _add(root, "Prefix", prefix)
    if delimiter:
        _add(root, "Delimiter", delimiter)
    _add(root, "MaxUploads", max_uploads)
    _add(root, "IsTruncated", page.truncated)
    for listed in page.uploads:
        upload = _add(root, "Upload")
        _add(upload, "Key", listed.key)
        _add(upload, "UploadId", listed.upload_id)
        _owner(upload, "Initiator")
        _owner(upload)
        _add(upload, "StorageClass", "STANDARD")
        _add(upload, "Initiated", iso_timestamp(listed.initiated))
    for common in page.prefixes:
        _add(_add(root, "CommonPrefixes"), "Prefix", common)
    return _serialize(root)


def tagging_document() -> bytes:
    """Tagging with an empty TagSet (objects carry no tags)."""
    root = _root("Tagging")
    _add(root, "TagSet")
    return _serialize(root)


def acl_document() -> bytes:
    """AccessControlPolicy: the owner has full control (lakeFS policies decide access)."""
    root = _root("AccessControlPolicy")
    _owner(root)
    grant = _add(_add(root, "AccessControlList"), "Grant")
    grantee = ET.SubElement(grant, "Grantee", {
        "xmlns:xsi": "http://www.w3.org/2001/XMLSchema-instance", "xsi:type": "CanonicalUser"})
    _add(grantee, "ID", _OWNER_ID)
    _add(grantee, "DisplayName", _OWNER_ID)
    _add(grant, "Permission", "FULL_CONTROL")
    return _serialize(root)


def empty_configuration_document(tag: str, **children: str) -> bytes:
    """A bucket configuration that is never set: ``<tag/>`` with fixed ``children``."""
    root = _root(tag)
    for name, value in children.items():
        _add(root, name, value)
    return _serialize(root)


@dataclass(frozen=True)
class DeleteFailure:
    """A key DeleteObjects could not delete."""

    key: str
    code: str
    message: str


def delete_result_document(deleted: Iterable[str], failures: Iterable[DeleteFailure],
                           *, quiet: bool) -> bytes:
    """DeleteResult; in quiet mode only the failures are listed."""
    root = _root("DeleteResult")
    if not quiet:
        for key in deleted:
            _add(_add(root, "Deleted"), "Key", key)
    for failure in failures:
        error = _add(root, "Error")
        _add(error, "Key", failure.key)
        _add(error, "Code", failure.code)
        _add(error, "Message", failure.message)
    return _serialize(root)


# --- request bodies -------------------------------------------------------------------
def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


class _Declaration(Exception):
    """A document type or entity declaration met by the parser."""


def _refuse_declarations(body: bytes) -> None:
    """Refuse a body that declares a document type or an entity, whatever its encoding.

    The parser itself reports the declarations, after decoding the body as its XML
    declaration or byte order mark says (UTF-16 included): no request body of S3 has
    one, and entities are how an XML body expands or reaches outside.

    Raises:
        S3Error: ``MalformedXML`` for a declaration or a document the parser rejects.
    """
    def refuse(*_args: object) -> None:
        raise _Declaration

    parser = xml.parsers.expat.ParserCreate()
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.UnparsedEntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse  # type: ignore[assignment]
    try:
        parser.Parse(body, True)
    except _Declaration:
        raise S3Error("MalformedXML", "document type declarations are not accepted") from None
    except xml.parsers.expat.ExpatError as exc:
        raise S3Error("MalformedXML", f"the XML you provided was not well-formed: {exc}") from None


def _parse(body: bytes, root_tag: str) -> ET.Element:
    if len(body) > MAX_XML_BODY:
        raise S3Error("MalformedXML", "request body is too large")
    _refuse_declarations(body)
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise S3Error("MalformedXML", f"the XML you provided was not well-formed: {exc}") from None
    if _local(root.tag) != root_tag:
        raise S3Error("MalformedXML", f"expected a <{root_tag}> document")
    return root


def _children(parent: ET.Element, tag: str) -> list[ET.Element]:
    return [child for child in parent if _local(child.tag) == tag]


def _text(parent: ET.Element, tag: str) -> str | None:
    found = _children(parent, tag)
    return (found[0].text or "") if found else None


def parse_delete_request(body: bytes) -> tuple[list[str], bool]:
    """The keys and the Quiet flag of a DeleteObjects body.

    Raises:
        S3Error: ``MalformedXML`` for a bad document, no keys or too many keys.
    """
    root = _parse(body, "Delete")
    keys: list[str] = []
    for obj in _children(root, "Object"):
        key = _text(obj, "Key")
        if not key:
            raise S3Error("MalformedXML", "every <Object> needs a <Key>")
        keys.append(key)
    if not keys:
        raise S3Error("MalformedXML", "no keys to delete")
    if len(keys) > MAX_DELETE_KEYS:
        raise S3Error("MalformedXML", f"at most {MAX_DELETE_KEYS} keys per request")
    quiet = (_text(root, "Quiet") or "").strip().lower() == "true"
    return keys, quiet


def parse_complete_request(body: bytes) -> list[tuple[int, str]]:
    """``(part number, etag)`` pairs of a CompleteMultipartUpload body, in order.

    Raises:
        S3Error: ``MalformedXML`` for a bad document or a part without number or etag.
    """
    root = _parse(body, "CompleteMultipartUpload")
    parts: list[tuple[int, str]] = []
    for part in _children(root, "Part"):
        number, etag = _text(part, "PartNumber"), _text(part, "ETag")
        if not number or etag is None:
            raise S3Error("MalformedXML", "every <Part> needs <PartNumber> and <ETag>")
        try:
            parts.append((int(number), etag.strip().strip('"')))
        except ValueError:
            raise S3Error("MalformedXML", f"invalid part number {number!r}") from None
    if not parts:
        raise S3Error("MalformedXML", "the upload names no parts")
    return parts
