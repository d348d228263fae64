"""The shared mirror coordination table.

Every region's replication sidecar reads and writes mirrors, per-branch progress
and leases here; see ``MirrorsTable`` for the contract and ``open_mirrors_table``
to get one from the ``mirrors_database`` configuration.
"""

from mirrors_db.config import (
    DynamoDBMirrorsConfig,
    MirrorsDatabaseConfig,
    MirrorsDatabaseType,
    PostgresMirrorsConfig,
    SQLiteMirrorsConfig,
)
from mirrors_db.errors import (
    BranchProgressNotFoundError,
    GroupExistsError,
    GroupNotFoundError,
    InvalidMirrorArgumentError,
    InvalidStateTransitionError,
    LeaseHeldError,
    LeaseLostError,
    MalformedRowError,
    MirrorExistsError,
    MirrorNotFoundError,
    MirrorsDatabaseConfigError,
    MirrorsDatabaseError,
    MirrorsDatabaseUnavailableError,
    VersionConflictError,
)
from mirrors_db.models import (
    ChangeEvent,
    GroupCut,
    GroupMember,
    GroupProgress,
    GroupSpec,
    Lease,
    Mirror,
    MirrorBranch,
    MirrorGroup,
    MirrorPage,
    MirrorSpec,
    MirrorState,
    ProgressPage,
    RowKind,
    SensorReading,
    new_mirror_id,
)
from mirrors_db.registry import open_mirrors_table
from mirrors_db.table import ChangeFeed, MirrorsTable

__all__ = [
    "BranchProgressNotFoundError",
    "ChangeEvent",
    "ChangeFeed",
    "GroupCut",
    "GroupExistsError",
    "GroupMember",
    "GroupNotFoundError",
    "GroupProgress",
    "GroupSpec",
    "DynamoDBMirrorsConfig",
    "InvalidMirrorArgumentError",
    "InvalidStateTransitionError",
    "Lease",
    "LeaseHeldError",
    "LeaseLostError",
    "MalformedRowError",
    "Mirror",
    "MirrorBranch",
    "MirrorExistsError",
    "MirrorGroup",
    "MirrorNotFoundError",
    "MirrorPage",
    "MirrorSpec",
    "MirrorState",
    "MirrorsDatabaseConfig",
    "MirrorsDatabaseConfigError",
    "MirrorsDatabaseError",
    "MirrorsDatabaseType",
    "MirrorsDatabaseUnavailableError",
    "MirrorsTable",
    "PostgresMirrorsConfig",
    "ProgressPage",
    "RowKind",
    "SQLiteMirrorsConfig",
    "SensorReading",
    "VersionConflictError",
    "new_mirror_id",
    "open_mirrors_table",
]
