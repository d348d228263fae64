"""The modules a Lua hook may ``require``, with lakeFS's names, arguments and results.

``path``, ``strings``, ``regexp``, ``encoding/json``, ``encoding/yaml``,
``encoding/parquet``, ``encoding/base64``, ``encoding/hex``, ``crypto/sha256``,
``crypto/md5``, ``crypto/hmac``, ``crypto/aes``, ``uuid``, ``hook``, ``time``,
``net/url``, ``aws`` (``s3_client`` and ``glue_client``, for exports), the catalog
exporters written in Lua (``lakefs/catalogexport/...``, the ``.lua`` files under
``modules/``), and, when the server's config allows it, ``net/http``. ``lakefs`` (this
server's engine) is answered by the server: see :data:`LAKEFS_FUNCTIONS`.

``aws`` stays available, as in lakeFS (its exporters need it), but never reaches a
link-local address (cloud instance metadata, ``169.254.0.0/16``, ``fe80::/10``,
``fd00:ec2::254``): an endpoint there is refused, and in a worker process no
connection of any module may go there (:mod:`lakefs_core.actions.lua.egress`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from lupa import lua52

from lakefs_core.actions.lua import gotime
from lakefs_core.actions.lua.egress import check_endpoint
from lakefs_core.actions.lua.sandbox import (
    LuaSandbox,
    Module,
    from_lua,
    integer,
    lua_error,
    text,
)

ModuleBuilder = Callable[[LuaSandbox], Mapping[str, Any]]


# -- path, strings, regexp -------------------------------------------------------------
def path_parse(p: str, sep: str = "/") -> dict[str, str]:
    if p.endswith(sep):
        p = p[:-len(sep)]
    cut = p.rfind(sep)
    if cut < 0:
        return {"parent": "", "base_name": p}
    return {"parent": p[:cut + len(sep)], "base_name": p[cut + len(sep):]}


def path_join(sep: str, *parts: str) -> str:
    """lakeFS's join: keeps the first part's leading separator and ``s3://``."""
    out: list[str] = []
    for i, part in enumerate(parts):
        if i and part.startswith(sep):
            part = part[len(sep):]
        out.append(part)
        if i != len(parts) - 1 and not part.endswith(sep):
            out.append(sep)
    return "".join(out)


def path_is_hidden(p: str, sep: str = "/", prefix: str = "_") -> bool:
    while p:
        parsed = path_parse(p, sep)
        if parsed["base_name"].startswith(prefix):
            return True
        p = parsed["parent"]
    return False


def _path(_sb: LuaSandbox) -> dict[str, Any]:
    return {
        "parse": lambda p, sep=b"/": path_parse(text(p), text(sep)),
        "join": lambda sep, *parts: path_join(text(sep), *(text(x) for x in parts)),
        "is_hidden": lambda p, sep=b"/", prefix=b"_": path_is_hidden(
            text(p), text(sep), text(prefix)),
        "default_separator": lambda: "/",
    }


def _go_replace(s: str, old: str, new: str, n: int) -> str:
    return s.replace(old, new) if n < 0 else s.replace(old, new, n)


def _strings(_sb: LuaSandbox) -> dict[str, Any]:
    return {
        "split": lambda s, sep: text(s).split(text(sep)) if text(sep) else list(text(s)),
        "trim": lambda s: text(s).strip(),
        "replace": lambda s, old, new, n: _go_replace(text(s), text(old), text(new),
                                                      integer(n)),
        "has_prefix": lambda s, p: text(s).startswith(text(p)),
        "has_suffix": lambda s, p: text(s).endswith(text(p)),
        "contains": lambda s, sub: text(sub) in text(s),
    }


