"""Canonical binary encoding of graveler values, and the ids computed from it.

Every value is one type-tag byte, an 8-byte big-endian payload length, then the
payload:

========  ====  ==============================================================
type      tag   payload
========  ====  ==============================================================
None      ``N`` empty
bool      ``T`` one byte, 0 or 1
int       ``I`` 8 bytes, signed big-endian (values outside 64 bits are refused)
float     ``F`` 8 bytes, IEEE 754 double big-endian (-0.0 is 0.0, one NaN)
str       ``S`` UTF-8 bytes
bytes     ``Y`` the bytes
sequence  ``L`` the encodings of the items, concatenated (tuple and list alike)
mapping   ``M`` encoded keys and values alternating, sorted by the key's encoding
========  ====  ==============================================================

The encoding depends on nothing but the value (not on dict order, hash seeds,
``repr`` of floats or the platform), so an id computed in one process or region is
the same in every other.

A range's records can be encoded one by one (:func:`record_encoding`, from Python
values) or all at once from the range's Arrow table (:func:`table_record_encodings`,
column by column with numpy and Arrow kernels): both give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakefs_core.errors import StorageError, ValidationError
from lakefs_core.graveler.model import Commit, Entry, EntryRecord, RangeInfo
from lakefs_core.graveler.rangefile import whole

_LEN = struct.Struct(">Q")
_INT = struct.Struct(">q")
_FLOAT = struct.Struct(">d")
_INT_MIN = -(1 << 63)
_INT_MAX = (1 << 63) - 1
_NAN = _FLOAT.pack(math.nan)

_NONE = b"N" + _LEN.pack(0)
_TRUE = b"T" + _LEN.pack(1) + b"\x01"
_FALSE = b"T" + _LEN.pack(1) + b"\x00"
_EMPTY_MAPPING = b"M" + _LEN.pack(0)
_INT_HEAD = b"I" + _LEN.pack(8)
_FLOAT_HEAD = b"F" + _LEN.pack(8)


def _str(value: str) -> bytes:
    try:
        data = value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValidationError(f"string is not valid unicode: {value!r}") from e
    return b"S" + _LEN.pack(len(data)) + data


def _int(value: int) -> bytes:
    if not _INT_MIN <= value <= _INT_MAX:
        raise ValidationError(f"integer out of the 64-bit range: {value}")
    return _INT_HEAD + _INT.pack(value)


def _float(value: float) -> bytes:
    if math.isnan(value):
        return _FLOAT_HEAD + _NAN
    return _FLOAT_HEAD + _FLOAT.pack(value + 0.0)  # -0.0 + 0.0 == 0.0


def _framed(tag: bytes, parts: Iterable[bytes]) -> bytes:
    payload = b"".join(parts)
    return tag + _LEN.pack(len(payload)) + payload


def _mapping(value: Mapping[Any, Any]) -> bytes:
    if not value:
        return _EMPTY_MAPPING
    items = sorted((encode(k), encode(v)) for k, v in value.items())
    return _framed(b"M", (part for item in items for part in item))


def encode(value: Any) -> bytes:
    """The canonical encoding of ``value``.

    Args:
        value: None, bool, int, float, str, bytes, or tuples, lists and mappings of
            those (nested freely). ``StrEnum`` members encode as their string value.

    Returns:
        The type-tagged, length-prefixed bytes.

    Raises:
        ValidationError: a value of another type, an int outside 64 bits, or a
            string that is not valid unicode.
    """
    if value is None:
        return _NONE
    if isinstance(value, bool):
        return _TRUE if value else _FALSE
    if isinstance(value, int):
        return _int(value)
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        return b"Y" + _LEN.pack(len(data)) + data
    if isinstance(value, tuple | list):
        return _framed(b"L", (encode(v) for v in value))
    if isinstance(value, Mapping):
        return _mapping(value)
    raise ValidationError(f"cannot encode a value of type {type(value).__name__}")


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


# --- commits ----------------------------------------------------------------------
def commit_id(commit: Commit) -> str:
    """The id of a commit: SHA-256 (hex) over the encoding of its fields.

    The fields are parents, metarange id, message, committer, creation date and
    metadata; ``generation`` is derived from the parents and is left out.
    """
    fields = (
        tuple(commit.parents),
        commit.metarange_id,
        commit.message,
        commit.committer,
        commit.creation_date,
        commit.metadata,
    )
    return _digest(encode(fields)).hex()


# --- entries and ranges -----------------------------------------------------------
def entry_fields(entry: Entry) -> tuple[Any, ...]:
    """An entry's fields in encoding order (the Parquet columns after ``path``)."""
    return (
        entry.address,
        str(entry.address_type),
        entry.size,
        entry.etag,
        float(entry.mtime),
        entry.content_type,
        entry.metadata,
    )


