"""The ``lakefs`` Spark data source: read any ref by commit id, write one commit per job.

Reading::

    spark.read.format("lakefs")
        .option("endpoint", "http://lakefs:8000").option("repository", "repo")
        .option("ref", "<commit id | branch | tag>")      # default: the default branch
        .option("blockstore_root", "/data/blockstore")     # or the s3_* options
        .load("path/prefix")

The ref is resolved to a commit id once, while the query is planned; every task of
every action on the DataFrame then reads that commit, even if the branch moves.
Listing reads the commit's metarange and ranges from the object store, and tasks
read data files by physical address: no data passes through the server. Options
``format`` (``parquet``, ``csv``, ``json``), ``header`` and ``delimiter`` (CSV),
``partition_bytes`` (data per task, default 128 MiB) and ``batch_rows`` tune reads.
Server and storage options are listed in :mod:`lakefs_core.spark.options`.

Writing::

    df.write.format("lakefs").mode("append")               # or "overwrite"
        .option("endpoint", ...).option("repository", "repo").option("branch", "etl")
        .option("commit_message", "features v2")
        .save("path/prefix")

Each task writes Parquet files straight into the branch's storage namespace, each at
an address the server hands out for it (``GET .../staging/backing``, as lakeFS's own
clients do: the server links only addresses it handed out), and reports them. Before
writing a file a task notes its address in the job's ledger (one small object per
file under ``data/spark-<job id>/``), so that the driver finds the files of failed
and late task attempts too. When the job commits, the driver links every reported
file at ``<path>/part-<task>-<job id>-<n>.parquet`` and makes one commit
(``overwrite`` also deletes what was under the path, in the same commit), then
deletes the ledger and the files no one reported. An aborted job deletes every file
of its ledger and stages nothing.
Options ``commit_message``, ``commit_metadata`` (a JSON object), ``max_file_bytes``
and ``compression`` tune it.
Like any commit, the job's commit also takes what others staged on the branch
meanwhile: concurrent jobs should write to branches of their own and merge.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

try:
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        InputPartition,
        WriterCommitMessage,
    )
    from pyspark.sql.types import StructField, StructType
except ImportError as e:  # the optional extra: say which one
    from lakefs_core.spark import SPARK_EXTRA_HINT

    raise ImportError(SPARK_EXTRA_HINT) from e

from lakefs_core.block.base import join_address
from lakefs_core.errors import (
    LakeFSError,
    ObjectNotFoundError,
    ReadOnlyRepositoryError,
    ValidationError,
)
from lakefs_core.spark.client import LakeFSClient
from lakefs_core.spark.formats import FormatOptions, infer_schema, open_input, read_batches
from lakefs_core.spark.listing import DataFile, list_commit_files, pack_files
from lakefs_core.spark.options import (
    ServerOptions,
    StorageOptions,
    option_int,
    option_str,
    require,
)

log = logging.getLogger("lakefs_core.spark")

#: the short name for ``spark.read.format(...)``
FORMAT_NAME = "lakefs"
#: data per read task, as Spark's own ``spark.sql.files.maxPartitionBytes``
DEFAULT_PARTITION_BYTES = 128 << 20
#: a writer task starts a new file past this size
DEFAULT_MAX_FILE_BYTES = 256 << 20
#: a writer task buffers about this much (in memory, uncompressed) per row group
ROW_GROUP_BYTES = 64 << 20
#: commit metadata key holding the id of the write job that made the commit
JOB_ID_KEY = "spark.job_id"
#: where a write job's ledger of written addresses lives, below the storage namespace
LEDGER_PREFIX = "data/spark-"


def _spark_schema(schema: pa.Schema) -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    converted = from_arrow_schema(schema)
    # files may lack columns or hold nulls anywhere: every column is nullable, as in Spark
    return StructType([StructField(f.name, f.dataType, True, f.metadata)
                       for f in converted.fields])


def _arrow_schema(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    # exactly what the JVM expects of a Python data source's batches
    return to_arrow_schema(schema, timezone="UTC")


@dataclass(frozen=True)
class ReadPlan:
    """A read, resolved: the commit id and its data files under the path (picklable)."""

    repository: str
    ref: str
    commit_id: str
    namespace: str
    path: str
    files: tuple[DataFile, ...]


class FilesPartition(InputPartition):
    """One read task: consecutive files of the commit."""

    def __init__(self, index: int, files: list[DataFile]) -> None:
        super().__init__(index)
        self.files = files


class LakeFSDataSource(DataSource):
    """``format("lakefs")``: see the module documentation for options."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def _plan(self) -> ReadPlan:
        plan: ReadPlan | None = getattr(self, "_read_plan", None)
        if plan is None:
            plan = plan_read(self.options)
            # the instance is pickled from schema inference to planning: the ref is
            # resolved once and every later step sees the same commit
            self._read_plan = plan
        return plan

    def schema(self) -> StructType:
        """The schema of the first data file (Parquet footer, or inferred for CSV/JSON).

        Raises:
            ObjectNotFoundError: no data files under the path at that commit.
        """
        plan = self._plan()
        if not plan.files:
            raise ObjectNotFoundError(
                f"no data files under {plan.path!r} in {plan.repository}@{plan.commit_id} "
                "(give a schema to read an empty path)")
        storage = StorageOptions.from_options(self.options)
        first = plan.files[0]
        with open_input(storage.open(first.physical_address), first.physical_address) as src:
            arrow = infer_schema(src, FormatOptions.from_options(self.options))
        return _spark_schema(arrow)

    def reader(self, schema: StructType) -> LakeFSReader:
        plan = self._plan()
        return LakeFSReader(plan, schema, StorageOptions.from_options(self.options),
                            FormatOptions.from_options(self.options),
                            option_int(self.options, "partition_bytes", DEFAULT_PARTITION_BYTES))

    def writer(self, schema: StructType, overwrite: bool) -> LakeFSWriter:
        return LakeFSWriter(plan_write(self.options), overwrite)


