"""A sorted key index for moto's S3 listings, for benchmarks of large buckets.

moto answers each ``ListObjectsV2`` page by walking and sorting every key of the
bucket, so listing N keys a page of 1,000 at a time costs N**2 / 1,000 key visits:
listing 100,000 keys took 64 s on a 2-core machine, and a million would take some 40
minutes, whoever lists it. With
:func:`index_listings` installed, a listing without a delimiter finds its page by
bisecting a sorted list of the bucket's key names instead (kept until the bucket's
key count changes), and answers exactly as moto does: the same keys, order,
truncation and continuation tokens. Listings with a delimiter are moto's own.

Only for buckets that objects are added to and not deleted from while listed (the
index is rebuilt when the key count changes), as in the benchmarks that use it.
"""

from __future__ import annotations

import bisect
from typing import Any

_INDEX_ATTRIBUTE = "_bench_sorted_names"


def _sorted_names(bucket: Any) -> list[str]:
    count = len(bucket.keys)
    cached = getattr(bucket, _INDEX_ATTRIBUTE, None)
    if cached is None or cached[0] != count:
        cached = (count, sorted(bucket.keys.keys()))
        setattr(bucket, _INDEX_ATTRIBUTE, cached)
    names: list[str] = cached[1]
    return names


def index_listings() -> None:
    """Make moto's ``list_objects_v2`` without a delimiter bisect a sorted index."""
    from moto.s3.models import FakeDeleteMarker, S3Backend
    from moto.utilities.utils import md5_hash

    plain = S3Backend.list_objects_v2
    if getattr(plain, "indexed", False):
        return

    def list_objects_v2(self: S3Backend, bucket: Any, prefix: str | None,
                        delimiter: str | None, continuation_token: str | None,
                        start_after: str | None, max_keys: int) -> Any:
        if delimiter:
            return plain(self, bucket, prefix, delimiter, continuation_token, start_after,
                         max_keys)
        names = _sorted_names(bucket)
        prefix = prefix or ""
        at = bisect.bisect_left(names, prefix)
        if continuation_token or start_after:
            limit = (self._pagination_tokens.get(continuation_token)
                     if continuation_token else start_after)
            if limit is not None:
                at = max(at, bisect.bisect_right(names, limit))
        keys: list[Any] = []
        more = False
        for name in names[at:]:
            if not name.startswith(prefix):
                break
            key = bucket.keys[name]
            if isinstance(key, FakeDeleteMarker):
                continue
            if len(keys) == max_keys:
                more = True
                break
            keys.append(key)
        if max_keys == 0:
            return [], False, None
        if not more:
            return keys, False, None
        token = md5_hash(keys[-1].name.encode("utf-8")).hexdigest()
        self._pagination_tokens[token] = keys[-1].name
        return keys, True, token

    list_objects_v2.indexed = True  # type: ignore[attr-defined]
    S3Backend.list_objects_v2 = list_objects_v2  # type: ignore[method-assign]