def record_encoding(record: EntryRecord) -> bytes:
    """The encoding of one record: ``(path, *entry_fields)``, or ``(path, None)``.

    Equal to ``encode(...)`` of that tuple, written out flat because ranges encode
    every record they hold. ``mtime`` always encodes as a float (Parquet stores it
    as a double), so ``mtime=5`` and ``mtime=5.0`` give the same id.
    """
    entry = record.entry
    try:
        path = record.path.encode("utf-8")
        if entry is None:
            payload = b"".join((b"S", _LEN.pack(len(path)), path, _NONE))
            return b"L" + _LEN.pack(len(payload)) + payload
        address = entry.address.encode("utf-8")
        etag = entry.etag.encode("utf-8")
        address_type = str(entry.address_type).encode("utf-8")
        content_type = entry.content_type.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ValidationError(f"record is not valid unicode: {record.path!r}") from e
    size = entry.size
    if not _INT_MIN <= size <= _INT_MAX:
        raise ValidationError(f"integer out of the 64-bit range: {size}")
    mtime = float(entry.mtime)
    payload = b"".join((
        b"S", _LEN.pack(len(path)), path,
        b"S", _LEN.pack(len(address)), address,
        b"S", _LEN.pack(len(address_type)), address_type,
        _INT_HEAD, _INT.pack(size),
        b"S", _LEN.pack(len(etag)), etag,
        _float(mtime),
        b"S", _LEN.pack(len(content_type)), content_type,
        _mapping(entry.metadata) if entry.metadata else _EMPTY_MAPPING,
    ))
    return b"L" + _LEN.pack(len(payload)) + payload


def entry_digest(record: EntryRecord) -> bytes:
    """SHA-256 (raw bytes) over the encoding of one record."""
    return _digest(record_encoding(record))


def range_id_of_encodings(encodings: Sequence[bytes]) -> str:
    """A range id from record encodings already in path order."""
    return _digest(_framed(b"L", encodings)).hex()


def payload_of(encodings: pa.Array) -> memoryview:
    """The concatenated values of a binary array: the bytes of its items, in order."""
    if len(encodings) == 0:
        return memoryview(b"")
    width = np.int64 if pa.types.is_large_binary(encodings.type) else np.int32
    _, offsets_buf, data = encodings.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=width, count=len(encodings) + 1,
                            offset=encodings.offset * np.dtype(width).itemsize)
    return memoryview(data)[int(offsets[0]):int(offsets[-1])]


def range_id_of_payload(*payload: memoryview | bytes) -> str:
    """A range id from the concatenated encodings of its records (in path order),
    given whole or in consecutive parts."""
    digest = hashlib.sha256(b"L" + _LEN.pack(sum(len(part) for part in payload)))
    for part in payload:
        digest.update(part)
    return digest.hexdigest()


def binary_array(items: Sequence[bytes]) -> pa.Array:
    """A binary array of ``items``: 32-bit offsets unless they add up to 2 GiB or more."""
    large = sum(len(item) for item in items) >= 1 << 31
    return pa.array(items, type=pa.large_binary() if large else pa.binary())


# Fixed-width parts of a record's encoding, between its variable-length strings:
#   L len(record) S len(path) | path | S len(address) | address | S len(address_type) |
#   address_type | I 8 size S len(etag) | etag | F 8 mtime S len(content_type) |
#   content_type | metadata
_HEAD = np.dtype([("L", "S1"), ("record", ">u8"), ("S", "S1"), ("len", ">u8")])
_STR_HEAD = np.dtype([("S", "S1"), ("len", ">u8")])
_NUMBER_STR_HEAD = np.dtype(
    [("tag", "S1"), ("eight", ">u8"), ("value", ">u8"), ("S", "S1"), ("len", ">u8")])
_NAN_BITS = int.from_bytes(_NAN, "big")
#: what a record's payload holds besides its five strings and its metadata
_RECORD_FIXED = 5 * 9 + 2 * 17


def _fixed_parts(parts: np.ndarray, large: bool) -> pa.Array:
    """A binary array over the rows of a packed numpy record array (zero-copy)."""
    n, width = len(parts), parts.dtype.itemsize
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int64 if large else np.int32)
    return pa.Array.from_buffers(pa.large_binary() if large else pa.binary(), n, [
        None, pa.py_buffer(offsets), pa.py_buffer(parts.view(np.uint8))])


def _str_parts(n: int, lengths: np.ndarray) -> np.ndarray:
    parts = np.empty(n, dtype=_STR_HEAD)
    parts["S"] = b"S"
    parts["len"] = lengths
    return parts


