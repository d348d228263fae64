"""The versioning model: commits, metaranges and ranges, and the algorithms over them."""

from lakefs_core.graveler.encoding import (
    EMPTY_METARANGE_ID,
    commit_id,
    encode,
    entry_digest,
    metarange_id,
    range_id,
)
from lakefs_core.graveler.model import (
    AddressType,
    Branch,
    Commit,
    CommitRecord,
    Difference,
    DiffType,
    Entry,
    EntryRecord,
    Metarange,
    RangeInfo,
    Repository,
    Tag,
)
from lakefs_core.graveler.ranges import ApplyResult, MergeResult, RangeManager

__all__ = [
    "EMPTY_METARANGE_ID",
    "AddressType",
    "ApplyResult",
    "Branch",
    "Commit",
    "CommitRecord",
    "DiffType",
    "Difference",
    "Entry",
    "EntryRecord",
    "MergeResult",
    "Metarange",
    "RangeInfo",
    "RangeManager",
    "Repository",
    "Tag",
    "commit_id",
    "encode",
    "entry_digest",
    "metarange_id",
    "range_id",
]