def _compiled(pattern: re.Pattern[str]) -> dict[str, Any]:
    def arg(args: tuple[Any, ...]) -> tuple[Any, ...]:
        # both ``p.find(s)`` and ``p:find(s)`` work
        return args[1:] if args and not isinstance(args[0], (bytes, int, float)) else args

    def limit(items: list[Any], n: object) -> list[Any]:
        k = integer(n)
        return items if k < 0 else items[:k]

    def find_all(*a: Any) -> list[str]:
        s, n = arg(a)
        return limit([m.group(0) for m in pattern.finditer(text(s))], n)

    def find_all_submatch(*a: Any) -> list[list[str]]:
        s, n = arg(a)
        return limit([[m.group(0), *(g or "" for g in m.groups())]
                      for m in pattern.finditer(text(s))], n)

    def find(*a: Any) -> str:
        m = pattern.search(text(arg(a)[0]))
        return m.group(0) if m else ""

    def find_submatch(*a: Any) -> list[str]:
        m = pattern.search(text(arg(a)[0]))
        return [m.group(0), *(g or "" for g in m.groups())] if m else []

    return {"find_all": find_all, "find_all_submatch": find_all_submatch, "find": find,
            "find_submatch": find_submatch}


def _regexp(_sb: LuaSandbox) -> dict[str, Any]:
    return {
        "match": lambda p, s: re.search(text(p), text(s)) is not None,
        "quote_meta": lambda s: re.escape(text(s)),
        "compile": lambda p: _compiled(re.compile(text(p))),
    }


# -- encodings and digests ---------------------------------------------------------------
def _json(sb: LuaSandbox) -> dict[str, Any]:
    def marshal(value: Any, *_: Any) -> str:
        return json.dumps(from_lua(sb, value), separators=(",", ":"))

    def unmarshal(s: bytes) -> Any:
        return json.loads(s)

    return {"marshal": marshal, "unmarshal": unmarshal}


def _yaml(sb: LuaSandbox) -> dict[str, Any]:
    def unmarshal(s: bytes) -> Any:
        try:
            return yaml.safe_load(s)
        except yaml.YAMLError as exc:
            raise ValueError(f"invalid YAML: {exc}") from None

    return {"marshal": lambda v: yaml.safe_dump(from_lua(sb, v), sort_keys=False),
            "unmarshal": unmarshal}


def _parquet(_sb: LuaSandbox) -> dict[str, Any]:
    def get_schema(payload: bytes) -> list[dict[str, str]]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            schema = pq.ParquetFile(pa.BufferReader(_bytes(payload))).schema
        except (pa.ArrowException, OSError) as exc:
            raise ValueError(f"not a Parquet file: {exc}") from None
        return [{"name": c.name, "type": c.physical_type} for c in schema]

    return {"get_schema": get_schema}


def _bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    return text(value).encode()


def _base64(_sb: LuaSandbox) -> dict[str, Any]:
    return {
        "encode": lambda d: base64.b64encode(_bytes(d)),
        "decode": lambda d: base64.b64decode(_bytes(d), validate=True),
        "url_encode": lambda d: base64.urlsafe_b64encode(_bytes(d)).rstrip(b"="),
        "url_decode": lambda d: base64.urlsafe_b64decode(
            _bytes(d) + b"=" * (-len(_bytes(d)) % 4)),
    }


def _hex(_sb: LuaSandbox) -> dict[str, Any]:
    return {"encode": lambda d: binascii.hexlify(_bytes(d)),
            "decode": lambda d: binascii.unhexlify(_bytes(d))}


def _digest(name: str) -> ModuleBuilder:
    return lambda _sb: {"digest": lambda d: hashlib.new(name, _bytes(d)).digest()}


def _hmac(_sb: LuaSandbox) -> dict[str, Any]:
    return {
        "sign_sha256": lambda m, k: hmac.new(_bytes(k), _bytes(m), hashlib.sha256).digest(),
        "sign_sha1": lambda m, k: hmac.new(_bytes(k), _bytes(m), hashlib.sha1).digest(),
    }


def _url(_sb: LuaSandbox) -> dict[str, Any]:
    def parse(raw: bytes) -> dict[str, str]:
        try:
            u = urlsplit(text(raw))
            u.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError as exc:
            raise ValueError(f"invalid URL: {exc}") from None
        return {"host": u.netloc.rpartition("@")[2], "path": u.path, "scheme": u.scheme,
                "query": u.query, "fragment": u.fragment}

    return {"parse": parse}