def plan_read(options: Mapping[str, str]) -> ReadPlan:
    """Resolve the ref of a read to a commit id and list its files from the store.

    Raises:
        ValidationError: missing or bad options.
        NotFoundError: no such repository or ref.
        RangeNotFoundError: the commit's metadata is not in the store (yet).
    """
    server = ServerOptions.from_options(options)
    repository = require(options, "repository")
    path = option_str(options, "path", "") or ""
    with LakeFSClient(server) as client:
        repo = client.get_repository(repository)
        ref = option_str(options, "ref") or repo.default_branch
        commit = client.get_commit(repository, ref)
    store = StorageOptions.from_options(options).open(repo.storage_namespace)
    files = list_commit_files(store, repo.storage_namespace, commit.metarange_id, path)
    log.info("planned read of %s@%s (%s): %d files under %r", repository, ref, commit.id,
             len(files), path)
    return ReadPlan(repository, ref, commit.id, repo.storage_namespace, path, tuple(files))


class LakeFSReader(DataSourceReader):
    """Reads the files of a :class:`ReadPlan`, one group of files per task."""

    def __init__(self, plan: ReadPlan, schema: StructType, storage: StorageOptions,
                 formats: FormatOptions, partition_bytes: int) -> None:
        self.plan = plan
        self.storage = storage
        self.formats = formats
        self.partition_bytes = partition_bytes
        self.arrow_schema = _arrow_schema(schema)

    def partitions(self) -> Sequence[InputPartition]:
        groups = pack_files(self.plan.files, self.partition_bytes)
        return [FilesPartition(i, g) for i, g in enumerate(groups)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # with no files Spark still runs one task, with a partition of its own
        files = partition.files if isinstance(partition, FilesPartition) else []
        for f in files:
            store = self.storage.open(f.physical_address)
            with open_input(store, f.physical_address) as src:
                yield from read_batches(src, self.formats, self.arrow_schema)


# --- writing ---------------------------------------------------------------------------
@dataclass(frozen=True)
class WriteTarget:
    """Where a write job goes (picklable, shared by the driver and the tasks)."""

    server: ServerOptions
    storage: StorageOptions
    repository: str
    branch: str
    path: str
    namespace: str
    job_id: str
    commit_message: str
    commit_metadata: Mapping[str, str]
    max_file_bytes: int
    compression: str

    @property
    def ledger(self) -> str:
        """The address under which this job's tasks note the addresses they write."""
        return join_address(self.namespace, f"{LEDGER_PREFIX}{self.job_id}/")

    def logical_path(self, task: int, n: int) -> str:
        name = f"part-{task:05d}-{self.job_id}-{n:03d}.parquet"
        return f"{self.path}/{name}" if self.path else name


@dataclass(frozen=True)
class WrittenFile:
    """A file a task wrote: where it is in the branch and in the store."""

    path: str
    physical_address: str
    size: int
    checksum: str


@dataclass
class LakeFSCommitMessage(WriterCommitMessage):
    """What a task reports to the driver: the files it wrote."""

    files: list[WrittenFile]


def plan_write(options: Mapping[str, str]) -> WriteTarget:
    """Check the target branch and fix the job's id and file layout.

    Raises:
        ValidationError: missing or bad options.
        NotFoundError: no such repository or branch.
        ReadOnlyRepositoryError: the repository is read-only (a mirror).
    """
    server = ServerOptions.from_options(options)
    repository = require(options, "repository")
    branch = option_str(options, "branch") or require(options, "ref")
    path = (option_str(options, "path", "") or "").strip("/")
    metadata_json = option_str(options, "commit_metadata", "{}") or "{}"
    try:
        metadata = json.loads(metadata_json)
    except ValueError:
        raise ValidationError(f"option 'commit_metadata' is not JSON: {metadata_json!r}"
                              ) from None
    if not isinstance(metadata, dict):
        raise ValidationError("option 'commit_metadata' must be a JSON object")
    with LakeFSClient(server) as client:
        repo = client.get_repository(repository)
        if repo.read_only:
            raise ReadOnlyRepositoryError(f"repository {repository} is read-only")
        client.get_branch_head(repository, branch)
    job_id = uuid.uuid4().hex[:16]
    return WriteTarget(
        server=server, storage=StorageOptions.from_options(options), repository=repository,
        branch=branch, path=path, namespace=repo.storage_namespace, job_id=job_id,
        commit_message=option_str(options, "commit_message")
        or f"Spark write of {path or '/'} (job {job_id})",
        commit_metadata={str(k): str(v) for k, v in metadata.items()},
        max_file_bytes=option_int(options, "max_file_bytes", DEFAULT_MAX_FILE_BYTES),
        compression=option_str(options, "compression", "snappy") or "snappy",
    )


class _ParquetFiles:
    """Writes batches to a spool file in row groups of about :data:`ROW_GROUP_BYTES`,
    handing the file over (``on_file``) whenever it reaches ``max_file_bytes`` and at
    the end. Spark's batches are small; buffering them gives readers big row groups."""

    def __init__(self, spool: str, compression: str, max_file_bytes: int,
                 on_file: Callable[[], None]) -> None:
        self.spool = spool
        self.compression = compression
        self.max_file_bytes = max_file_bytes
        self.row_group_bytes = min(ROW_GROUP_BYTES, max_file_bytes)
        self.on_file = on_file
        self._writer: pq.ParquetWriter | None = None
        self._pending: list[pa.RecordBatch] = []
        self._pending_bytes = 0

    def add(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self._pending.append(batch)
        self._pending_bytes += batch.nbytes
        if self._pending_bytes >= self.row_group_bytes:
            self._flush()
            if os.path.getsize(self.spool) >= self.max_file_bytes:
                self._close()

    def finish(self) -> None:
        self._flush()
        self._close()

    def _flush(self) -> None:
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.spool, table.schema,
                                            compression=self.compression)
        self._writer.write_table(table, row_group_size=table.num_rows)
        self._pending, self._pending_bytes = [], 0

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self.on_file()


def _task_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return 0 if ctx is None else ctx.partitionId()


class LakeFSWriter(DataSourceArrowWriter):
    """Tasks write Parquet files into the namespace; the driver stages them and commits once."""

    def __init__(self, target: WriteTarget, overwrite: bool) -> None:
        self.target = target
        self.overwrite = overwrite

    # --- tasks ---------------------------------------------------------------------------
    def write(self, iterator: Iterator[pa.RecordBatch]) -> LakeFSCommitMessage:
        target = self.target
        task = _task_id()
        store = target.storage.open(target.namespace)
        written: list[WrittenFile] = []
        try:
            with (LakeFSClient(target.server) as client,
                  tempfile.TemporaryDirectory(prefix="lakefs-write-") as tmp):
                spool = os.path.join(tmp, "part.parquet")

                def upload() -> None:
                    written.append(self._upload(store, client, spool, task, len(written)))

                files = _ParquetFiles(spool, target.compression, target.max_file_bytes, upload)
                for batch in iterator:
                    files.add(batch)
                files.finish()
        except BaseException:
            for f in written:
                with contextlib.suppress(Exception):
                    store.delete(f.physical_address)
            raise
        return LakeFSCommitMessage(written)

    def _upload(self, store: Any, client: LakeFSClient, spool: str, task: int,
                n: int) -> WrittenFile:
        target = self.target
        path = target.logical_path(task, n)
        address = client.get_physical_address(target.repository, target.branch, path)
        store.put(f"{target.ledger}{uuid.uuid4().hex}", address.encode())
        with open(spool, "rb") as f:
            stat = store.put(address, iter(lambda: f.read(8 << 20), b""))
        os.unlink(spool)
        return WrittenFile(path, address, stat.size, stat.etag)

    # --- driver --------------------------------------------------------------------------
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Stage every written file (and, to overwrite, delete what was there); commit once.

        On failure, what was staged is reset and the files are deleted.
        """
        target = self.target
        files = _written(messages)
        self._delete_files(keep={f.physical_address for f in files})  # failed attempts' files
        staged: list[str] = []
        with LakeFSClient(target.server) as client:
            try:
                deleted = self._delete_old(client, {f.path for f in files})
                staged.extend(deleted)
                with ThreadPoolExecutor(max_workers=8) as pool:
                    for f in files:
                        staged.append(f.path)
                    list(pool.map(lambda f: client.link_physical_address(
                        target.repository, target.branch, f.path, f.physical_address, f.size,
                        f.checksum, "application/x-parquet"), files))
                if not staged:
                    log.info("write job %s wrote nothing: no commit", target.job_id)
                    return
                self._commit(client)
            except BaseException:
                for path in staged:
                    with contextlib.suppress(Exception):
                        client.reset_object(target.repository, target.branch, path)
                self._delete_files(keep=set())
                raise

    def _delete_old(self, client: LakeFSClient, new_paths: set[str]) -> list[str]:
        if not self.overwrite:
            return []
        prefix = f"{self.target.path}/" if self.target.path else ""
        old = [o["path"] for o in client.list_objects(self.target.repository,
                                                      self.target.branch, prefix)
               if o.get("path_type", "object") == "object" and o["path"] not in new_paths]
        client.delete_objects(self.target.repository, self.target.branch, old)
        return old

    def _commit(self, client: LakeFSClient) -> None:
        target = self.target
        metadata = {**target.commit_metadata, JOB_ID_KEY: target.job_id}
        try:
            commit = client.commit(target.repository, target.branch, target.commit_message,
                                   metadata, retry=False)
        except LakeFSError:
            # the commit may have landed with its answer lost: then it is ours, and done
            head = client.get_commit(target.repository, target.branch)
            if head.metadata.get(JOB_ID_KEY) != target.job_id:
                raise
            commit = head
        log.info("write job %s committed %s to %s@%s", target.job_id, commit.id,
                 target.repository, target.branch)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete every file the job wrote; nothing was staged."""
        self._delete_files(keep=set())
        log.info("write job %s aborted: its files are deleted", self.target.job_id)

    def _delete_files(self, keep: set[str]) -> None:
        """Delete the files in the job's ledger but those in ``keep``, and the ledger."""
        store = self.target.storage.open(self.target.namespace)
        for note in list(store.list(self.target.ledger)):
            address = store.get(note.address).decode()
            if address not in keep:
                store.delete(address)
            store.delete(note.address)


def _written(messages: Sequence[WriterCommitMessage | None]) -> list[WrittenFile]:
    return [f for m in messages if isinstance(m, LakeFSCommitMessage) for f in m.files]


def register(spark: Any) -> None:
    """Register the ``lakefs`` format with a SparkSession."""
    spark.dataSource.register(LakeFSDataSource)