def _metadata_parts(metadata: pa.Array, large: bool) -> tuple[pa.Array, np.ndarray]:
    """The metadata encodings (a JSON object per row in the file) and their lengths."""
    n = len(metadata)
    nonempty = np.flatnonzero(
        pc.not_equal(metadata, "{}").to_numpy(zero_copy_only=False))
    if not len(nonempty):
        empty = np.empty(n, dtype=_STR_HEAD)
        empty["S"], empty["len"] = b"M", 0
        return _fixed_parts(empty, large), np.full(n, len(_EMPTY_MAPPING), dtype=np.uint64)
    encodings = [_EMPTY_MAPPING] * n
    for i in nonempty.tolist():
        text = metadata[i].as_py()
        try:
            value = json.loads(text)
        except ValueError as e:
            raise StorageError(f"corrupt range file: metadata {text!r}: {e}") from None
        if not isinstance(value, dict):
            raise StorageError(f"corrupt range file: metadata {text!r} is not an object")
        encodings[i] = _mapping(value)
    array = pa.array(encodings, type=pa.large_binary() if large else pa.binary())
    return array, pc.binary_length(array).to_numpy().astype(np.uint64)


def table_record_encodings(table: pa.Table) -> pa.Array:
    """The encodings of the records of a range table, as one binary array.

    Item ``i`` equals :func:`record_encoding` of row ``i`` as
    :func:`~lakefs_core.graveler.rangefile.decode_range` reads it; the array's values
    are the payload that the range id hashes (see :func:`payload_of`). The table has
    the range file's columns (``path, address, address_type, size, etag, mtime,
    content_type, metadata``), without nulls. The array is ``binary`` (32-bit offsets,
    zero-copy from the string columns) unless the payload might not fit them.

    Raises:
        StorageError: a metadata value is not a JSON object.
    """
    n = table.num_rows
    if n == 0:
        return pa.array([], type=pa.binary())
    # 32-bit offsets while the payload surely fits: fixed parts, metadata, strings
    large = n * 200 + table.nbytes >= 1 << 31
    binary = pa.large_binary() if large else pa.binary()

    def column(name: str) -> pa.Array:
        return whole(table.column(name))

    strings = {name: column(name).cast(binary)
               for name in ("path", "address", "address_type", "etag", "content_type")}
    lengths = {name: pc.binary_length(a).to_numpy().astype(np.uint64)
               for name, a in strings.items()}
    metadata, metadata_lengths = _metadata_parts(column("metadata"), large)

    head = np.empty(n, dtype=_HEAD)
    head["L"], head["S"] = b"L", b"S"
    head["record"] = _RECORD_FIXED + sum(lengths.values()) + metadata_lengths
    head["len"] = lengths["path"]
    size = np.empty(n, dtype=_NUMBER_STR_HEAD)
    size["tag"], size["eight"], size["S"] = b"I", 8, b"S"
    size["value"] = column("size").to_numpy().view(np.uint64)
    size["len"] = lengths["etag"]
    mtime = np.empty(n, dtype=_NUMBER_STR_HEAD)
    mtime["tag"], mtime["eight"], mtime["S"] = b"F", 8, b"S"
    floats = column("mtime").to_numpy() + 0.0  # -0.0 + 0.0 == 0.0
    bits = floats.view(np.uint64).copy()
    bits[np.isnan(floats)] = _NAN_BITS  # one NaN
    mtime["value"] = bits
    mtime["len"] = lengths["content_type"]
    return pc.binary_join_element_wise(
        _fixed_parts(head, large), strings["path"],
        _fixed_parts(_str_parts(n, lengths["address"]), large), strings["address"],
        _fixed_parts(_str_parts(n, lengths["address_type"]), large), strings["address_type"],
        _fixed_parts(size, large), strings["etag"],
        _fixed_parts(mtime, large), strings["content_type"],
        metadata,
        pa.scalar(b"", type=binary),
    )


def range_id(records: Iterable[EntryRecord]) -> str:
    """The id of a range: SHA-256 (hex) over the encoding of its records by path."""
    ordered = sorted(records, key=lambda r: r.path)
    return range_id_of_encodings([record_encoding(r) for r in ordered])


def metarange_id(ranges: Sequence[RangeInfo]) -> str:
    """The id of a metarange: SHA-256 (hex) over the encoding of its range descriptors."""
    return _digest(
        encode([(r.id, r.min_key, r.max_key, r.count, r.estimated_size) for r in ranges])
    ).hex()


#: the id of the metarange that lists no range
EMPTY_METARANGE_ID = metarange_id(())