#: lakeFS's bound on one ``net/http`` request
HTTP_TIMEOUT = 30.0


def _canonical_header(name: str) -> str:
    return "-".join(part[:1].upper() + part[1:].lower() for part in name.split("-"))


def net_http(sb: LuaSandbox) -> dict[str, Any]:
    """lakeFS's optional ``net/http``: ``request(url [, body])`` or
    ``request{url=, method=, headers=, body=}``, answering code, body, headers, status.

    Only http(s) URLs; a request gets at most 30s and never outlives the script's
    deadline; a response body larger than the script's memory limit is refused."""
    import httpx

    def request(spec: Any, body: Any = None) -> tuple[int, bytes, dict[str, Any], str]:
        headers: list[tuple[str, str]] = []
        if isinstance(spec, (bytes, str)):
            url, method, data = text(spec), ("GET" if body is None else "POST"), body
        else:
            t = from_lua(sb, spec)
            if not isinstance(t, dict) or not isinstance(t.get("url"), str):
                raise TypeError("request: a URL or a table with url expected")
            # the body as the script's bytes (from_lua would read it as text)
            url, method, data = t["url"], str(t.get("method") or "GET").upper(), spec[b"body"]
            given = t.get("headers") or {}
            if not isinstance(given, dict):
                raise TypeError("request: headers must be a table")
            for k, v in given.items():
                for one in (v if isinstance(v, list) else [v]):
                    headers.append((str(k), str(one)))
        if urlsplit(url).scheme not in ("http", "https"):
            raise ValueError(f"request: only http and https URLs are allowed, not {url!r}")
        timeout = min(HTTP_TIMEOUT, sb.remaining())
        if timeout <= 0:
            raise OSError("request: the script has no time left")
        deadline = time.monotonic() + timeout
        payload = None if data is None else _bytes(data)
        chunks: list[bytes] = []
        size = 0
        try:
            with httpx.Client(timeout=timeout, follow_redirects=True) as client, \
                    client.stream(method, url, headers=headers, content=payload) as resp:
                for chunk in resp.iter_bytes():
                    size += len(chunk)
                    if size > sb.limits.max_memory:
                        raise OSError("request: response body larger than the script's "
                                      "memory limit")
                    if time.monotonic() > deadline:
                        raise OSError(f"request: timed out after {timeout:g}s")
                    chunks.append(chunk)
        except httpx.TimeoutException:
            raise OSError(f"request: timed out after {timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise OSError(f"request: {exc}") from None
        out: dict[str, Any] = {}
        for k, v in resp.headers.multi_items():
            key = _canonical_header(k)
            prev = out.get(key)
            out[key] = v if prev is None else [*(prev if isinstance(prev, list) else [prev]), v]
        status = f"{resp.status_code} {resp.reason_phrase}".strip()
        return resp.status_code, b"".join(chunks), out, status

    return {"request": request}


def _aes(_sb: LuaSandbox) -> dict[str, Any]:
    """lakeFS's AES-CBC: a random 16-byte IV, then the PKCS#7-padded ciphertext."""
    import os as _os

    from cryptography.hazmat.primitives import padding
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    def cipher(key: bytes, iv: bytes) -> Cipher[modes.CBC]:
        if len(key) not in (16, 24, 32):
            raise ValueError(f"crypto/aes: invalid key size {len(key)}")
        return Cipher(algorithms.AES(key), modes.CBC(iv))

    def encrypt(key: Any, plaintext: Any) -> bytes:
        iv = _os.urandom(16)
        padder = padding.PKCS7(128).padder()
        padded = padder.update(_bytes(plaintext)) + padder.finalize()
        enc = cipher(_bytes(key), iv).encryptor()
        return iv + enc.update(padded) + enc.finalize()

    def decrypt(key: Any, ciphertext: Any) -> bytes:
        data = _bytes(ciphertext)
        if len(data) < 32 or len(data) % 16:
            raise ValueError("crypto/aes: ciphertext is not a whole number of blocks")
        dec = cipher(_bytes(key), data[:16]).decryptor()
        padded = dec.update(data[16:]) + dec.finalize()
        unpadder = padding.PKCS7(128).unpadder()
        try:
            return unpadder.update(padded) + unpadder.finalize()
        except ValueError:
            raise ValueError("crypto/aes: bad padding (wrong key?)") from None

    return {"encryptCBC": encrypt, "decryptCBC": decrypt}


#: how ``hook.fail`` marks its message inside the Lua error
HOOK_FAILURE = re.compile(r"<HookFailure>(.*?)</HookFailure>", re.DOTALL)


def _hook(_sb: LuaSandbox) -> dict[str, Any]:
    """lakeFS's ``hook``: ``fail(message)`` fails the hook with exactly that message."""
    def fail(message: bytes) -> tuple[bytes, bytes]:
        return lua_error(f"<HookFailure>{text(message)}</HookFailure>")

    return {"fail": fail}


def _uuid(_sb: LuaSandbox) -> dict[str, Any]:
    return {"new": lambda: str(uuid.uuid4())}


def _nanos(value: object) -> int:
    """A Lua number of nanoseconds (floats as Go's int64 conversion truncates them)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    raise TypeError("number expected")


def _format_iso(ns: object, zone: object = b"") -> str:
    return gotime.format_time(_nanos(ns), gotime.ISO_LAYOUT, text(zone))


def _parse_iso(value: object) -> float:
    try:
        return float(gotime.parse_time(gotime.ISO_LAYOUT, text(value)))
    except ValueError:
        # also the other ISO 8601 forms ("Z", fractions, a date alone)
        dt = datetime.fromisoformat(text(value))
        dt = dt if dt.tzinfo else dt.replace(tzinfo=UTC)
        return float((dt - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
                     * 1000)


def _add(ns: object, duration: Any) -> float:
    if lua52.lua_type(duration) != "table":
        raise TypeError("add: a duration table expected")
    parts = {k: integer(duration[k.encode()] or 0, k) for k in ("hour", "minute", "second")}
    return float(_nanos(ns) + (parts["hour"] * 3600 + parts["minute"] * 60
                                + parts["second"]) * 1_000_000_000)


def _time(sb: LuaSandbox) -> dict[str, Any]:
    def sleep(ns: object) -> None:
        # never past the script's deadline: its time check then ends the script
        time.sleep(max(0.0, min(integer(ns, "duration") / 1e9, sb.remaining() + 0.01)))

    return {
        "now": lambda: float(time.time_ns()),
        "since": lambda ns: float(time.time_ns() - _nanos(ns)),
        "format": lambda ns, layout, zone: gotime.format_time(_nanos(ns), text(layout),
                                                              text(zone)),
        "format_iso": _format_iso, "formatISO": _format_iso,
        "parse": lambda layout, value: float(gotime.parse_time(text(layout), text(value))),
        "parse_iso": _parse_iso, "parseISO": _parse_iso,
        "sleep": sleep,
        "add": _add,
    }


# -- lakefs: served by the server ---------------------------------------------------------
#: the functions of lakeFS's ``lakefs`` module; the server answers them (see
#: :mod:`lakefs_core.actions.lua.engine`), each with the acting user's permissions
LAKEFS_FUNCTIONS = ("list_objects", "get_object", "stat_object", "diff_refs", "diff_branch",
                    "update_object_user_metadata", "create_tag")


# -- aws: S3 -----------------------------------------------------------------------------
def _aws_client(sb: LuaSandbox, service: str, key_id: bytes, secret: bytes,
                region: bytes | None, endpoint: bytes | None) -> Any:
    """A boto3 client whose calls cannot outlast the script (timeouts from its time
    left, few retries); ``endpoint`` unset, the SDK's own (``AWS_ENDPOINT_URL``...)."""
    import boto3
    from botocore.config import Config

    if endpoint:
        check_endpoint(text(endpoint))
    wait = max(1.0, min(60.0, sb.remaining()))
    make: Any = boto3.client  # typed per service name; one function for both here
    return make(
        service, aws_access_key_id=text(key_id), aws_secret_access_key=text(secret),
        region_name=text(region) if region else None,
        endpoint_url=text(endpoint) if endpoint else None,
        config=Config(connect_timeout=wait, read_timeout=wait,
                      retries={"max_attempts": 2, "mode": "standard"}))


def _s3_client(sb: LuaSandbox, key_id: bytes, secret: bytes, region: bytes | None = None,
               endpoint: bytes | None = None) -> dict[str, Any]:
    from botocore.exceptions import ClientError

    client = _aws_client(sb, "s3", key_id, secret, region, endpoint)

    def get_object(bucket: bytes, key: bytes) -> tuple[bytes, bool]:
        try:
            body: bytes = client.get_object(Bucket=text(bucket), Key=text(key))["Body"].read()
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "NoSuchBucket"):
                return b"", False
            raise OSError(str(exc)) from None
        return body, True

    def put_object(bucket: bytes, key: bytes, value: bytes) -> None:
        try:
            client.put_object(Bucket=text(bucket), Key=text(key), Body=_bytes(value))
        except ClientError as exc:
            raise OSError(str(exc)) from None

    def delete_object(bucket: bytes, key: bytes) -> None:
        try:
            client.delete_object(Bucket=text(bucket), Key=text(key))
        except ClientError as exc:
            raise OSError(str(exc)) from None

    def keys(bucket: str, prefix: str) -> Iterator[str]:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                      Prefix=prefix):
            yield from (o["Key"] for o in page.get("Contents", []))

    def delete_recursive(bucket: bytes, prefix: bytes) -> None:
        b = text(bucket)
        batch: list[str] = []
        for key in [*keys(b, text(prefix)), None]:
            if key is not None:
                batch.append(key)
            if batch and (key is None or len(batch) == 1000):
                client.delete_objects(Bucket=b, Delete={"Objects": [{"Key": k}
                                                                    for k in batch]})
                batch = []

    def list_objects(bucket: bytes, prefix: bytes | None = None, token: bytes | None = None,
                     delimiter: bytes | None = None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"Bucket": text(bucket),
                                  "Delimiter": text(delimiter) if delimiter else "/"}
        if prefix:
            kwargs["Prefix"] = text(prefix)
        if token:
            kwargs["ContinuationToken"] = text(token)
        resp = client.list_objects_v2(**kwargs)
        results: list[dict[str, Any]] = [
            {"key": p["Prefix"], "type": "prefix"} for p in resp.get("CommonPrefixes", [])]
        results += [{"key": o["Key"], "type": "object", "etag": o["ETag"],
                     "size": o["Size"],
                     "last_modified": o["LastModified"].strftime("%Y-%m-%dT%H:%M:%SZ")}
                    for o in resp.get("Contents", [])]
        results.sort(key=lambda r: r["key"], reverse=True)
        return {"is_truncated": bool(resp.get("IsTruncated")),
                "next_continuation_token": resp.get("NextContinuationToken", ""),
                "results": results}

    return {"get_object": get_object, "put_object": put_object,
            "delete_object": delete_object, "delete_recursive": delete_recursive,
            "list_objects": list_objects}


