"""Helpers shared by the graveler tests: entries, Hypothesis strategies, model repos."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import strategies as st

from lakefs_core.graveler import AddressType, Entry, EntryRecord, RangeManager


def entry(path: str, version: int = 0, **fields: object) -> Entry:
    """A plausible entry for ``path``; ``version`` changes its address and etag."""
    values: dict[str, object] = {
        "address": f"data/{version}/{path}",
        "size": len(path) + version,
        "etag": f"{version:032x}",
        "mtime": 1_700_000_000.25 + version,
    }
    values.update(fields)
    return Entry(**values)  # type: ignore[arg-type]


def record(path: str, version: int = 0) -> EntryRecord:
    return EntryRecord(path, entry(path, version))


def build(rm: RangeManager, model: Mapping[str, Entry]) -> str:
    """A metarange holding exactly ``model``, built from the empty one."""
    changes = [EntryRecord(p, model[p]) for p in sorted(model)]
    return rm.apply(rm.empty_metarange(), changes).metarange_id


def contents(rm: RangeManager, metarange_id: str) -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for rec in rm.iterate(metarange_id):
        assert rec.entry is not None
        out[rec.path] = rec.entry
    return out


# --- strategies -------------------------------------------------------------------
#: short paths over a few characters, so that sets collide and share prefixes
paths = st.text(alphabet="ab/é0", min_size=1, max_size=7)
metadata = st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3)
entries = st.builds(
    Entry,
    address=st.text(max_size=12),
    size=st.integers(min_value=0, max_value=2**63 - 1),
    etag=st.text(alphabet="0123456789abcdef", max_size=32),
    mtime=st.floats(allow_nan=False, allow_infinity=False),
    address_type=st.sampled_from(list(AddressType)),
    content_type=st.sampled_from(["application/octet-stream", "text/plain"]),
    metadata=metadata,
)
models = st.dictionaries(paths, entries, max_size=60)