def _plain(value: Any) -> Any:
    """An AWS response as JSON-like values (times as ISO 8601 text)."""
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items() if k != "ResponseMetadata"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _glue_client(sb: LuaSandbox, key_id: bytes, secret: bytes, region: bytes | None = None,
                 endpoint: bytes | None = None) -> dict[str, Any]:
    """lakeFS's ``aws.glue_client``: table inputs are JSON text in the AWS API's shape."""
    from botocore.exceptions import ClientError

    client = _aws_client(sb, "glue", key_id, secret, region, endpoint)

    def call(op: str, **kwargs: Any) -> Any:
        try:
            return getattr(client, op)(**{k: v for k, v in kwargs.items() if v is not None})
        except ClientError as exc:
            raise OSError(f"glue {op}: {exc}") from None

    def table_input(raw: bytes) -> Any:
        try:
            value = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"table input is not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ValueError("table input must be a JSON object")
        return value

    def opt(value: bytes | None) -> str | None:
        return text(value) if value is not None else None

    def get_table(db: bytes, name: bytes, catalog_id: bytes | None = None
                  ) -> tuple[Any, bool]:
        try:
            resp = client.get_table(DatabaseName=text(db), Name=text(name),
                                    **({"CatalogId": text(catalog_id)} if catalog_id else {}))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "EntityNotFoundException":
                return "", False
            raise OSError(f"glue get_table: {exc}") from None
        return _plain(resp), True

    def create_table(db: bytes, input_json: bytes, catalog_id: bytes | None = None) -> None:
        call("create_table", DatabaseName=text(db), TableInput=table_input(input_json),
             CatalogId=opt(catalog_id))

    def update_table(db: bytes, input_json: bytes, catalog_id: bytes | None = None,
                     version_id: bytes | None = None, skip_archive: bool | None = None
                     ) -> None:
        call("update_table", DatabaseName=text(db), TableInput=table_input(input_json),
             CatalogId=opt(catalog_id), VersionId=opt(version_id), SkipArchive=skip_archive)

    def delete_table(db: bytes, name: bytes, catalog_id: bytes | None = None) -> None:
        call("delete_table", DatabaseName=text(db), Name=text(name), CatalogId=opt(catalog_id))

    def create_database(db: bytes, opts: Any = None) -> None:
        o = from_lua(sb, opts) if opts is not None else {}
        if not isinstance(o, dict):
            raise TypeError("create_database options: table expected")
        db_input = o.get("create_db_input") or {"DatabaseInput": {"Name": text(db)}}
        if not isinstance(db_input, dict) or db_input.get("DatabaseInput", {}).get(
                "Name") != text(db):
            raise ValueError(f"database name in input doesn't match database name "
                             f"parameter ({text(db)})")
        try:
            client.create_database(**db_input)
        except ClientError as exc:
            if (exc.response.get("Error", {}).get("Code") == "AlreadyExistsException"
                    and o.get("error_on_already_exists") is False):
                return
            raise OSError(f"glue create_database: {exc}") from None

    def delete_database(db: bytes, catalog_id: bytes | None = None) -> None:
        call("delete_database", Name=text(db), CatalogId=opt(catalog_id))

    return {"get_table": get_table, "create_table": create_table,
            "update_table": update_table, "delete_table": delete_table,
            "create_database": create_database, "delete_database": delete_database}


def _aws(sb: LuaSandbox) -> dict[str, Any]:
    return {"s3_client": lambda *a: _s3_client(sb, *a),
            "glue_client": lambda *a: _glue_client(sb, *a)}


_LUA_MODULES = Path(__file__).parent / "modules"


def lua_modules() -> dict[str, bytes]:
    """The modules written in Lua, by name (their path below ``modules/``)."""
    return {str(p.relative_to(_LUA_MODULES).with_suffix("")): p.read_bytes()
            for p in sorted(_LUA_MODULES.rglob("*.lua"))}


#: the modules every hook may require (``lakefs`` is added per run)
MODULES: dict[str, Module] = {
    "path": _path,
    "strings": _strings,
    "regexp": _regexp,
    "encoding/json": _json,
    "encoding/yaml": _yaml,
    "encoding/parquet": _parquet,
    "encoding/base64": _base64,
    "encoding/hex": _hex,
    "crypto/sha256": _digest("sha256"),
    "crypto/md5": _digest("md5"),
    "crypto/hmac": _hmac,
    "crypto/aes": _aes,
    "uuid": _uuid,
    "hook": _hook,
    "time": _time,
    "net/url": _url,
    "aws": _aws,
    **lua_modules(),
}
